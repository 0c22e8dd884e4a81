"""`doctor fix` framework: findings + their fix plans (knowledge/findings.yaml fix.plan) → a Plan of ordered Steps.

A Step has a kind (STEP_KINDS), a description, the exact commands it runs, what it changes, the
finding IDs it targets with the reason and source of each requirement, and apply(); what apply()
returns is the step's undo record, written into the snapshot before the next step starts.
Package kinds are undone together by restoring the snapshot's freeze (snapshot.restore); other
kinds (e.g. moving a stale Ray session directory aside) undo themselves from their record.

Which requirement a finding maps to is data (the finding's `fix.plan` in knowledge/findings.yaml),
never code here."""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from doctor.names import canonical_name

from doctor.facts import Facts
from doctor import knowledge
from doctor.errors import UsageError
from doctor.findings import definition
from doctor.stacks import FamilyGuard, crosses_family


class FixError(Exception):
    """A step could not be planned or applied (uv refused, resolution impossible, …)."""


@dataclass
class ApplyContext:
    """What a step needs while it runs."""

    target: str
    snapshot_dir: Path | None = None
    log: Callable[[str], None] = lambda msg: None


class StepKind:
    """One kind of change. Subclasses register themselves in STEP_KINDS."""

    name = "?"
    # True: undone by restoring the snapshot's package freeze, not by undo().
    restores_packages = False

    def make_step(self, finding, entry: dict, *, python: str, stack: dict | None) -> "Step":
        """The Step for one finding and its fix plan (kinds other than the package kinds)."""
        raise NotImplementedError

    def prepare(self, step: "Step", ctx: ApplyContext) -> None:
        """Fill step.changes with what applying would change, without changing anything."""

    def apply(self, step: "Step", ctx: ApplyContext) -> dict:
        raise NotImplementedError

    def undo(self, record: dict, ctx: ApplyContext) -> None:
        """Revert one applied step from its record (only for kinds that are not package kinds)."""


STEP_KINDS: dict[str, StepKind] = {}


def register(kind: StepKind) -> StepKind:
    STEP_KINDS[kind.name] = kind
    return kind


@dataclass
class Step:
    kind: str
    description: str
    commands: list[str]
    targets: list[str]                                   # finding IDs this step is meant to fix
    reasons: list[dict] = field(default_factory=list)   # {requirement, findings, reason, source}
    changes: list[str] = field(default_factory=list)    # filled by prepare(): "transformers 5.0.0 → 4.47.1"
    data: dict = field(default_factory=dict)             # kind-specific inputs (requirements, lockfile, …)

    def prepare(self, ctx: ApplyContext) -> None:
        STEP_KINDS[self.kind].prepare(self, ctx)

    def apply(self, ctx: ApplyContext) -> dict:
        """Carry the step out; returns the undo record the snapshot keeps."""
        return STEP_KINDS[self.kind].apply(self, ctx)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Plan:
    target: str
    stack: str | None
    lockfile: str | None
    steps: list[Step] = field(default_factory=list)
    manual: list[dict] = field(default_factory=list)     # findings the doctor cannot fix: id, severity, title, summary, commands
    excluded: list[str] = field(default_factory=list)    # automatic findings left out by --only
    kept: list[dict] = field(default_factory=list)       # fixes not planned: they would touch the user's own code
    follows: list[dict] = field(default_factory=list)    # findings a planned step's cause explains: id, caused_by

    @property
    def targets(self) -> set[str]:
        return {t for s in self.steps for t in s.targets}

    def prepare(self, ctx: ApplyContext) -> None:
        for s in self.steps:
            s.prepare(ctx)

    def to_dict(self) -> dict:
        return {"target": self.target, "stack": self.stack, "lockfile": self.lockfile,
                "steps": [s.to_dict() for s in self.steps], "manual": self.manual, "excluded": self.excluded,
                "kept": self.kept, "follows": self.follows}


def fix_entries() -> list[dict]:
    """Every fix plan, with the ID (or family, `version.*`) of the finding entry that holds it."""
    return [{"id": d["id"], **d["fix"]["plan"]} for d in knowledge.load("findings") if "plan" in d["fix"]]


def entry_for(finding_id: str) -> dict | None:
    """The fix plan for an ID (its finding entry: exact match first, then its family `version.*`),
    with the entry's ID; None when the fix is manual."""
    spec = definition(finding_id)
    if spec is None or "plan" not in spec["fix"]:
        return None
    return {"id": spec["id"], **spec["fix"]["plan"]}


def _stack_constraint(stack: dict | None, dist: str) -> dict | None:
    want = canonical_name(dist)
    return next((c for c in (stack or {}).get("constraints", []) if canonical_name(c["dist"]) == want), None)


