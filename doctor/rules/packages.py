"""pip.conflict: declared requirements the installed set violates (what `pip check` reports)."""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Mapping

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from doctor.names import canonical_name

from doctor.findings import make
from doctor.rules.registry import rule
from doctor.dists import satisfies
from doctor.stacks import stack_lockfile_for


# a marker clause naming an extra: `extra == "test"` (false when no extra is asked for)
_EXTRA_CLAUSE = re.compile(r"\bextra\s*==\s*[\"'][^\"']+[\"']")
_OR = re.compile(r"\bor\b")


def _extra_only(text: str) -> bool:
    """A requirement of an extra (`pytest; extra == "test"`, `x; python_version < "3.9" and extra == "dev"`):
    its marker is a conjunction with an extra clause, so it is false for the installed set (pip check asks
    for no extra) — decided without parsing it. Four of five requirements in an env are such; parsing them
    all was half of a warm `doctor check` (issue 25)."""
    _, sep, marker = text.partition(";")
    return bool(sep) and _OR.search(marker) is None and _EXTRA_CLAUSE.search(marker) is not None


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def conflicts(facts: Mapping) -> list[str]:
    return [line for line, _ in violated(facts)]


def violated(facts: Mapping) -> list[tuple[str, str]]:
    """(what `pip check` says, the requirement that would satisfy it) for every unmet requirement."""
    dists = facts["distributions"]
    env = dict(facts["markers"], extra="")
    out = []
    for key in sorted(dists):
        d = dists[key]
        for text in d["requires"]:
            if _extra_only(text):
                continue
            req = _parse(text)
            if req is None:
                continue
            if req.marker is not None:
                try:
                    if not req.marker.evaluate(env):
                        continue
                except UndefinedEnvironmentName:
                    continue
            have = dists.get(canonical_name(req.name))
            wanted = f"{req.name}{'[' + ','.join(sorted(req.extras)) + ']' if req.extras else ''}{req.specifier}"
            if have is None:
                out.append((f"{d['name']} {d['version']} requires {req.name}, which is not installed", wanted))
            elif req.specifier and not satisfies(have["version"], str(req.specifier)):
                out.append((f"{d['name']} {d['version']} requires {req.name}{req.specifier}, but {have['version']} is "
                            "installed", wanted))
    return out


@rule("declared requirements are met (pip check)", "packages", needs=("distributions",), emits=("pip.conflict",))
def pip_conflict(facts, ctx):
    found = violated(facts)
    if found:
        stack = ctx.chosen.stack
        # What resolves it is the unmet requirements themselves, within the known-good set as constraints:
        # never a sync of the lock, which would replace the user's own checkout (a paper's verl) and remove
        # whatever else they installed (IPython, matplotlib …) — issue 26.
        wanted = " ".join(shlex.quote(w) for w in dict.fromkeys(w for _, w in found))
        yield make("pip.conflict", [line for line, _ in found], count=len(found), stack=ctx.chosen.name,
                   python=ctx.python, requirements=wanted,
                   lockfile=(stack_lockfile_for(facts, stack) if stack else None) or "{lockfile}")
