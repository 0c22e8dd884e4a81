"""Which known stack a target is: decided once per check (`choose_stack`), then read by every rule
from the context. Also what a stack asks of an env (its lockfile for the target's Python, the
distributions it needs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from doctor.names import canonical_name
from packaging.version import InvalidVersion, Version

from doctor import knowledge
from doctor.dists import installed, satisfies, user_project
from doctor.facts import Facts
from doctor.lockfiles import parse_lockfile, stack_lockfile


CORE = ("verl", "vllm", "torch", "transformers")   # what a fix never moves into another family unasked


@dataclass(frozen=True)
class StackChoice:
    """The stack a check judges the target against, its family, and how they were chosen."""

    stack: dict | None     # None: no known family (or a family without a reference stack)
    by_flag: bool          # chosen with --stack (else: the family of the installed verl)
    met: int               # installed constraints of the stack the target meets
    total: int             # constraints whose distribution is installed
    family: str | None = None          # families.yaml name; None: no known family
    evidence: tuple[str, ...] = ()     # why this family (what is installed)

    @property
    def name(self) -> str:
        return self.stack["name"] if self.stack else "none"

    @property
    def how(self) -> str:
        if self.by_flag:
            return "chosen with --stack"
        if self.family is None:
            return "no known family"
        return f"the {self.family} family of the installed verl" if self.stack else \
            f"the {self.family} family has no reference stack"


def constraint_applies(c: dict, facts: Facts | None) -> bool:
    """Whether a stack constraint holds for this env: a conditional one (`when`: a pin that is true
    only beside some version of another distribution, "datasets < 2.16 needs fsspec <= 2023.9.2")
    applies only where that distribution is installed at such a version. Without facts: always."""
    when = c.get("when")
    if not when or facts is None:
        return True
    other = installed(facts, when["dist"])
    return other is not None and satisfies(other, when["spec"])


def constraint_lines(stack: dict, facts: Facts | None = None) -> str:
    """The stack's constraints as a pip constraints file; for an env (facts), only those that apply."""
    return "\n".join(f"{c['dist']}{c['spec']}" for c in stack["constraints"] if constraint_applies(c, facts)) + "\n"


def _score(facts: Facts, stack: dict) -> tuple[int, int, float]:
    w = knowledge.load("system")["closest_stack"]
    met = total = 0
    score = 0.0
    for c in stack["constraints"]:
        v = installed(facts, c["dist"])
        if v is None or not constraint_applies(c, facts):
            continue
        total += 1
        if satisfies(v, c["spec"]):
            met += 1
            score += w["pinned_weight"] if c["dist"] in w["pinned"] else w["weight"]
    return met, total, score


def closest_stack(facts: Facts, family: str | None = None) -> tuple[dict, int, int] | None:
    """The known stack (of `family` when given) whose constraints the target meets best (verl and
    vllm pins weigh most); None when the family has no stack."""
    best = None
    for stack in knowledge.stacks().values():
        if family is not None and stack["family"] != family:
            continue
        met, total, score = _score(facts, stack)
        key = (score, bool(stack.get("default")))
        if best is None or key > best[0]:
            best = (key, stack, met, total)
    return (best[1], best[2], best[3]) if best else None


def family_of_verl(version: str) -> str | None:
    """The family whose verl line a version string is in (families.yaml `verl`), or None."""
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return next((name for name, f in knowledge.families().items()
                 if v in SpecifierSet(f["verl"], prereleases=True)), None)


def release_of(version: str) -> dict | None:
    """The verl release a version string is (0.8.0.dev at tag v0.8.0 is 0.8.0), from families.yaml."""
    try:
        v = Version(version).release[:3]
    except InvalidVersion:
        return None
    return next((r for r in knowledge.load("families")["releases"] if Version(r["verl"]).release[:3] == v), None)


def detect_family(facts: Facts) -> tuple[str | None, list[str]]:
    """The family of the target, decided from its installed verl (a wheel's version, or the version
    of the user's own checkout: a paper fork's vendored verl says 0.1), and the evidence."""
    verl = installed(facts, "verl")
    if verl is None:
        return None, ["verl is not installed: no family to judge against (the env is judged on its own "
                      "declared requirements and the probes)"]
    project = user_project(facts, "verl")
    where = f"verl {verl} from your checkout {project} (its own code)" if project else f"verl {verl} installed"
    family = family_of_verl(verl)
    if family is None:
        known = ", ".join(f"{n} (verl {f['verl']})" for n, f in knowledge.families().items())
        return None, [f"{where}: of no known family ({known}); judged on its own declared requirements and the "
                      "probes only, never on another family's pins"]
    evidence = [f"{where}: family {family} (verl {knowledge.families()[family]['verl']})"]
    release = release_of(verl)
    if release:
        evidence.append(f"verl {release['verl']} ({release['date']}) was built and tested with vllm {release['vllm']}, "
                        f"torch {release['torch']}, transformers {release['transformers']}, python {release['python']} "
                        f"— {release['source']}")
    return family, evidence


