"""pip.conflict: declared requirements the installed set violates (what `pip check` reports)."""

from __future__ import annotations

import functools
import shlex
from collections.abc import Mapping

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from doctor.names import canonical_name

from doctor.findings import make
from doctor.rules.registry import rule
from doctor.dists import satisfies
from doctor.stacks import stack_lockfile_for


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
