"""Knowledge is data: version rules, error signatures, stacks and finding texts live in YAML files
beside this module, each entry with the source it came from. Code only reads them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from doctor.knowledge import patterns as _patterns, schema as _schema
from doctor.knowledge.patterns import NEEDLES, Needle, needle_of
from doctor.knowledge.schema import KnowledgeError, validate
from doctor.errors import UsageError
from doctor.derived import derived

KNOWLEDGE_DIR = Path(__file__).parent
STACKS_DIR = KNOWLEDGE_DIR / "stacks"


def _load_checked(path: Path, schema: str) -> Any:
    """Load and validate: a file that does not match its schema is one line (KnowledgeError). The
    validated data is kept (doctor/derived.py) with its patterns' needles (knowledge/patterns.py): a
    warm start neither parses YAML nor checks it again."""

    def parse_and_check(raw: bytes) -> tuple[Any, dict[str, Needle | None]]:
        import yaml  # lazy: a warm start reads the validated copy and never needs the YAML parser (issue 25)

        try:
            data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark else ""
            raise KnowledgeError(f"{path}:{where} is not valid YAML ({getattr(exc, 'problem', None) or exc})")
        found: list[str] = []
        validate(schema, data, _short(path), found)
        return data, {p: needle_of(p) for p in found}

    data, needles = derived(path, f"knowledge-{schema}", parse_and_check,
                            code=(__file__, _schema.__file__, _patterns.__file__))
    NEEDLES.update(needles)
    return data


def _short(path: Path) -> str:
    try:
        return str(path.relative_to(KNOWLEDGE_DIR.parents[1]))
    except ValueError:
        return str(path)


@functools.lru_cache(maxsize=None)
def load(name: str) -> Any:
    """One knowledge file by stem, validated: load("findings") reads findings.yaml."""
    return _load_checked(KNOWLEDGE_DIR / f"{name}.yaml", name)


@functools.lru_cache(maxsize=None)
def stacks() -> dict[str, dict]:
    out = {}
    known = families()
    for path in sorted(STACKS_DIR.glob("*.yaml")):
        data = _load_checked(path, "stack")
        if data["family"] not in known:
            raise KnowledgeError(f"{path}: field 'family': {data['family']!r} is not a family of families.yaml "
                                 f"({', '.join(known)})")
        out[data["name"]] = data
    return out


@functools.lru_cache(maxsize=None)
def families() -> dict[str, dict]:
    """The stack families (families.yaml), by name, each with its stacks' names (`stacks`)."""
    data = load("families")
    out = {f["name"]: {**f, "stacks": []} for f in data["families"]}
    for path in sorted(STACKS_DIR.glob("*.yaml")):
        stack = _load_checked(path, "stack")
        if stack["family"] in out:
            out[stack["family"]]["stacks"].append(stack["name"])
    return out


def default_stack() -> dict:
    return next(s for s in stacks().values() if s.get("default"))


def get_stack(name: str | None) -> dict:
    """A known stack by name (None: the default one); an unknown name is bad input."""
    known = stacks()
    if name is None:
        return default_stack()
    if name not in known:
        raise UsageError(f"unknown stack {name!r}; known: {', '.join(sorted(known))}")
    return known[name]


def stack_pins(stack: dict) -> dict[str, str]:
    """The exact pins among a stack's requirements (`torch==2.4.0` → {"torch": "2.4.0"})."""
    return {r.split("==")[0]: r.split("==")[1] for r in stack["requirements"] if "==" in r}


def finding_defs() -> dict[str, dict]:
    return {d["id"]: d for d in load("findings")}
