"""Questions about the target's installed distributions (the distributions probe's facts): which
version is installed, whether it meets a specifier, and which ones are the user's own checkout."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from doctor.names import canonical_name
from packaging.version import InvalidVersion, Version

from doctor.facts import Dist, Facts


def installed(facts: Facts, dist: str) -> str | None:
    d = facts["distributions"].get(canonical_name(dist))
    return d["version"] if d else None


def satisfies(version: str, spec: str) -> bool:
    try:
        return Version(version) in SpecifierSet(spec, prereleases=True)
    except InvalidVersion:
        return False


def checkout_of(dist: Dist | dict) -> str | None:
    """The user's own checkout a distribution record (the distributions probe's) is installed from
    (pip install -e, a source tree on sys.path), or None."""
    return dist.get("project") or (dist.get("path") if dist.get("editable") else None)


def user_project(facts: Facts, dist: str) -> str | None:
    """The user's own checkout a distribution is installed from, or None: that code is the
    project's, judged by what it does, never replaced."""
    return checkout_of(facts["distributions"].get(canonical_name(dist)) or {})


def user_projects(facts: Facts) -> dict[str, str]:
    """name -> checkout, for every distribution of the target that is the user's own code."""
    return {n: p for n in facts.get("distributions") or {} if (p := user_project(facts, n))}
