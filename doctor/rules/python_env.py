"""The interpreter's own packaging tools and metadata: setuptools, pkg_resources, broken dist-info."""

from __future__ import annotations

import posixpath

from doctor.names import canonical_name

from doctor import knowledge
from doctor.findings import make
from doctor.rules.registry import cannot_look, rule
from doctor.dists import installed, user_project
from doctor.rules.failures import (chain_text, failure_evidence, failures_for, grouped_failure_evidence,
                                   import_failures, lib_families, lib_family)
from doctor.stacks import stack_lockfile_for


def _modules(failures, default):
    return ", ".join(m for m, _ in failures) or default


@rule("setuptools is installed", "python", needs=("distributions",), emits=("python.setuptools-broken", "python.setuptools-missing"))
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


@rule("pkg_resources is importable", "python", needs=("distributions", "imports"), emits=("python.pkg-resources-missing",))
def pkg_resources_missing(facts, ctx):
    failures = failures_for(facts, "python.pkg-resources-missing")
    st = installed(facts, "setuptools")
    if not failures:
        direct = (facts["imports"].get("checks") or {}).get("pkg_resources")
        if direct is None:
            raise cannot_look("imports", "the imports probe did not try `import pkg_resources` (an older recording)")
        if not direct.get("ok"):  # not importable, but no module of the stack needed it: no ✓ for that
            raise cannot_look("imports", f"pkg_resources does not import ({direct.get('message')}), "
                                         "and no module of the stack needed it")
        return
    evidence = grouped_failure_evidence(failures)
    if st:
        evidence.append(f"setuptools=={st} installed (82 and later ship no pkg_resources)")
    yield make("python.pkg-resources-missing", evidence, modules=_modules(failures, "verl"), setuptools=st or "missing",
               python=ctx.python)


def _inside(path: str, directory: str | None) -> bool:
    if not directory or not path:
        return False
    d = posixpath.normpath(directory)
    return posixpath.commonpath([posixpath.normpath(path), d]) == d


@rule("package metadata is readable and unique", "python", needs=("distributions",), emits=("python.broken-metadata",))
def broken_metadata(facts, ctx):
    problems = facts.get("metadata_problems") or {}
    evidence = [f"{b['path']}: {b['error']}" for b in problems.get("broken", [])]
    # An editable install's own build metadata (NAME.egg-info inside the user's checkout, which is
    # on sys.path) is a second copy by the metadata's count, and no stale one.
    dups = [d for d in problems.get("duplicates", [])
            if not _inside(d.get("path") or "", user_project(facts, d["name"]))]
    evidence += [f"second copy of {d['name']} {d['version']} at {d['path']}" for d in dups]
    if evidence:
        dists = " ".join(sorted({d["name"] for d in dups})) or "PACKAGE"
        yield make("python.broken-metadata", evidence, dists=dists, python=ctx.python)


@rule("the Python version is one the stack is locked for", "python", needs=("distributions",), emits=("python.version-unverified",))
def version_unverified(facts, ctx):
    stack = ctx.chosen.stack
    pyver = facts["markers"]["python_version"]
    if stack is None:
        raise cannot_look("distributions", "no known stack: its Python versions are its own requirements' business")
    if pyver in stack["python"]:
        return
    want = stack["python"][-1]
    yield make("python.version-unverified",
               [f"Python {facts['python'].get('version', pyver)} in {ctx.python}",
                f"{stack['name']} is locked and install-tested for Python {', '.join(stack['python'])} "
                f"(knowledge/stacks/{stack['name']}.yaml `python`)"],
               version=pyver, stack=stack["name"], pythons=", ".join(stack["python"]), want=want,
               lockfile=stack_lockfile_for(facts, stack) or "{lockfile}", python=ctx.python)


@rule("the stack's code is the installed distributions' code", "python", needs=("distributions", "imports"),
    emits=("python.shadowed-package",))
