"""Which stack the target is, and whether its verl accepts its vllm."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from doctor import knowledge
from doctor.findings import make
from doctor.rules.registry import rule
from doctor.dists import installed, satisfies, user_project
from doctor.reference import differs_from_reference
from doctor.rules.failures import failure_evidence, failures_for
from doctor.stacks import missing_stack_dists, stack_lockfile_for
from doctor.rules.registry import cannot_look


@rule("the stack family", "stack", needs=("distributions",), emits=("stack.detected",))
def detected(facts, ctx):
    choice = ctx.chosen
    stack, met, total = choice.stack, choice.met, choice.total
    lockfile = stack_lockfile_for(facts, stack)
    if stack is None:
        why = ("verl is not installed" if installed(facts, "verl") is None else
               f"no reference stack of {choice.family} yet" if choice.family else
               f"verl {installed(facts, 'verl')} is of no known family")
        yield make("stack.detected", list(choice.evidence), family=choice.family or "no known family",
                   how=f"{why}: judged on its own declared requirements and the probes only",
                   stack="none", python=ctx.python, lockfile="{lockfile}")
        return
    of = len(stack["constraints"])
    words = (f"none of its {of} constrained distributions is installed" if not total else
             f"{met}/{total} constraints met" if total == of else
             f"{met}/{total} constraints met; only {total} of its {of} constrained distributions installed")
    evidence = list(choice.evidence) + [f"{stack['name']}: {met} of {total} installed constraint(s) met ({choice.how})"]
    if lockfile is None:
        evidence.append(f"{stack['name']}: {stack.get('lock_note') or 'no lockfile for this Python'}")
    yield make("stack.detected", evidence, family=choice.family or "no known family",
               how=f"judged against {stack['name']}, {words}" + (", chosen with --stack" if choice.by_flag else ""),
               stack=stack["name"], met=met, total=total, python=ctx.python, lockfile=lockfile or "{lockfile}")


@rule("the stack's distributions are installed", "stack", needs=("distributions",), emits=("stack.dists-missing",))
def dists_missing(facts, ctx):
    stack = ctx.chosen.stack
    if stack is None and installed(facts, "verl") is not None:
        return  # a verl of no known family: its own requirements (pip.conflict) and the imports judge it
    missing = missing_stack_dists(facts, stack)
    if not missing:
        return
    whose = f"stack {stack['name']}" if stack else "no stack family without verl"
    evidence = [f"not installed: {', '.join(missing)} ({whose} and the modules verl imports)"]
    if all(d in missing for d in ("verl", "vllm", "torch")):
        evidence.append(f"none of verl, vllm, torch is installed in {ctx.python}: if it is not the training "
                        "environment's interpreter, give that one with --python PATH")
    yield dists_missing_finding(facts, ctx, stack, missing, evidence)


def dists_missing_finding(facts, ctx, stack, missing, evidence):
    """stack.dists-missing, from this rule and from the imports rule (its failures fold into it)."""
    return make("stack.dists-missing", evidence, count=len(missing), names=", ".join(missing),
                stack=stack["name"] if stack else "none", python=ctx.python,
                lockfile=stack_lockfile_for(facts, stack) or "{lockfile}")


def adapter_accepts(verl: str, vllm: str) -> tuple[bool, dict | None]:
    """Does the installed verl's adapter accept this vllm *string*? (knowledge/verl_vllm.yaml)"""
    try:
        v = Version(verl)
    except InvalidVersion:
        return True, None
    for entry in knowledge.load("verl_vllm"):
        if v in SpecifierSet(entry["verl"], prereleases=True):
            return accepts(entry["accepts"], vllm), entry
    return True, None


def accepts(acc: dict, vllm: str) -> bool:
    """An adapter rule ({exact, prefix, min}: a table entry, or read from a checkout's code) on a vllm string."""
    if vllm in acc.get("exact", []) or any(vllm.startswith(p) for p in acc.get("prefix", [])):
        return True
    try:
        return "min" in acc and Version(vllm) >= Version(acc["min"])
    except InvalidVersion:
        return False


def accepts_in_words(acc: dict) -> str:
    """verl's adapter rule as a person reads it: 'exactly 0.5.4, versions starting with 0.6.3, or 0.7.0+'."""
    parts = []
    if acc.get("exact"):
        parts.append("exactly " + ", ".join(acc["exact"]))
    if acc.get("prefix"):
        parts.append("versions starting with " + ", ".join(acc["prefix"]))
    if acc.get("min"):
        try:
            v = Version(acc["min"])
            shown = f"{v.major}.{v.minor + 1}.0+" if v.is_devrelease or v.local else f"{acc['min']}+"
        except InvalidVersion:
            shown = f"{acc['min']}+"
        parts.append(shown if shown == f"{acc['min']}+" else f"{shown} (its check: >= {acc['min']})")
    return ", ".join(parts[:-1]) + (" or " if len(parts) > 1 else "") + parts[-1] if parts else "nothing"


