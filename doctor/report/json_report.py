"""The --json document: one object, schema_version 1, nothing else on stdout."""

from __future__ import annotations

import json

from doctor import __version__

SCHEMA_VERSION = 1


def to_document(result) -> dict:
    facts = {k: v for k, v in result.facts.items() if not k.startswith("_")}
    return {
        "schema_version": SCHEMA_VERSION,
        "doctor_version": __version__,
        "target": {"python": result.python, **result.facts.get("python", {}),
                   **({"chosen_by": result.target_note} if getattr(result, "target_note", None) else {})},
        "findings": [f.to_dict() for f in result.findings],
        "fix_together": getattr(result, "fix_together", []),
        "checks": [c.to_dict() for c in result.checks],
        "probes": {n: {"ok": r.ok, "error": r.error, "cached": r.cached} for n, r in result.probes.items()},
        "facts": facts,
        "skipped": result.skipped,
        "no_gpu": result.no_gpu,
        "timings": result.timings,
    }


def render(result) -> str:
    return json.dumps(to_document(result), indent=1, default=str)