def shadowed(facts, ctx):
    """A module that loads from somewhere else than its distribution (an old checkout first on
    sys.path, a .pth, PYTHONPATH, the cwd) runs other code than the metadata says."""
    for module, info in (facts["imports"].get("modules") or {}).items():
        if "." in module or not info.get("ok") or not info.get("file"):
            continue
        dist = (facts["distributions"] or {}).get(canonical_name(module.replace("_", "-")))
        if not dist or dist.get("editable") or dist.get("project") or not dist.get("path"):
            continue
        site = posixpath.dirname(dist["path"].rstrip("/"))
        if _inside(info["file"], site):
            continue
        code_version = info.get("version") or "unknown"
        yield make("python.shadowed-package",
                   [f"import {module} loads {info['file']}",
                    f"the installed distribution is {dist['name']} {dist['version']} in {site}",
                    f"the loaded code says {module}.__version__ = {code_version}"],
                   module=module, file=info["file"], code_version=code_version, dist=dist["name"],
                   version=dist["version"], python=ctx.python)


@rule("compiled files the RECORDs list are on disk", "python", needs=("kernels",), emits=("python.half-installed",))
def half_installed(facts, ctx):
    missing = facts["kernels"].get("missing") or []
    if not missing:
        return
    by_dist: dict[str, list[dict]] = {}
    for m in missing:
        by_dist.setdefault(m["dist"], []).append(m)
    evidence = []
    for dist, items in sorted(by_dist.items()):
        for m in items[:5]:
            what = (f"{m['size']} bytes, RECORD says {m['recorded_size']}" if "recorded_size" in m else "missing")
            evidence.append(f"{dist}: {m['file']} ({what})")
    dists = sorted(by_dist)
    yield make("python.half-installed", evidence, dists=", ".join(dists), first=dists[0],
               version=installed(facts, dists[0]) or "", python=ctx.python)


@rule("no two distributions write different bytes to one path", "python", needs=("kernels",),
      emits=("python.files-overlap",))
def files_overlap(facts, ctx):
    overlaps = facts["kernels"].get("overlaps")
    if overlaps is None:
        raise cannot_look("kernels", "the kernels probe did not compare shared paths (an older recording)")
    known = {tuple(sorted(k["dists"])): k for k in knowledge.load("python_env").get("file_overlaps", [])}
    locked = {canonical_name(n) for n in ((ctx.reference or {}).get("pins") or {})}
    for o in overlaps:
        if not o.get("differ"):
            continue  # the same bytes whoever wrote them
        on_disk = ", ".join(f"{n}: {c}" for n, c in sorted(o["on_disk"].items()))
        evidence = [f"{' and '.join(o['dists'])} both list {o['files']} path(s); {o['differ']} differ in content",
                    f"whose copy is on disk, of the differing ones: {on_disk}"]
        evidence += [f"e.g. {e['file']}: {e['on_disk']}'s copy" for e in o.get("examples", [])]
        k = known.get(tuple(sorted(o["dists"])))
        last = k["last"] if k else o["dists"][-1]
        advice = k["advice"] if k else "the one installed last wins (with uv's parallel installs, a race)"
        strangers = [d for d in o["dists"] if canonical_name(d) not in locked]
        decided = bool(k)  # somebody knows whose copy belongs here
        if not k and locked and len(strangers) == 1:  # the known-good set says whose copy belongs here
            decided = True
            last = next(d for d in o["dists"] if d not in strangers)
            advice = (f"{strangers[0]} is not in the known-good set ({(ctx.reference or {}).get('lockfile')}); "
                      f"{last} is: its copy must win")
        winner_is_last = set(o["on_disk"]) == {last}
        if k:
            evidence.append(f"source: {k['source']}")
        # loose top-level files (a build helper) and stray generic packages (tests/, scripts/ that two
        # wheels ship by mistake) are nobody's importable code: info, not a warning
        junk = set(knowledge.load("python_env").get("stray_top_level", []))
        tops = o.get("differ_tops") or []
        loose = bool(tops) and all(t in junk or t.endswith(".py") for t in tops)
        if loose:
            evidence.append(f"every differing path is under {', '.join(tops)}: stray files of the wheels, "
                            "not code the stack imports")
        # a failing import that names one of the clashing files (or its library's symbols) failed on
        # the copy that won: then the overlap is the cause, an error
        broke = []
        files = o.get("differ_files") or []
        libs = {f.rsplit("/", 1)[-1] for f in files if ".so" in f.rsplit("/", 1)[-1]}   # libnccl.so.2
        fams = {lib_family(n) for n in libs}
        # (a file is named by its path in the package — tests/__init__.py is in every traceback's frames
        # by its basename — or a shared library by its name or its symbols' family)
        for module, info, _ in import_failures(facts) if facts.get("imports") else []:
            text = chain_text(info)
            if any("/" + f in text for f in files) or any(n in text for n in libs) or fams & lib_families(text):
                broke.append(f"import {module}: {info.get('message')}")
        if broke:
            evidence = broke[:3] + evidence
        severity = "info" if loose or (winner_is_last and decided and not broke) else "error" if broke else "warning"
        other = o["dists"][0] if last == o["dists"][1] else o["dists"][1]
        yield make("python.files-overlap", evidence, severity=severity,
                   a=o["dists"][0], b=o["dists"][1], differ=o["differ"], last=last,
                   version=installed(facts, last) or "", advice=advice, python=ctx.python,
                   other=other, other_version=installed(facts, other) or "")


