"""`doctor lock`."""

from __future__ import annotations

from pathlib import Path

from doctor import knowledge
from doctor.lockfiles.compile import main_lock
from doctor.errors import UsageError
from doctor.lockfiles.compile import project_lock
from doctor.target import resolve_python


def run_lock(args) -> int:
    if getattr(args, "project", None):
        import sys

        if args.stack or args.all or args.python:
            raise UsageError("--project locks the env given by --from; it takes no --stack, --all or --python")
        path, excluded = project_lock(resolve_python(args.env), Path(args.project), Path(args.out),
                                      progress=lambda m: print(f"… {m}", file=sys.stderr))
        print(path)
        print(f"left out (the project's own code, install it after the sync): {', '.join(excluded)}", file=sys.stderr)
        return 0
    names = sorted(knowledge.stacks()) if args.all else args.stack
    return main_lock(names, args.python, Path(args.out))
