"""lock.drift: the target against a lockfile (--lock)."""

from __future__ import annotations

from doctor.names import canonical_name

from doctor import knowledge
from doctor.findings import make
from doctor.rules.registry import rule
from doctor.dists import user_project


@rule("the target matches the lockfile", "lock", needs=("distributions",),
      applies=lambda ctx: None if ctx.lock is not None else "no --lock given", emits=("lock.drift",))
def drift(facts, ctx):
    ignore = {canonical_name(i["dist"]) for i in knowledge.load("lock")["ignore_extra"]}
    dists = facts["distributions"]
    evidence = []
    for name, pin in sorted(ctx.lock.items()):
        have = dists.get(name)
        if have is None:
            evidence.append(f"missing: {name}=={pin['version']}")
        elif have["version"] != pin["version"]:
            evidence.append(f"different: {name} {have['version']} installed, {pin['version']} locked")
    for name in sorted(set(dists) - set(ctx.lock) - ignore):
        if user_project(facts, name):  # installed from the user's checkout: a lock never pins it
            continue
        evidence.append(f"extra: {name}=={dists[name]['version']} (not in the lock)")
    if evidence:
        yield make("lock.drift", evidence, count=len(evidence), lockfile=ctx.lockfile, python=ctx.python)
