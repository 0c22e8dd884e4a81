"""The target interpreter: the Python whose environment is diagnosed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from doctor.errors import UsageError


def default_python() -> str:
    """The active virtualenv's interpreter, else the one running the doctor."""
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        cand = Path(venv) / "bin" / "python"
        if cand.exists():
            return str(cand)
    return sys.executable


def default_note(arg: str | None = None) -> str | None:
    """Which interpreter a command without --python inspects, in words (None when --python was given)."""
    if arg is not None:
        return None
    if os.environ.get("VIRTUAL_ENV") and default_python() != sys.executable:
        return f"the active virtualenv ($VIRTUAL_ENV={os.environ['VIRTUAL_ENV']})"
    return "the doctor's own interpreter (no --python given and no active virtualenv)"


def resolve_python(arg: str | None) -> str:
    """Validate --python: it must be an existing, executable file (a Python is confirmed when the
    first probe runs in it). Without it, the default (default_note() says which, in the command's
    first line: a target is never chosen silently)."""
    if arg is None:
        return default_python()
    path = Path(arg).expanduser()
    if not path.exists():
        raise UsageError(f"--python {arg}: no such file")
    if path.is_dir():
        hint = path / "bin" / "python"
        extra = f" (did you mean {hint}?)" if hint.exists() else ""
        raise UsageError(f"--python {arg}: is a directory, not an interpreter{extra}")
    if not os.access(path, os.X_OK):
        raise UsageError(f"--python {arg}: is not executable")
    # Keep the venv's own path (not the resolved symlink): a venv's bin/python links to the base
    # interpreter, and running the base would inspect the wrong site-packages.
    return str(path.absolute())
