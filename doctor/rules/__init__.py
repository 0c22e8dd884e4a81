"""Rules: pure functions from facts to findings (no I/O). Each rule family is one module; each rule
registers the check it performs, the facts it needs and the IDs it may emit.

When two rules emit the same ID (a fact-based rule and the import-signature rule, say), the
findings merge: the first-registered rule's title and severity win, evidence accumulates."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Callable

from doctor.names import canonical_name

from doctor.facts import Facts
from doctor.findings import Finding, definition, hold_unrunnable, report_order
from doctor.results import Check, Status
from doctor.rules.registry import LOOP_IDS, RULES, FactView, Rule, declares, failure_class_ids, run_rule, signature_ids
# Import order is registration order (which decides merges): fact rules first, imports last.
from doctor.rules import (  # noqa: F401,E402  (imported for their @rule registrations)
    stack, versions, python_env, packages, vllm, attention, gpu, system, lock, ray, imports, probes,
    config, dryrun, settings,
)
from doctor.stacks import FamilyGuard, StackChoice, choose_stack, crosses_family, family_guard, stack_lockfile_for


@dataclass
class Context:
    python: str
    stack: dict | None = None          # --stack; None = the closest known stack
    # The stack this check judges against, decided once (doctor.stacks.choose_stack) by the engine
    # or, when a caller left it unset, by evaluate() before the first rule runs.
    chosen: StackChoice | None = None
    lock: dict | None = None           # parsed --lock file
    lockfile: str | None = None
    probe_errors: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)  # deep probe → the option that skipped it
    cluster: str | None = None         # --cluster ADDRESS
    no_gpu: bool = False               # --no-gpu: no GPU is expected here (login node, CPU CI)
    # The known-good set the env is compared with: {"lockfile": path, "pins": {dist: version}} of
    # --lock, else the closest stack's shipped lockfile for the target's Python (engine reads it).
    reference: dict | None = None


def why_absent(name: str, ctx: Context) -> str:
    """Why a fact is absent: the option that skipped its probe, or the probe's failure."""
    if name in ctx.skipped:
        return f"skipped by {ctx.skipped[name]}"
    if name in ctx.probe_errors:
        return f"the {name} probe could not run"
    return f"no {name} facts (probe could not run)"


def evaluate(facts: Facts, ctx: Context, trace: dict | None = None,
             select: Callable[[Rule], bool] | None = None) -> tuple[list[Finding], list[Check]]:
    """Every rule in scope on the facts (`select`: only those, e.g. a recipe's config rules for
    `recipes lint`). `trace`, when given, gets {check: facts it read}."""
    if ctx.chosen is None and facts.get("distributions") is not None:
        ctx.chosen = choose_stack(facts, ctx.stack)
    view = FactView(facts, lambda name: why_absent(name, ctx))
    merged: dict[str, Finding] = {}
    extra: list[Finding] = []   # a rule's second finding of one ID (one per override, say): its own entry
    checks: list[Check] = []
    for r in RULES:
        if (r.only_with and r.only_with not in facts) or (select is not None and not select(r)):
            continue
        not_applicable = r.applies(ctx) if r.applies else None
        if not_applicable:
            checks.append(Check(r.check, r.area, Status.SKIPPED, why=not_applicable))
            continue
        absent = [d for d in r.requires if canonical_name(d) not in (facts.get("distributions") or {})]
        if absent:
            why = f"{' and '.join(absent)} {'is' if len(absent) == 1 else 'are'} not installed"
            checks.append(Check(r.check, r.area, Status.SKIPPED, why=why))
            continue
        missing = [n for n in r.needs if facts.get(n) is None]
        if trace is not None:
            trace[r.check] = set(r.needs)
        if missing:
            checks.append(Check(r.check, r.area, Status.SKIPPED, why=why_absent(missing[0], ctx)))
            continue
        got, check = run_rule(r, lambda: r.fn(view, ctx), view)
        if trace is not None:
            trace[r.check] = set(view.reads)
        seen: set[str] = set()
        for f in got:
            if f.id in seen:
                extra.append(f)
            elif f.id in merged:
                have = merged[f.id]
                have.evidence.extend(e for e in f.evidence if e not in have.evidence)
            else:
                merged[f.id] = f
            seen.add(f.id)
        if check.status not in (Status.SKIPPED, Status.CRASH):  # a merged ID counts at its worst
            check.status = Status.of([merged[i].severity for i in check.ids] + [f.severity for f in got])
        checks.append(check)
    every = list(merged.values()) + extra
    link_root_causes(every)
    _pin_to_the_lockfile(every, facts, ctx)
    guard = family_guard(ctx.chosen, facts) if facts.get("distributions") is not None else None
    for f in every:  # a command nothing could fill in is not printed as one to run
        hold_unrunnable(f)
        _hold_cross_family(f, guard)
    findings = sorted(every, key=report_order)
    return findings, checks


