"""Every failed import, classified by knowledge/signatures.yaml. A failure no signature explains is
`import.failed` — the generic rule that catches breakages nobody has catalogued yet. Failures with
one cause (the same message) are grouped into one finding."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import make
from doctor.rules import rule
from doctor.rules.common import failure_evidence, import_failures


@rule("the stack's modules import", "imports", needs=("imports",))
def failed(facts, ctx):
    owned_by_ray = knowledge.load("ray")["imports"]
    groups: dict[tuple, list] = {}
    for module, info, fid in import_failures(facts):
        groups.setdefault((fid or "import.failed", info.get("message")), []).append((module, info))
    for (fid, _msg), items in groups.items():
        modules = [m for m, _ in items]
        first, info = items[0]
        if fid == "import.failed" and first in owned_by_ray["modules"]:
            continue  # reported by rules/ray.py as owned_by_ray["finding"] (knowledge/ray.yaml `imports`)
        label = first if len(modules) == 1 else f"{first} (and {', '.join(modules[1:])})"
        evidence = [failure_evidence(first, info)]
        if len(modules) > 1:
            evidence.append("same error when importing: " + ", ".join(modules[1:]))
        dist = info.get("failing_dist") or info.get("missing_module") or first.split(".")[0]
        if info.get("chain_dists"):
            evidence.append("import chain through: " + " → ".join(dict.fromkeys(info["chain_dists"])))
        yield make(fid, evidence, module=label, modules=", ".join(modules), exc_type=info.get("type"), dist=dist,
                   python=ctx.python)
