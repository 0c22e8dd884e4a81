"""The Finding: stable ID, severity, title, evidence and fix, filled from knowledge/findings.yaml."""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass, field

from doctor import knowledge
from doctor.uv import runnable
from doctor.results import Fix, Severity, worst  # noqa: F401 - worst: re-exported for rule modules


def report_order(f: "Finding") -> tuple:
    """Sort key for reports: errors first, then by area and ID."""
    return (Severity(f.severity).rank, f.area, f.id)


class ContractError(Exception):
    """A rule broke its contract with findings.yaml (an unfilled placeholder, an undeclared ID).
    Users never see it: the finding degrades gracefully. Under VERL_DOCTOR_STRICT=1 (the tests) it
    is raised through the evaluate loop, not turned into doctor.rule-crashed."""


class PlaceholderMissing(ContractError):
    """A rule did not fill a {placeholder} of its finding's entry."""


def strict() -> bool:
    """VERL_DOCTOR_STRICT=1 (set by the tests): contract slips raise instead of degrading quietly."""
    return os.environ.get("VERL_DOCTOR_STRICT") == "1"


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def neutral(key: str) -> str:
    """What a user reads for a placeholder nobody filled: `<lockfile>` (a command holding one is
    shown as one to adapt), never the raw `{lockfile}`."""
    return f"<{key.replace('_', ' ')}>"


# Placeholders a rule may leave to the evaluate loop (rules/__init__.py _pin_to_the_lockfile): kept as
# written in fix commands; what stays unfilled is shown as `<lockfile>` to adapt (hold_unrunnable).
LOOP_FILLED = frozenset({"lockfile"})


def definition(finding_id: str) -> dict | None:
    defs = knowledge.finding_defs()
    if finding_id in defs:
        return defs[finding_id]
    family = finding_id.split(".", 1)[0] + ".*"
    return defs.get(family)


def is_automatic(spec: dict) -> bool:
    """A fix is automatic when its entry has a plan (what `doctor fix` does): derived, never declared."""
    return "plan" in (spec.get("fix") or {})


def is_host_fact(finding: "Finding | str") -> bool:
    """True for a fact about the machine (its GPUs, kernel driver, shell settings, /dev/shm, other
    users' processes), not about the environment: no change to the environment changes it. The one
    place that decides it (the entry's `scope:`): `doctor fix` does not judge it in its re-check,
    `doctor container verify` counts it as explained by the host, the recipe preflight lists it apart."""
    spec = definition(finding if isinstance(finding, str) else finding.id)
    return spec is not None and spec.get("scope") == "host"


@dataclass
class Finding:
    id: str
    severity: Severity
    area: str
    title: str
    evidence: list[str]
    fix: Fix
    sources: list[str] = field(default_factory=list)
    node: str | None = None
    caused_by: str | None = None     # the root cause's ID when this finding is its consequence
    # The values the rule filled into the entry (dist, installed, locked, …): what a fix plan
    # (findings.yaml fix.plan) is formatted with, so `doctor fix` does what the printed command says.
    params: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.severity = Severity(self.severity)

    def to_dict(self) -> dict:
        d = {"id": self.id, "severity": self.severity.value, "area": self.area, "title": self.title,
             "evidence": list(self.evidence), "fix": self.fix.to_dict(), "sources": list(self.sources)}
        if self.node is not None:
            d["node"] = self.node
        if self.caused_by is not None:
            d["caused_by"] = self.caused_by
        return d


_UNFILLED = re.compile(r"\{[a-z_]+\}|<[A-Za-z][^<>=\n]{2,}>")  # {key}, <a placeholder>; not a specifier (<1.0,>=0.2)


def hold_unrunnable(f: Finding) -> Finding:
    """A fix command that still has a placeholder ({lockfile} nobody could fill, <the wheel …>)
    would not run as printed: it leaves the commands and is shown in the summary as one to adapt."""
    keep: list[str] = []
    adapt: list[str] = []
    for c in f.fix.commands:
        (adapt if _UNFILLED.search(c) else keep).append(c)
    if adapt:
        adapt = [re.sub(r"\{([a-z_]+)\}", lambda m: neutral(m.group(1)), c) for c in adapt]
        f.fix.commands = keep
        f.fix.summary += " To adapt (the doctor could not fill in its placeholder): " + "; ".join(f"`{c}`" for c in adapt)
    return f


def make(finding_id: str, evidence: list[str], severity: str | None = None, **params) -> Finding:
    """Build a finding from its knowledge entry; params fill the entry's {placeholders}."""
    spec = definition(finding_id)
    if spec is None:
        raise KeyError(f"finding {finding_id} has no entry in knowledge/findings.yaml")
    defaults = spec.get("defaults") or {}
    fix = spec["fix"]
    texts = [spec["title"], fix["summary"], *fix.get("commands", []), *spec.get("sources", [])]
    late = set(LOOP_FILLED) - set(params)
    missing = sorted(set().union(*map(placeholders, texts)) - set(params) - set(defaults) - late)
    if missing and strict():
        raise PlaceholderMissing(f"{finding_id}: the rule did not fill {', '.join('{' + k + '}' for k in missing)} "
                                 "(pass it to make(), or give the entry a `defaults:` value)")
    values = {**{k: neutral(k) for k in late}, **defaults, **params, **{k: neutral(k) for k in missing}}
    fmt = lambda s: s.format_map(values)  # noqa: E731
    fmt_command = lambda s: s.format_map({**values, **{k: "{" + k + "}" for k in late}})  # noqa: E731
    sev = severity or spec["severity"]
    if sev not in {s.value for s in Severity}:
        raise ValueError(f"{finding_id}: severity {sev!r} must be given by the rule")
    return Finding(
        id=finding_id,
        severity=Severity(sev),
        area=spec["area"],
        title=fmt(spec["title"]),
        evidence=[str(e) for e in evidence],
        fix=Fix(summary=fmt(fix["summary"]), commands=[runnable(fmt_command(c)) for c in fix.get("commands", [])],
                automatic=is_automatic(spec)),
        sources=[fmt(s) for s in spec.get("sources", [])],
        params={k: v for k, v in params.items() if isinstance(v, (str, int, float))},
    )
