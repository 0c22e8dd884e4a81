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


API_HISTORY_DIR = KNOWLEDGE_DIR / "api_history"
_API_KINDS = (("modules", 1), ("names", 2), ("kwargs", 2), ("callables", 1), ("attrs", 2), ("classes", 1))


def api_history_dists() -> list[str]:
    """The distributions whose API history is shipped (knowledge/api_history/<dist>.json)."""
    return sorted(p.stem for p in API_HISTORY_DIR.glob("*.json"))


@functools.lru_cache(maxsize=None)
def api_history(dist: str) -> dict:
    """One distribution's API history, generated from its released archives by
    benchmarks/build_api_history.py: which releases had each module, name, keyword argument and
    attribute that did not exist in all of them. Its shape is checked here (generated data, one line
    on a bad file); ranges are inclusive indexes into `releases`."""
    path = API_HISTORY_DIR / f"{dist}.json"
    if not path.is_file():
        raise KnowledgeError(f"{_short(path)}: no such API history")
    # parsed and checked once per file content (doctor/derived.py): the files are megabytes
    return derived(path, "api-history", lambda raw: _checked_api_history(raw, path, dist), code=(__file__,))


def _checked_api_history(raw: bytes, path: Path, dist: str) -> dict:
    import json  # lazy: only a failure that asks for a name reads these files

    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise KnowledgeError(f"{_short(path)}: cannot be read as JSON ({exc})")
    releases = data.get("releases") if isinstance(data, dict) else None
    if not (isinstance(releases, list) and releases and all(isinstance(r, str) for r in releases)) \
            or data.get("dist") != dist or not isinstance(data.get("source"), str):
        raise KnowledgeError(f"{_short(path)}: needs dist {dist!r}, a source and a list of releases")
    n = len(releases)

    def ranges_ok(v: Any) -> bool:
        return isinstance(v, list) and all(isinstance(r, list) and len(r) == 2 and 0 <= r[0] <= r[1] < n
                                           and all(isinstance(i, int) for i in r) for r in v)

    for kind, depth in _API_KINDS:
        table = data.get(kind, {})
        ok = isinstance(table, dict) and all(
            ranges_ok(v) if depth == 1 else isinstance(v, dict) and all(ranges_ok(x) for x in v.values())
            for v in table.values())
        if not ok:
            raise KnowledgeError(f"{_short(path)}: field {kind!r} must map names to lists of [first, last] "
                                 f"release indexes (0..{n - 1})")
    return data
