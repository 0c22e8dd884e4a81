"""The Finding: stable ID, severity, title, evidence and fix, filled from knowledge/findings.yaml."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor import knowledge
from doctor.uv import runnable
from doctor.results import Fix, Severity, worst  # noqa: F401 - worst: re-exported for rule modules


def report_order(f: "Finding") -> tuple:
    """Sort key for reports: errors first, then by area and ID."""
    return (Severity(f.severity).rank, f.area, f.id)


class _Params(dict):
    def __missing__(self, key):  # an unfilled placeholder stays visible, never crashes a report
        return "{" + key + "}"


def definition(finding_id: str) -> dict | None:
    defs = knowledge.finding_defs()
    if finding_id in defs:
        return defs[finding_id]
    family = finding_id.split(".", 1)[0] + ".*"
    return defs.get(family)


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


_UNFILLED = re.compile(r"\{[a-z_]+\}|<[^<>\n]{3,}>")


def hold_unrunnable(f: Finding) -> Finding:
    """A fix command that still has a placeholder ({lockfile} nobody could fill, <the wheel …>)
    would not run as printed: it leaves the commands and is shown in the summary as one to adapt."""
    keep: list[str] = []
    adapt: list[str] = []
    for c in f.fix.commands:
        (adapt if _UNFILLED.search(c) else keep).append(c)
    if adapt:
        f.fix.commands = keep
        f.fix.summary += " To adapt (the doctor could not fill in its placeholder): " + "; ".join(f"`{c}`" for c in adapt)
    return f


def make(finding_id: str, evidence: list[str], severity: str | None = None, **params) -> Finding:
    """Build a finding from its knowledge entry; params fill the entry's {placeholders}."""
    spec = definition(finding_id)
    if spec is None:
        raise KeyError(f"finding {finding_id} has no entry in knowledge/findings.yaml")
    p = _Params(params)
    fmt = lambda s: s.format_map(p)  # noqa: E731
    sev = severity or spec["severity"]
    if sev not in {s.value for s in Severity}:
        raise ValueError(f"{finding_id}: severity {sev!r} must be given by the rule")
    fix = spec["fix"]
    return Finding(
        id=finding_id,
        severity=Severity(sev),
        area=spec["area"],
        title=fmt(spec["title"]),
        evidence=[str(e) for e in evidence],
        fix=Fix(summary=fmt(fix["summary"]), commands=[runnable(fmt(c)) for c in fix.get("commands", [])],
                automatic=bool(fix.get("automatic"))),
        sources=[fmt(s) for s in spec.get("sources", [])],
    )
