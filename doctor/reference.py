"""The env against its known-good set (the stack's lockfile or --lock): what differs, and which of
those differences lie on a failing import's path."""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from doctor.names import canonical_name
from packaging.version import InvalidVersion, Version

from doctor.dists import installed, user_project
from doctor.facts import Facts


def differs_from_reference(facts: Facts, reference: dict | None) -> dict[str, tuple[str, str | None]]:
    """{dist: (installed, known-good or None)} for the stack's distributions that differ from the
    known-good set: another version, or missing there though locked."""
    ref = (reference or {}).get("pins") or {}
    out: dict[str, tuple[str, str | None]] = {}
    for name, locked in ref.items():
        if user_project(facts, name):  # the user's own code differs by design (version.user-project)
            continue
        have = installed(facts, name)
        if have is None:
            out[name] = ("missing", locked)
            continue
        try:
            same = Version(have).public == Version(locked).public
        except InvalidVersion:
            same = have == locked
        if not same:
            out[name] = (have, locked)
    return out


# Where a message names a library: `from 'pydantic'`, a missing module, a path in site-packages, or a
# library's own version check ("tokenizers>=0.21,<0.22 is required … but found tokenizers==0.20.3").
_MODULE_IN_TEXT = re.compile(r"from '([A-Za-z_][\w]*)|No module named '([A-Za-z_]\w*)|(?:site|dist)-packages/([A-Za-z_]\w*)"
                             r"|module '([A-Za-z_]\w*)' has no attribute"
                             r"|but found ([A-Za-z][\w.-]*)==")


def requirement_closure(facts: Facts, roots: list[str]) -> set[str]:
    """Every distribution `roots` need, through the installed distributions' declared requirements
    (requirements of extras are not followed: a plain requirement does not install them)."""
    dists: dict = dict(facts.get("distributions") or {})
    seen: set[str] = set()
    todo = [str(canonical_name(r)) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in (dists.get(name) or {}).get("requires") or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and "extra" in str(req.marker):
                continue
            todo.append(str(canonical_name(req.name)))
    return seen


def module_owners(facts: Facts) -> dict[str, list[str]]:
    """import name → the distributions that provide it (the distributions probe's top_level)."""
    out: dict[str, list[str]] = {}
    for name, d in (facts.get("distributions") or {}).items():
        for mod in d.get("top_level") or []:
            out.setdefault(mod, []).append(name)
    return out


def culprits(facts: Facts, reference: dict | None, info: dict) -> list[str]:
    """The distributions on a failing import's path that differ from the known-good set: those
    its frames ran in, and those its message names (`from 'pydantic'`, a .so path, a missing module);
    else those the failing distribution needs, through the dependency graph (a library tripping over
    a changed dependency whose name its message does not say)."""
    diff = differs_from_reference(facts, reference)
    if not diff:
        return []
    owner = module_owners(facts)  # import name → distribution (yaml → pyyaml), where the probe could tell
    names: list[str] = [canonical_name(d) for d in info.get("chain_dists") or []]
    modules = [next(g for g in m.groups() if g) for m in _MODULE_IN_TEXT.finditer(info.get("text") or info.get("message") or "")]
    if info.get("missing_module"):
        modules.append(info["missing_module"])
    for top in modules:
        top = top.split(".")[0]
        names += [*owner.get(top, []), canonical_name(top), canonical_name(top.replace("_", "-"))]
    named = [str(n) for n in dict.fromkeys(n for n in names if n in diff)]
    if named:
        return named
    owners = [d for d in [info.get("failing_dist"), *(info.get("chain_dists") or [])] if d]
    closure = requirement_closure(facts, owners) - {canonical_name(o) for o in owners}
    if info.get("type") == "ModuleNotFoundError":
        # a module that is not there is explained only by a distribution that is not there either,
        # never by one at another version (uvicorn 0.54 does not remove modelscope)
        return sorted(n for n in closure if n in diff and diff[n][0] == "missing")
    return sorted(n for n in closure if n in diff)
