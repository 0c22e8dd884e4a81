"""Every failed import, classified by knowledge/signatures.yaml. A failure no signature explains is
`import.failed` — the generic rule that catches breakages nobody has catalogued yet. Failures with
one cause (the same message) are grouped into one finding."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import make
from doctor.rules.registry import rule
from doctor.dists import installed
from doctor.reference import culprits, differs_from_reference
from doctor.signatures import default_params
from doctor.rules.failures import fails_for_missing_dist, failure_evidence, import_failures, most_specific
from doctor.stacks import missing_stack_dists, stack_modules
from doctor.rules.stack import dists_missing_finding


@rule("the stack's modules import", "imports", needs=("imports",),
    emits=("signature:import", "import.failed", "stack.culprit", "stack.dists-missing"))
def failed(facts, ctx):
    owned_by_ray = knowledge.load("ray")["imports"]
    stack = ctx.chosen.stack
    missing = missing_stack_dists(facts, stack)
    judged = set(stack_modules(stack))  # the family's trainer path: verl 0.9 has no verl.workers.fsdp_workers
    groups: dict[tuple, list] = {}
    folded = []
    for module, info, fid in import_failures(facts):
        if module not in judged:
            continue
        if fid is None and fails_for_missing_dist(info, missing):
            folded.append(module)  # the distribution is simply not installed: stack.dists-missing
            continue
        groups.setdefault((fid or "import.failed", info.get("message")), []).append((module, info))
    if folded:
        yield dists_missing_finding(facts, ctx, stack, missing,
                                    ["imports that fail only because of it: " + ", ".join(folded)])
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
        versions = {c["dist"].replace("-", "_"): installed(facts, c["dist"]) or "(not installed)"
                    for c in (stack or {}).get("constraints", [])}  # a signature's finding may name them ({verl}, {vllm})
        surfaced = make(fid, evidence, **{**default_params(fid), **versions, "module": label, "modules": ", ".join(modules),
                                          "exc_type": info.get("type"), "dist": dist,
                                          "message": most_specific(info)[1] or info.get("message", "?"), "python": ctx.python})
        blamed = culprits(facts, ctx.reference, info)
        if blamed:  # what differs from the known-good set is the cause; where it surfaced is affected
            diff = differs_from_reference(facts, ctx.reference)
            lockfile = (ctx.reference or {}).get("lockfile") or "the lockfile"
            lines = [f"{d} {diff[d][0]} differs from the known-good {diff[d][1]} ({lockfile})" for d in blamed]
            yield make("stack.culprit", lines + [failure_evidence(first, info)] +
                       (["same error when importing: " + ", ".join(modules[1:])] if len(modules) > 1 else []),
                       dist=blamed[0], installed=diff[blamed[0]][0], locked=diff[blamed[0]][1], modules=", ".join(modules),
                       lockfile=lockfile, python=ctx.python)
            surfaced.caused_by = "stack.culprit"
        yield surfaced
