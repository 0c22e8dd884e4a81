"""version.<dist>: a distribution outside the known-good range of the (detected) stack."""

from __future__ import annotations

from doctor.findings import make
from doctor.rules.registry import rule
from doctor.dists import installed, satisfies, user_project
from doctor.rules.registry import cannot_look
from doctor.stacks import constraint_applies


@rule("versions within the stack's known-good ranges", "versions", needs=("distributions",), emits=("version.*",))
def out_of_range(facts, ctx):
    stack = ctx.chosen.stack
    if stack is None:  # never another family's pins: the env's own requirements are pip.conflict's
        raise cannot_look("distributions", "no known family" if ctx.chosen.family is None else
                          f"no reference stack of the {ctx.chosen.family} family")
    if not any(installed(facts, c["dist"]) for c in stack["constraints"]):
        raise cannot_look("distributions", "none of the stack's distributions is installed")
    for c in stack["constraints"]:
        v = installed(facts, c["dist"])
        if not constraint_applies(c, facts):
            continue  # a pairwise pin whose other half is not here (datasets 4 with a new fsspec is fine)
        if v is None or satisfies(v, c["spec"]) or ("also_good" in c and satisfies(v, c["also_good"]["spec"])):
            continue  # within the range, or outside it but known to work here (what the family's users ran)
        project = user_project(facts, c["dist"])
        if project:  # the user's own checkout: its version string is its own, its code is judged
            yield make("version.user-project", [f"{c['dist']} {v} is installed from {project} (your checkout)",
                                                f"{stack['name']} pins {c['dist']}{c['spec']}: not applied to your own code"],
                       dist=c["dist"], installed=v, spec=c["spec"], project=project, stack=stack["name"])
            continue
        yield make(f"version.{c['dist']}", [f"{c['dist']}=={v} installed; {stack['name']} needs {c['dist']}{c['spec']}",
                                            f"why: {c['reason']}"],
                   severity=c["severity"], dist=c["dist"], installed=v, spec=c["spec"], stack=stack["name"],
                   reason=c["reason"], source=c["source"], python=ctx.python)
