"""The Finding: stable ID, severity, title, evidence and fix, filled from knowledge/findings.yaml."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from doctor import knowledge

SEVERITIES = ("error", "warning", "info")  # worst first


def worst(severities) -> str | None:
    """The worst of some severities, None for none."""
    return min(severities, key=SEVERITIES.index, default=None)


def report_order(f: "Finding") -> tuple:
    """Sort key for reports: errors first, then by area and ID."""
    return (SEVERITIES.index(f.severity), f.area, f.id)


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
    severity: str
    area: str
    title: str
    evidence: list[str]
    fix: dict
    sources: list[str] = field(default_factory=list)
    node: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["node"] is None:
            d.pop("node")
        return d


def make(finding_id: str, evidence: list[str], severity: str | None = None, **params) -> Finding:
    """Build a finding from its knowledge entry; params fill the entry's {placeholders}."""
    spec = definition(finding_id)
    if spec is None:
        raise KeyError(f"finding {finding_id} has no entry in knowledge/findings.yaml")
    p = _Params(params)
    fmt = lambda s: s.format_map(p)  # noqa: E731
    sev = severity or spec["severity"]
    if sev not in SEVERITIES:
        raise ValueError(f"{finding_id}: severity {sev!r} must be given by the rule")
    fix = spec["fix"]
    return Finding(
        id=finding_id,
        severity=sev,
        area=spec["area"],
        title=fmt(spec["title"]),
        evidence=[str(e) for e in evidence],
        fix={"summary": fmt(fix["summary"]), "commands": [fmt(c) for c in fix.get("commands", [])],
             "automatic": bool(fix.get("automatic"))},
        sources=[fmt(s) for s in spec.get("sources", [])],
    )