@rule("verl accepts the installed vLLM", "stack", needs=("distributions",), requires=("verl", "vllm"),
    emits=("stack.project-rejects-vllm", "stack.verl-rejects-vllm"))
def verl_rejects_vllm(facts, ctx):
    verl, vllm = installed(facts, "verl"), installed(facts, "vllm")  # both there: requires=
    assert verl is not None and vllm is not None
    project = user_project(facts, "verl")
    code = (facts["distributions"].get("verl") or {}).get("vllm_accepts")
    if project and code:  # the user's checkout: judged by its own adapter, never replaced
        yield from _project_rejects_vllm(facts, ctx, vllm, project, code)
        return
    ok, entry = adapter_accepts(verl, vllm)
    if ok or entry is None:  # no entry: a verl the table does not know is not judged
        return
    evidence = [f"verl {verl} + vllm {vllm} (installed)",
                f"verl {entry['verl']} accepts {accepts_in_words(entry['accepts'])} — {entry['source']}"]
    real = failures_for(facts, "stack.verl-rejects-vllm")
    if real:
        evidence.insert(0, failure_evidence(*real[0]))
    else:
        evidence.insert(0, "expected at import: " + entry["error"].format(vllm=vllm))
    yield make("stack.verl-rejects-vllm", evidence, verl=verl, vllm=vllm, python=ctx.python)


def _project_rejects_vllm(facts, ctx, vllm: str, project: str, acc: dict):
    if accepts(acc, vllm):
        return
    same_release = [v for v in acc.get("exact", []) if Version(v).release[:3] == Version(vllm).release[:3]]
    near = same_release or [v for v in acc.get("exact", []) if Version(v).release[:2] == Version(vllm).release[:2]]
    evidence = [f"verl from your checkout {project} + vllm {vllm} (installed)",
                f"its own {acc['file']} accepts {accepts_in_words(acc)}"]
    real = failures_for(facts, "stack.verl-rejects-vllm")
    if real:
        evidence.insert(0, failure_evidence(*real[0]))
    from packaging.requirements import InvalidRequirement, Requirement

    for text in (facts["distributions"].get("verl") or {}).get("requires") or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name == "vllm" and str(req.specifier) and req.specifier.contains(vllm, prereleases=True):
            where = f" (extra {str(req.marker).split('==')[-1].strip()})" if req.marker else ""
            evidence.append(f"its own declared requirement {req.name}{req.specifier}{where} allows vllm {vllm}: the "
                            "checkout's metadata and its code disagree, so a resolver that follows the metadata installs "
                            "a vllm the code refuses")
    want = near[-1] if near else None
    # the lockfile of the family that pins what the checkout accepts (verl 0.3's vllm==0.6.3), not the
    # closest stack's (which may pin the very vllm the checkout rejects)
    family = next((st for st in knowledge.stacks().values() if want and any(
        c["dist"] == "vllm" and satisfies(want, c["spec"]) for c in st["constraints"])), None)
    lockfile = (stack_lockfile_for(facts, family) if family else None) or "{lockfile}"
    if family:
        evidence.append(f"the {family['name']} family pins vllm {want}: its lockfile constrains the install")
    yield make("stack.project-rejects-vllm", evidence, vllm=vllm, project=project, accepts=accepts_in_words(acc),
               want=want or "{want}", lockfile=lockfile, python=ctx.python)


@rule("the env matches the known-good set (the stack's lockfile)", "stack", needs=("distributions",), emits=("stack.differs",))
def differs(facts, ctx):
    ref = ctx.reference
    if not ref:
        stack = ctx.chosen.stack if ctx.chosen else None
        raise cannot_look("distributions", f"no lockfile of {stack['name']} yet ({stack['lock_note']})" if stack and
                          stack.get("lock_note") else "no lockfile of this stack for the target's Python")
    diff = differs_from_reference(facts, ctx.reference)
    if not diff:
        return
    changed = sorted((d, v) for d, v in diff.items() if v[0] != "missing")
    gone = sorted(d for d, v in diff.items() if v[0] == "missing")
    if len(gone) == len(ref["pins"]) or (gone and not changed and len(gone) > len(ref["pins"]) // 2):
        return  # nothing of the stack here: stack.dists-missing says so
    evidence = [f"{d} {have} (known-good {locked})" for d, (have, locked) in changed]
    if gone:
        evidence.append(f"locked but not installed: {', '.join(gone[:12])}{' …' if len(gone) > 12 else ''}")
    yield make("stack.differs", evidence, count=len(diff), lockfile=ref["lockfile"], python=ctx.python)