def _req_name(requirement: str) -> str:
    from packaging.requirements import Requirement

    return Requirement(requirement).name


def fill(item: str, finding) -> str:
    """A plan's item with the finding's values in it ({dist}: a version.<dist> finding's dist)."""
    values = {**({"dist": finding.id.split(".", 1)[1]} if finding.id.startswith("version.") else {}),
              **{k: str(v) for k, v in (getattr(finding, "params", None) or {}).items()}}
    try:
        return item.format_map(values)
    except KeyError as e:
        raise FixError(f"{finding.id}: its fix.plan names {{{e.args[0]}}}, which its rule did not fill") from None


def requirement_for(item: str, finding, stack: dict | None) -> tuple[str, dict | None]:
    """'verl' → 'verl==0.4.1' (the stack's spec, and that constraint); '{dist}' → the dist of a
    version.<dist> finding; '{dist}=={locked}' → the values the finding's rule filled (stack.culprit:
    the changed distribution at its known-good version); a requirement with its own spec stays as written."""
    from packaging.requirements import Requirement

    item = fill(item, finding)
    req = Requirement(item)
    if str(req.specifier) or req.url:
        return item, None
    c = _stack_constraint(stack, req.name)
    return (f"{item}{c['spec']}", c) if c else (item, None)


def plan_constraints(entry: dict, finding) -> list[str]:
    """The constraint files a plan names (`constraint: "{lockfile}"`: the known-good set the finding
    was judged against), filled from the finding's values; a value that is not a file is dropped."""
    out = []
    for item in entry.get("constraints", []):
        try:
            path = fill(item, finding)
        except FixError:
            continue
        if Path(path).is_file():
            out.append(path)
    return out


def matches_only(finding_id: str, only: list[str] | None) -> bool:
    return not only or any(fnmatch.fnmatchcase(finding_id, pat) for pat in only)


def validate_only(only: list[str] | None) -> None:
    """--only IDs must name findings the doctor knows (an exact ID, a family, or a glob)."""
    for pat in only or []:
        if any(ch in pat for ch in "*?["):
            continue
        if definition(pat) is None:
            raise UsageError(f"--only {pat}: no such finding ID (doctor explain lists them)")


