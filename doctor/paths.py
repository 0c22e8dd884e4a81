"""Where the project's top-level data folders are: `lockfiles/` (the hashed locks), `containers/`
(the image definition) and `recipes/` (the recipe YAMLs).

Each has one copy, at the repository root. In a source checkout or an editable install that is the
folder used (the package dir has pyproject.toml beside it and the folder next to it). A built wheel
carries a copy inside the package, `doctor/_shipped/<name>` (setup.py's build_py copies it there),
and that is the folder used after `pip install verl-doctor` / `pip install <wheel>`. Stdlib only."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SHIPPED_DIR = PACKAGE_DIR / "_shipped"
FOLDERS = ("lockfiles", "containers", "recipes")


def source_root() -> Path | None:
    """The repository root when the doctor runs from a checkout (editable install or sys.path)."""
    root = PACKAGE_DIR.parent
    return root if (root / "pyproject.toml").is_file() else None


def folder(name: str) -> Path:
    """The folder NAME (one of FOLDERS): the checkout's root copy, else the copy in the package."""
    if name not in FOLDERS:
        raise ValueError(f"unknown project folder {name!r} (known: {', '.join(FOLDERS)})")
    root = source_root()
    if root is not None and (root / name).is_dir():
        return root / name
    return SHIPPED_DIR / name


def lockfiles_dir() -> Path:
    return folder("lockfiles")


def containers_dir() -> Path:
    return folder("containers")


def recipes_dir() -> Path:
    return folder("recipes")


def state_dir() -> Path:
    """Where the doctor keeps what it must find again (snapshots, per-target locks, the constraints
    files its printed fix commands name): $VERL_DOCTOR_STATE_DIR, else $XDG_STATE_HOME/verl-doctor."""
    base = os.environ.get("VERL_DOCTOR_STATE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "verl-doctor"


def cache_dir() -> Path:
    """The doctor's own cache ($VERL_DOCTOR_CACHE_DIR, else $XDG_CACHE_HOME/verl-doctor or ~/.cache/verl-doctor):
    probe results, distribution lists, validated knowledge. Deleting it only costs time."""
    base = os.environ.get("VERL_DOCTOR_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "verl-doctor"
