"""`doctor fix` and `doctor rollback` (the sessions are doctor/fixes/session.py).

Exit codes: 0 fixed (no error of the env left), nothing to do, declined, or a --dry-run plan · 1 the
fix failed (and was rolled back), or errors of the env remain after it (manual steps) · 2 usage ·
130 interrupted (the snapshot is on disk: `doctor rollback ID` restores it). Errors of the machine
(no GPU, /dev/shm) are reported but do not decide the code: no fix of the env can change them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from doctor.errors import UsageError
from doctor.results import ExitCode
from doctor.target import resolve_python
from doctor.engine import run_check
from doctor.fixes import validate_only
from doctor.fixes.session import FixRequest, FixUI, QuietUI, fix
from doctor.knowledge import get_stack
from doctor.report.fix_text import TextUI
from doctor.fixes import snapshot as snapmod
from doctor.fixes.session import rollback
from doctor.report.fix_text import render_snapshots


def _needs_confirmation_channel(args) -> None:
    if args.yes or getattr(args, "dry_run", False):
        return
    # `doctor rollback` has no --dry-run (it lists what it restores before asking): name only what exists.
    dry = hasattr(args, "dry_run")
    if getattr(args, "json", False):
        raise UsageError("--json cannot ask for confirmation: add --yes" + (" (or --dry-run)" if dry else ""))
    if not sys.stdin.isatty():
        raise UsageError("no terminal to confirm on: add --yes to apply without asking"
                         + (" (or --dry-run to only see the plan)" if dry else ""))


def _checker(python: str, lockfile: Path | None, show_progress: bool):
    """`doctor check` of the target, with a spinner on a terminal."""
    def check(stack_name):
        status = progress = None
        if show_progress and sys.stderr.isatty():
            from rich.console import Console

            status = Console(stderr=True).status("checking the target…")
            status.start()

            def progress(name, state):
                status.update(f"checking the target: {name} {state} (deep probes take ~15-30 s when not cached)")
        try:
            return run_check(python, stack_name=stack_name, lockfile=lockfile, progress=progress)
        finally:
            if status:
                status.stop()
    return check


def run_fix(args) -> int:
    python = resolve_python(args.python)
    lockfile = Path(args.lock).absolute() if args.lock else None
    if lockfile is not None and not lockfile.is_file():
        raise UsageError(f"--lock {args.lock}: no such file")
    if args.stack:
        get_stack(args.stack)  # unknown stack: exit 2 before any probe
    validate_only(args.only)
    _needs_confirmation_channel(args)
    ui: FixUI
    if args.json:
        ui = QuietUI()
    else:
        ui = TextUI()
    req = FixRequest(python=python, python_given=bool(args.python), lockfile=lockfile, stack_name=args.stack,
                     only=args.only, dry_run=bool(args.dry_run), yes=bool(args.yes))
    doc = fix(req, ui, _checker(python, lockfile, not args.json))
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return doc["exit_code"]


def run_rollback(args) -> int:
    python_arg = resolve_python(args.python) if args.python else None
    ui = TextUI()
    if args.list:
        render_snapshots(ui.out, snapmod.list_all(python_arg), str(snapmod.snapshots_dir()))
        return ExitCode.OK
    snap = snapmod.find(args.snapshot, python_arg)
    python = python_arg or snap.meta["target"]
    if not Path(python).exists():
        raise UsageError(f"snapshot {snap.id}: its target {python} no longer exists (give --python PATH)")
    _needs_confirmation_channel(args)
    return rollback(snap, python, ui, args.yes)