def choose_stack(facts: Facts, given: dict | None = None) -> StackChoice:
    """The stack of this check, decided once: --stack's when given (its family is then the one the
    user asked for by name), else the reference stack of the installed verl's family, else none."""
    if given is not None:
        met, total, _ = _score(facts, given)
        family, evidence = detect_family(facts)
        said = [f"--stack {given['name']}: family {given['family']}"] + (
            [f"installed: {evidence[0]}"] if family != given["family"] else [])
        return StackChoice(given, True, met, total, given["family"], tuple(said))
    family, evidence = detect_family(facts)
    found = closest_stack(facts, family) if family else None
    if found is None:
        if family:
            evidence.append(f"the doctor has no reference stack of {family} yet: judged on the env's own declared "
                            "requirements and the probes")
        return StackChoice(None, False, 0, 0, family, tuple(evidence))
    stack, met, total = found
    return StackChoice(stack, False, met, total, family, tuple(evidence))


def stack_lockfile_for(facts: Facts, stack: dict | None) -> str | None:
    """The shipped lockfile for the target's Python, or, when the stack has none for it, the one for
    the newest Python it is locked for (python.version-unverified says so); None when the stack has no
    lockfile at all (lock_note says why) — never a path that does not exist."""
    if not stack:
        return None
    pyver = facts["markers"]["python_version"]
    path = stack_lockfile(stack["name"], pyver if pyver in stack["python"] else stack["python"][-1])
    return str(path) if path.is_file() else None


@dataclass(frozen=True)
class FamilyGuard:
    """What a fix may move: the env's family, whether the user named a stack (--stack), and the
    installed versions of the core distributions (CORE)."""

    family: str | None
    asked: bool
    installed: dict[str, str]


def family_guard(choice: StackChoice | None, facts: Facts) -> FamilyGuard:
    dists = facts.get("distributions") or {}
    have = {d: v for d in CORE if dists and (v := installed(facts, d))}
    if choice is None:
        family, _ = detect_family(facts) if dists else (None, [])
        return FamilyGuard(family, False, have)
    return FamilyGuard(choice.family, choice.by_flag, have)


def _admits_any(spec: SpecifierSet, within: SpecifierSet) -> bool:
    """Does some version satisfy both? (tried on the versions the two name, and just above them)"""
    points = [Version(s.version.replace("*", "0")) for s in list(spec) + list(within) if s.version]
    tries = points + [Version(".".join(map(str, p.release)) + ".1") for p in points]
    return any(spec.contains(t, prereleases=True) and within.contains(t, prereleases=True) for t in tries)


def crosses_family(requirement: str, guard: FamilyGuard | None) -> str | None:
    """Why installing `requirement` would move the env into another family (a reason to refuse it), or
    None. Only verl, vllm, torch and transformers count; a stack the user named (--stack) is asked for."""
    if guard is None or guard.asked:
        return None
    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return None
    name = canonical_name(req.name)
    if name not in CORE or not (str(req.specifier) or req.url):
        return None
    have = guard.installed.get(name)
    if have is not None and not req.url and satisfies(have, str(req.specifier)):
        return None  # it stays where it is
    now = f"{name} {have}" if have else f"{name} (not installed)"
    if guard.family is None:
        return (f"{requirement} would replace {now} in an env of no known family: the doctor does not choose a "
                "family for it (name one with --stack to ask for it)")
    fam = knowledge.families()[guard.family]
    within = fam["verl"] if name == "verl" else fam["dists"].get(name)
    if within is None or req.url:
        return None if within is None else f"{requirement} is a direct URL: the doctor cannot tell its family"
    if _admits_any(req.specifier, SpecifierSet(within)):
        return None
    return (f"{requirement} is outside the {guard.family} family ({name}{within}): it would move {now} into another "
            f"family; run it only if you want that family (name its stack with --stack)")


def stack_modules(stack: dict | None) -> list[str]:
    """The modules of a stack's trainer path (its `modules`, else python_env.yaml's); with no stack,
    only the top-level modules and those every verl release has (families.yaml common_modules)."""
    if stack is None:
        common = knowledge.load("families")["common_modules"]
        return [m for m in knowledge.load("python_env")["stack_modules"] if "." not in m or m in common]
    return stack.get("modules") or knowledge.load("python_env")["stack_modules"]


def missing_stack_dists(facts: Facts, stack: dict | None) -> list[str]:
    """The stack's distributions that are not installed (no stack: verl, vLLM, torch, transformers and
    the top-level modules verl imports): its top-level requirements, then the
    distributions of the modules the imports probe loads (pyarrow, triton, xformers: verl's and
    vLLM's own requirements), except those a finding of their own reports when missing
    (findings.yaml `missing_dist`)."""
    own = {canonical_name(d["missing_dist"]) for d in knowledge.load("findings") if d.get("missing_dist")}
    names = [canonical_name(Requirement(text).name) for text in stack.get("requirements", [])] if stack else list(CORE)
    names += [canonical_name(m.split(".")[0]) for m in stack_modules(stack)]
    return [n for n in dict.fromkeys(names) if n not in own and n not in facts["distributions"]]


def reference_pins(facts: Facts, stack: dict | None, lockfile: Path | None, lock: dict | None) -> dict | None:
    """The known-good set to compare the env with: --lock, else the stack's shipped lockfile for
    the target's Python (None when the stack has none). Reads the lockfile: the engine calls it
    once and hands the pins to the rules."""
    if lock is not None and lockfile is not None:
        return {"lockfile": str(lockfile), "pins": {n: e["version"] for n, e in lock.items()}}
    try:
        found = stack_lockfile_for(facts, stack)
    except (KeyError, TypeError):
        return None
    if found is None:
        return None
    path = Path(found)
    return {"lockfile": str(path), "pins": {n: e["version"] for n, e in parse_lockfile(path).items()}}
