"""The interpreter's own packaging tools and metadata: setuptools, pkg_resources, broken dist-info."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import make
from doctor.rules import rule
from doctor.rules.common import (active_stack, failure_evidence, failures_for, grouped_failure_evidence, installed,
                                 stack_lockfile_for)


def _modules(failures, default):
    return ", ".join(m for m, _ in failures) or default


@rule("setuptools is installed", "python", needs=("distributions",))
def setuptools_missing(facts, ctx):
    failures = failures_for(facts, "python.setuptools-missing")
    needers = [n["dist"] for n in knowledge.load("python_env")["setuptools_needed_by"] if installed(facts, n["dist"])]
    broken = ((facts.get("imports") or {}).get("modules") or {}).get("setuptools") or {}
    if installed(facts, "setuptools") and broken and not broken.get("ok"):
        yield make("python.setuptools-broken", [failure_evidence("setuptools", broken)],
                   setuptools=installed(facts, "setuptools"), message=broken.get("message", "?"), python=ctx.python)
        return
    if (installed(facts, "setuptools") or not needers) and not failures:
        return
    evidence = []
    if not installed(facts, "setuptools"):
        evidence.append(f"no setuptools distribution in {facts['python']['prefix']}; needed by: {', '.join(needers)}")
    evidence += grouped_failure_evidence(failures)
    yield make("python.setuptools-missing", evidence, modules=_modules(failures, "vllm (through triton)"), python=ctx.python)


@rule("pkg_resources is importable", "python", needs=("distributions", "imports"))
def pkg_resources_missing(facts, ctx):
    failures = failures_for(facts, "python.pkg-resources-missing")
    st = installed(facts, "setuptools")
    if not failures:
        return
    evidence = grouped_failure_evidence(failures)
    if st:
        evidence.append(f"setuptools=={st} installed (82 and later ship no pkg_resources)")
    yield make("python.pkg-resources-missing", evidence, modules=_modules(failures, "verl"), setuptools=st or "missing",
               python=ctx.python)


@rule("package metadata is readable and unique", "python", needs=("distributions",))
def broken_metadata(facts, ctx):
    problems = facts.get("metadata_problems") or {}
    evidence = [f"{b['path']}: {b['error']}" for b in problems.get("broken", [])]
    evidence += [f"second copy of {d['name']} {d['version']} at {d['path']}" for d in problems.get("duplicates", [])]
    if evidence:
        dists = " ".join(sorted({d["name"] for d in problems.get("duplicates", [])})) or "PACKAGE"
        yield make("python.broken-metadata", evidence, dists=dists, python=ctx.python)


@rule("the Python version is one the stack is locked for", "python", needs=("distributions",))
def version_unverified(facts, ctx):
    stack = active_stack(facts, ctx)
    pyver = facts["markers"]["python_version"]
    if pyver in stack["python"]:
        return
    want = stack["python"][-1]
    yield make("python.version-unverified",
               [f"Python {facts['python'].get('version', pyver)} in {ctx.python}",
                f"{stack['name']} is locked and install-tested for Python {', '.join(stack['python'])} "
                f"(knowledge/stacks/{stack['name']}.yaml `python`)"],
               version=pyver, stack=stack["name"], pythons=", ".join(stack["python"]), want=want,
               lockfile=stack_lockfile_for(facts, stack), python=ctx.python)