def _pin_to_the_lockfile(findings, facts: Facts, ctx: Context) -> None:
    """Fix commands that (re)install name the stack's lockfile as constraints ({lockfile}): a
    reinstall never resolves an unbounded requirement (which upgrades the whole tree)."""
    if not any("{lockfile}" in c for f in findings for c in f.fix.commands):
        return
    try:
        lockfile = ctx.lockfile or (stack_lockfile_for(facts, ctx.chosen.stack) if ctx.chosen else None)
    except (KeyError, TypeError):
        return
    if lockfile is None:
        return
    for f in findings:
        f.fix.commands = [c.replace("{lockfile}", lockfile) for c in f.fix.commands]


def _hold_cross_family(f: Finding, guard: FamilyGuard | None) -> None:
    """A printed command that would move verl, vLLM, torch or transformers into another family than
    the env's (doctor.stacks.crosses_family) is not printed as one to run: the summary says why."""
    keep, why = [], []
    for c in f.fix.commands:
        try:
            tokens = shlex.split(c)
        except ValueError:
            keep.append(c)
            continue
        reasons = [r for t in tokens if not t.startswith("-") and (r := crosses_family(t, guard))]
        (why.extend(reasons) if reasons else keep.append(c))
    if why:
        f.fix.commands = keep
        f.fix.summary += " Not printed as a command to run: " + "; ".join(dict.fromkeys(why)) + "."


def link_root_causes(every: list[Finding]) -> None:
    """A finding whose knowledge entry names root causes (`consequence_of`) that are reported too
    is marked caused_by the first of them present (families like `version.*` match by prefix).
    A rule may report one ID twice: each copy is linked."""
    # an ID can be a root when one of its findings is a problem (not a note) and not itself a consequence
    ids = list(dict.fromkeys(f.id for f in every if f.severity != "info" and f.caused_by is None))
    for f in every:
        for cause in (definition(f.id) or {}).get("consequence_of", []):
            present = [i for i in ids if i != f.id and (i == cause or (cause.endswith(".*") and
                                                                      i.startswith(cause[:-1])))]
            if present:
                f.caused_by = present[0]
                break


def all_rules() -> list[Rule]:
    """Every registered rule (one registry: environment, config, dry-run and recipe rules)."""
    return list(RULES)


def reported_by(finding_id: str) -> list[str]:
    """Who reports a finding ID: the rules (module:function) whose `emits` declares it, the triage for
    a log signature, the evaluate loop, or the entry's `produced_by`. `doctor explain` prints it."""
    out = []
    for r in all_rules():
        if declares(r.emits, finding_id):
            via = " (an import signature, knowledge/signatures.yaml)" if not declares(
                [p for p in r.emits if not p.startswith("signature:")], finding_id) else ""
            out.append(f"{r.name}: {r.check}{via}")
    out = list(dict.fromkeys(out))
    if finding_id in signature_ids("log"):
        out.append("doctor.triage: a log signature (knowledge/signatures.yaml) in `doctor triage LOG`")
    if finding_id in failure_class_ids():
        out.append("doctor.failure: a failure class (knowledge/triage.yaml) in `doctor triage LOG`")
    if finding_id in LOOP_IDS:
        out.append("doctor.rules.registry:run_rule: the evaluate loop, when a rule raises")
    spec = definition(finding_id)
    if spec and spec.get("produced_by"):
        out.append(spec["produced_by"])
    return out
