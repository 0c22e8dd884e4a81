"""Which known stack a target is: decided once per check (`choose_stack`), then read by every rule
from the context. Also what a stack asks of an env (its lockfile for the target's Python, the
distributions it needs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from doctor import knowledge
from doctor.dists import installed, satisfies
from doctor.facts import Facts
from doctor.lockfiles import parse_lockfile, stack_lockfile


@dataclass(frozen=True)
class StackChoice:
    """The stack a check judges the target against, and how it was chosen."""

    stack: dict
    by_flag: bool          # chosen with --stack (else: closest by installed versions)
    met: int               # installed constraints of the stack the target meets
    total: int             # constraints whose distribution is installed

    @property
    def name(self) -> str:
        return self.stack["name"]

    @property
    def how(self) -> str:
        return "chosen with --stack" if self.by_flag else "closest by installed versions"


def _score(facts: Facts, stack: dict) -> tuple[int, int, float]:
    w = knowledge.load("system")["closest_stack"]
    met = total = 0
    score = 0.0
    for c in stack["constraints"]:
        v = installed(facts, c["dist"])
        if v is None:
            continue
        total += 1
        if satisfies(v, c["spec"]):
            met += 1
            score += w["pinned_weight"] if c["dist"] in w["pinned"] else w["weight"]
    return met, total, score


def closest_stack(facts: Facts) -> tuple[dict, int, int]:
    """The known stack whose constraints the target meets best (verl and vllm pins weigh most)."""
    best = None
    for stack in knowledge.stacks().values():
        met, total, score = _score(facts, stack)
        key = (score, bool(stack.get("default")))
        if best is None or key > best[0]:
            best = (key, stack, met, total)
    assert best is not None, "knowledge/stacks/ has no stack"
    return best[1], best[2], best[3]


def choose_stack(facts: Facts, given: dict | None = None) -> StackChoice:
    """The stack of this check: --stack's when given, else the closest by installed versions."""
    if given is not None:
        met, total, _ = _score(facts, given)
        return StackChoice(given, True, met, total)
    stack, met, total = closest_stack(facts)
    return StackChoice(stack, False, met, total)


def stack_lockfile_for(facts: Facts, stack: dict) -> str:
    """The shipped lockfile for the target's Python, or, when the stack has none for it, the one for
    the newest Python it is locked for (python.version-unverified says so)."""
    pyver = facts["markers"]["python_version"]
    return str(stack_lockfile(stack["name"], pyver if pyver in stack["python"] else stack["python"][-1]))


def missing_stack_dists(facts: Facts, stack: dict) -> list[str]:
    """The stack's distributions that are not installed: its top-level requirements, then the
    distributions of the modules the imports probe loads (pyarrow, triton, xformers: verl's and
    vLLM's own requirements), except those a finding of their own reports when missing
    (findings.yaml `missing_dist`)."""
    own = {canonicalize_name(d["missing_dist"]) for d in knowledge.load("findings") if d.get("missing_dist")}
    names = [canonicalize_name(Requirement(text).name) for text in stack.get("requirements", [])]
    names += [canonicalize_name(m.split(".")[0]) for m in knowledge.load("python_env")["stack_modules"]]
    return [n for n in dict.fromkeys(names) if n not in own and n not in facts["distributions"]]


def reference_pins(facts: Facts, stack: dict, lockfile: Path | None, lock: dict | None) -> dict | None:
    """The known-good set to compare the env with: --lock, else the stack's shipped lockfile for
    the target's Python (None when the stack has none). Reads the lockfile: the engine calls it
    once and hands the pins to the rules."""
    if lock is not None and lockfile is not None:
        return {"lockfile": str(lockfile), "pins": {n: e["version"] for n, e in lock.items()}}
    try:
        path = Path(stack_lockfile_for(facts, stack))
    except (KeyError, TypeError):
        return None
    if not path.is_file():
        return None
    return {"lockfile": str(path), "pins": {n: e["version"] for n, e in parse_lockfile(path).items()}}