def _cuda_major(sonames) -> int | None:
    """The CUDA major a library was built with, from the runtime libraries it links by soname
    (libcudart.so.13, libnvrtc.so.13, libcublas.so.13: their majors are the toolkit's)."""
    majors = {int(n.rsplit(".", 1)[1]) for n in sonames or [] if n.rsplit(".", 1)[1].isdigit()}
    return max(majors) if majors else None


@rule("compiled extensions link the CUDA major torch was built with", "python", needs=("kernels",),
      emits=("extension.cuda-major-mismatch",))
def cuda_major_mixed(facts, ctx):
    libs = facts["kernels"].get("libraries") or {}
    if not any("cuda_needed" in v for v in libs.values()):
        raise cannot_look("kernels", "the kernels probe did not read the libraries' linked sonames (an older recording)")
    torch_major = next((m for rel, v in sorted(libs.items()) if v.get("dist", "").lower() == "torch"
                        and (m := _cuda_major(v.get("cuda_needed")))), None)
    if torch_major is None:  # nothing to compare with: said as a skip, not a pass
        raise cannot_look("kernels", "torch here links no CUDA runtime (a CPU build, or torch is not installed)")
    by_dist: dict[str, list[tuple[str, int, list]]] = {}
    for rel, v in sorted(libs.items()):
        m = _cuda_major(v.get("cuda_needed"))
        if v.get("dist", "").lower() != "torch" and m is not None and m != torch_major:
            by_dist.setdefault(v["dist"], []).append((rel, m, v["cuda_needed"]))
    torch_version = installed(facts, "torch") or "?"
    for dist, items in sorted(by_dist.items()):
        majors = sorted({m for _, m, _ in items})
        evidence = [f"{rel} links {', '.join(needed)} (CUDA {m})" for rel, m, needed in items[:4]]
        if len(items) > 4:
            evidence.append(f"… and {len(items) - 4} more of {dist}'s libraries")
        evidence.append(f"torch {torch_version} links libcudart.so.{torch_major} (CUDA {torch_major})")
        yield make("extension.cuda-major-mismatch", evidence, dist=dist, version=installed(facts, dist) or "?",
                   ext_cuda="/".join(map(str, majors)), torch=torch_version, torch_cuda=torch_major)
