"""Rules: pure functions from facts to findings (no I/O). Each rule family is one module; each rule
registers the check it performs, the facts it needs and the IDs it may emit.

When two rules emit the same ID (a fact-based rule and the import-signature rule, say), the
findings merge: the first-registered rule's title and severity win, evidence accumulates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from packaging.utils import canonicalize_name

from doctor.findings import Finding, report_order, worst


@dataclass
class Context:
    python: str
    stack: dict | None = None          # --stack; None = the closest known stack
    lock: dict | None = None           # parsed --lock file
    lockfile: str | None = None
    probe_errors: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)  # deep probe → the option that skipped it
    cluster: str | None = None         # --cluster ADDRESS


@dataclass
class Rule:
    fn: Callable[[dict, Context], Iterable[Finding]]
    check: str
    area: str
    needs: tuple[str, ...]
    applies: Callable[[Context], str | None] | None = None  # returns why it does not apply, or None
    # Distributions the check is about: when one is not installed, the check is skipped ("vllm is
    # not installed") instead of passing with nothing to look at (stack.dists-missing reports it).
    requires: tuple[str, ...] = ()


RULES: list[Rule] = []


def rule(check: str, area: str, needs: tuple[str, ...] = (), applies=None, requires: tuple[str, ...] = ()):
    def register(fn):
        RULES.append(Rule(fn, check, area, needs, applies, requires))
        return fn
    return register


def _load_rule_modules() -> None:
    # Import order is registration order (which decides merges): fact rules first, imports last.
    from doctor.rules import (  # noqa: F401
        stack, versions, python_env, packages, vllm, attention, gpu, system, lock, ray, imports, probes,
    )


def evaluate(facts: dict, ctx: Context) -> tuple[list[Finding], list[dict]]:
    _load_rule_modules()
    merged: dict[str, Finding] = {}
    checks = []
    for r in RULES:
        not_applicable = r.applies(ctx) if r.applies else None
        if not_applicable:
            checks.append({"check": r.check, "area": r.area, "status": "skipped", "why": not_applicable, "ids": []})
            continue
        absent = [d for d in r.requires if canonicalize_name(d) not in (facts.get("distributions") or {})]
        if absent:
            why = f"{' and '.join(absent)} {'is' if len(absent) == 1 else 'are'} not installed"
            checks.append({"check": r.check, "area": r.area, "status": "skipped", "why": why, "ids": []})
            continue
        missing = [n for n in r.needs if facts.get(n) is None]
        if missing:
            by = [ctx.skipped[n] for n in missing if n in ctx.skipped]
            why = f"skipped ({by[0]})" if by else "no facts (probe could not run)"
            checks.append({"check": r.check, "area": r.area, "status": "skipped", "why": why, "ids": []})
            continue
        ids = []
        for f in r.fn(facts, ctx) or []:
            ids.append(f.id)
            if f.id in merged:
                have = merged[f.id]
                have.evidence.extend(e for e in f.evidence if e not in have.evidence)
            else:
                merged[f.id] = f
        status = worst(merged[i].severity for i in ids) or "ok"
        checks.append({"check": r.check, "area": r.area, "status": status, "ids": sorted(set(ids))})
    findings = sorted(merged.values(), key=report_order)
    return findings, checks
