"""Knowledge is data: version rules, error signatures, stacks and finding texts live in YAML files
beside this module, each entry with the source it came from. Code only reads them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

KNOWLEDGE_DIR = Path(__file__).parent
STACKS_DIR = KNOWLEDGE_DIR / "stacks"

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_Loader)


@functools.lru_cache(maxsize=None)
def load(name: str) -> Any:
    """One knowledge file by stem: load("findings") reads findings.yaml."""
    return _load(KNOWLEDGE_DIR / f"{name}.yaml")


@functools.lru_cache(maxsize=None)
def stacks() -> dict[str, dict]:
    out = {}
    for path in sorted(STACKS_DIR.glob("*.yaml")):
        data = _load(path)
        out[data["name"]] = data
    return out


def default_stack() -> dict:
    return next(s for s in stacks().values() if s.get("default"))


def get_stack(name: str | None) -> dict:
    """A known stack by name (None: the default one); an unknown name is bad input."""
    from doctor.errors import UsageError

    known = stacks()
    if name is None:
        return default_stack()
    if name not in known:
        raise UsageError(f"unknown stack {name!r}; known: {', '.join(sorted(known))}")
    return known[name]


def finding_defs() -> dict[str, dict]:
    return {d["id"]: d for d in load("findings")}