def build_plan(findings, *, python: str, stack: dict | None, lockfile: str | None = None,
               only: list[str] | None = None, protected: dict[str, str] | None = None,
               guard: FamilyGuard | None = None, facts: Facts | None = None) -> Plan:
    """Ordered steps for every automatic finding (one whose entry has a fix.plan).

    All package entries become ONE packages step (one uv resolution), or, with a lockfile, one
    sync-lock step. Non-automatic errors and warnings become manual steps. `protected` (name →
    checkout) are the user's own code (editable installs, source trees): no step installs,
    reinstalls or removes them — a lockfile sync, which would, becomes a manual step that says so.
    `guard` (doctor.stacks.family_guard) is the env's stack family: no step moves verl, vLLM, torch
    or transformers into another family (nor resolves within another family's stack) unless the
    user named that family's stack (--stack); such a step becomes a manual one that says why.
    `facts` (the target's): a conditional constraint of the stack whose condition does not hold
    there is not passed to the resolver."""
    protected = {canonical_name(n): p for n, p in (protected or {}).items()}
    from doctor.fixes import packages  # noqa: F401 - registers the package step kinds
    from doctor.fixes import ray_sessions  # noqa: F401 - registers the ray-quarantine kind

    plan = Plan(target=python, stack=stack["name"] if stack else None, lockfile=str(lockfile) if lockfile else None)
    pkg: dict[str, dict] = {}        # requirement -> {"findings": [...], "reason", "source"}
    reinstall: list[str] = []
    pkg_targets: list[str] = []
    lock_targets: list[str] = []
    foreign = None  # the plan's stack is of another family than the env's, and nobody asked for it
    if guard is not None and not guard.asked and stack is not None and stack.get("family") != guard.family:
        foreign = (f"{stack['name']} is of the {stack.get('family')} family and the env is of "
                   f"{guard.family or 'no known family'}: resolving within it would move the env across families "
                   f"(name the stack with --stack to ask for that)")

    def manual(f, why: str) -> None:  # a step the user takes (or declines), with why the doctor does not
        plan.manual.append({"id": f.id, "severity": f.severity, "title": f.title, "summary": f.fix.summary,
                            "commands": list(f.fix.commands), "why": why, "caused_by": f.caused_by})

    lock_constraints: list[str] = []
    for f in findings:
        fix = f.fix
        # an info finding is nothing to repair (a stray file two wheels share); its plan is for when it matters
        entry = entry_for(f.id) if fix.automatic and f.severity in ("error", "warning") else None
        if entry is None:
            if f.severity in ("error", "warning") and matches_only(f.id, only):
                manual(f, "not automatic" if not fix.automatic else "no fix.plan in knowledge/findings.yaml")
            continue
        if not matches_only(f.id, only):
            plan.excluded.append(f.id)
            continue
        if foreign and entry["kind"] in ("sync-lock", "packages"):
            manual(f, foreign)
            continue
        if entry["kind"] == "sync-lock" or (lockfile and entry["kind"] == "packages"):
            if not lockfile:  # lock.drift only fires with --lock; keep the guard for other callers
                continue
            if protected:
                names = ", ".join(f"{n} ({p})" for n, p in sorted(protected.items()))
                manual(f, f"a sync to {lockfile} would replace or remove your own checkout(s): {names}; "
                          "run it yourself only if that is what you want")
                continue
            lock_targets.append(f.id)
            continue
        if entry["kind"] == "packages":
            wanted = [requirement_for(item, f, stack) for item in entry.get("install", [])]
            crossing = [why for r, _ in wanted if (why := crosses_family(r, guard))]
            if crossing:  # never across families: the user decides that, by naming the family
                manual(f, "; ".join(crossing))
                continue
            mine = sorted({canonical_name(_req_name(r)) for r, _ in wanted} & set(protected))
            mine += sorted({canonical_name(_req_name(fill(r, f))) for r in entry.get("reinstall", [])}
                           & set(protected) - set(mine))
            if mine:  # the user's code: never replaced, whatever a finding about it says
                plan.kept.append({"id": f.id, "dists": mine, "why": "your own checkout: " + ", ".join(
                    f"{n} at {protected[n]}" for n in mine) + " (the doctor never installs over it)"})
                continue
            pkg_targets.append(f.id)
            for req, c in wanted:
                reason, source = entry.get("reason", ""), entry.get("source", "")
                if c:
                    reason = f"{reason}: {c['reason']}" if reason else c["reason"]
                    source = f"{(stack or {}).get('name')}.yaml: {c['source']}"
                slot = pkg.setdefault(req, {"requirement": req, "findings": [], "reason": reason, "source": source})
                slot["findings"].append(f.id)
            reinstall += [r for r in (fill(x, f) for x in entry.get("reinstall", [])) if r not in reinstall]
            lock_constraints += [c for c in plan_constraints(entry, f) if c not in lock_constraints]
            continue
        kind = STEP_KINDS.get(entry["kind"])
        if kind is None:
            raise FixError(f"knowledge/findings.yaml: {entry['id']} has a fix.plan of unknown kind {entry['kind']!r}")
        plan.steps.append(kind.make_step(f, entry, python=python, stack=stack))  # future kinds
    if lock_targets:
        plan.steps.append(packages.make_sync_step(python, str(lockfile), lock_targets))
    elif pkg:
        plan.steps.append(packages.make_install_step(python, stack, list(pkg.values()), pkg_targets, reinstall, facts,
                                                     lock_constraints))
    plan.steps = ray_sessions.merge(plan.steps)
    # A finding whose cause a step fixes is no step of its own (the re-check judges it with its cause)
    plan.follows = [{"id": m["id"], "caused_by": m["caused_by"]} for m in plan.manual if m["caused_by"] in plan.targets]
    plan.manual = [m for m in plan.manual if m["caused_by"] not in plan.targets]
    # Package changes first: later kinds (Ray sessions, recipe overrides) may depend on them.
    plan.steps.sort(key=lambda s: 0 if STEP_KINDS[s.kind].restores_packages else 1)
    return plan


def fix_together(findings, *, python: str, stack: dict | None, lockfile: str | None = None,
                 protected: dict[str, str] | None = None, guard: FamilyGuard | None = None,
                 facts: Facts | None = None) -> list[dict]:
    """Findings one resolution fixes together (the resolver's view of one cause): each package step
    of the plan `doctor fix` would make that covers two or more findings, with its one command.
    `doctor check` prints these instead of one command per finding, which run alone can leave a
    new conflict (transformers 5 → 4.47 needs tokenizers < 0.22 in the same resolution)."""
    plan = build_plan(findings, python=python, stack=stack, lockfile=lockfile, protected=protected, guard=guard,
                      facts=facts)
    return [{"targets": list(step.targets), "description": step.description, "command": step.commands[0]}
            for step in plan.steps if step.kind in ("packages", "sync-lock") and len(step.targets) > 1 and step.commands]
