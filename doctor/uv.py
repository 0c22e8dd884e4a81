"""The uv binary the doctor drives (uv is a dependency: the PyPI `uv` package ships it)."""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import sys
from pathlib import Path

from doctor.errors import UsageError


def uv_bin() -> str:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except Exception:  # noqa: BLE001 - a broken uv package: fall back to PATH
        found = shutil.which("uv")
        if not found:
            raise UsageError("uv not found: install it with `pip install uv`")
        return found


@functools.lru_cache(maxsize=None)
def _program(name: str) -> str:
    """How a new shell reaches the doctor's own `uv` / `doctor` / `recipes`: the bare name when PATH
    finds this very program, else its absolute path (a README set-up puts them in .venv/bin only)."""
    if name == "uv":
        try:
            mine = Path(uv_bin())
        except UsageError:
            return name
    else:
        mine = Path(sys.executable).parent / name
        if not mine.exists():
            return f"{shlex.quote(sys.executable)} -m doctor" if name == "doctor" else \
                f"{shlex.quote(sys.executable)} -m doctor.recipes.cli"
    found = shutil.which(name)
    if found and Path(found).resolve() == mine.resolve():
        return name
    return shlex.quote(str(mine))


def runnable(command: str) -> str:
    """A printed command as it runs when pasted into a new shell (`uv …` → `/path/.venv/bin/uv …`),
    each part of an `a && b` chain."""
    if " && " in command:
        return " && ".join(runnable(part) for part in command.split(" && "))
    prefix = re.match(r"env(?: -u [A-Za-z_]\w*)+ ", command)
    if prefix:  # `env -u VAR doctor …`: the program after the prefix is what must be found
        return prefix.group(0) + runnable(command[prefix.end():])
    for name in ("uv", "doctor", "recipes"):
        if command == name or command.startswith(name + " "):
            return _program(name) + command[len(name):]
    return command
