"""`doctor lock`."""

from __future__ import annotations

from pathlib import Path

from doctor import knowledge
from doctor.lockfiles.compile import main_lock


def run_lock(args) -> int:
    names = sorted(knowledge.stacks()) if args.all else args.stack
    return main_lock(names, args.python, Path(args.out))
