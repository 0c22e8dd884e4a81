"""One check, end to end: probes (facts) → rules (findings). No printing here."""

from __future__ import annotations

import concurrent.futures as cf
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, cast

from doctor import __version__, cache
from doctor.errors import UsageError
from doctor.facts import Facts, FactsError, RayClusterFacts, check_facts
from doctor.dists import user_projects
from doctor.findings import Finding, strict
from doctor.fixes import fix_together
from doctor.knowledge import get_stack
from doctor.lockfiles import parse_lockfile
from doctor.results import Check
from doctor.probes import (TARGET_PROBES, ProbeResult, interrupt_running, run_cluster_probe, run_local_probe,
                           run_target_probe)
from doctor.probes.environment import environment_facts, load_path_facts
from doctor.probes.gpu import gpu_facts, torch_cuda_build
from doctor.probes.ray_state import head_answers, ray_state_facts
from doctor.probes.system import system_facts
from doctor.rules import Context, evaluate
from doctor.stacks import StackChoice, choose_stack, family_guard, reference_pins


@dataclass
class CheckResult:
    python: str
    facts: Facts
    probes: dict[str, ProbeResult]
    findings: list[Finding] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)   # fact → the option that skipped its probe
    replayed_from: str | None = None              # --facts FILE: judged again, nothing probed
    no_gpu: bool = False                          # --no-gpu was given (a replay judges the same way)
    chosen: StackChoice | None = None             # the stack the rules judged against (decided once)
    target_note: str | None = None                # no --python: which interpreter was taken, in words
    fix_together: list[dict] = field(default_factory=list)  # findings one resolution fixes (doctor fix's step)


def collect_facts(python: str, *, fast: bool = False, use_cache: bool = True, scale: float = 1.0,
                  skip: tuple[str, ...] = (),
                  progress: Callable[[str, str], None] | None = None) -> tuple[Facts, dict[str, ProbeResult]]:
    progress = progress or (lambda probe, state: None)
    t0 = time.perf_counter()
    pool = cf.ThreadPoolExecutor(max_workers=8)
    local = {
        "gpu": pool.submit(run_local_probe, "gpu", gpu_facts, 20),
        "system": pool.submit(run_local_probe, "system", system_facts, 10),
        "environment": pool.submit(run_local_probe, "environment", environment_facts, 10),
        "load_paths": pool.submit(run_local_probe, "load_paths", load_path_facts, 10),
        "ray_state": pool.submit(run_local_probe, "ray_state", ray_state_facts, 20),
    }
    cached_dists = cache.load_dists(python) if use_cache else None
    if cached_dists is not None:
        dist = ProbeResult("distributions", True, data=cached_dists, cached=True)
    else:
        progress("distributions", "start")
        dist = run_target_probe(TARGET_PROBES["distributions"], python)  # --timeout-scale: deep probes only
        progress("distributions", "done")
        if dist.ok and dist.data is not None:
            cache.store_dists(python, dist.data)
    if not dist.ok or dist.data is None:
        pool.shutdown(wait=False)
        old = _python_too_old(python)
        if old:
            raise UsageError(f"--python {python} is Python {old}: the doctor's probes (and verl) need Python 3.8 or "
                             "newer; give the training env's interpreter")
        first = (dist.error or "no output").strip().splitlines()[0]
        if "# Prepended to every probe script" in first:  # it echoed the probe's source: not a Python
            first = first.split(":", 1)[0] + " when given `-c CODE`, as no Python does"
        raise UsageError(f"--python {python}: cannot inspect it as a Python interpreter "
                         f"({first[:160]}{'…' if len(first) > 160 else ''})")
    dist_data: dict = dist.data
    probes: dict[str, ProbeResult] = {"distributions": dist}

    deep_names = [n for n, p in TARGET_PROBES.items() if p.deep and n not in skip]
    if not fast:
        key = cache.fingerprint(python, dist_data, __version__)
        cached = cache.load(key) if use_cache else None
        if cached and all(n in cached for n in deep_names):
            for n in deep_names:
                probes[n] = ProbeResult(n, **{**cached[n], "cached": True})
        else:
            futures = {}
            for n in deep_names:
                progress(n, "start")
                futures[n] = pool.submit(run_target_probe, TARGET_PROBES[n], python, scale)
            try:
                for n, fut in futures.items():
                    probes[n] = fut.result()
                    progress(n, "done")
            except KeyboardInterrupt:  # stop the probes now rather than wait minutes for them
                interrupt_running()
                raise
            if all(probes[n].ok for n in deep_names) and not skip:
                cache.store(key, {n: {"ok": True, "data": probes[n].data, "error": None, "seconds": probes[n].seconds}
                                  for n in deep_names})
    for n, fut in local.items():
        probes[n] = fut.result()
    pool.shutdown(wait=False)

    facts: dict = {
        "python": dist_data["python"],
        "markers": dist_data["markers"],
        "distributions": dist_data["dists"],
        "metadata_problems": {"broken": dist_data["broken"], "duplicates": dist_data["duplicates"]},
        "gpu": dict(probes["gpu"].data or {"available": False, "reason": probes["gpu"].error},
                    torch=torch_cuda_build(dist_data["dists"])),
        "system": probes["system"].data,
        "environment": probes["environment"].data,
        "load_paths": probes["load_paths"].data,
        "ray_state": probes["ray_state"].data,
        # Deep probes: their data, or None when skipped (--fast, --skip-probe) or failed.
        **{n: probes[n].data if n in probes and probes[n].ok else None
           for n, p in TARGET_PROBES.items() if p.deep},
    }
    for n, p in TARGET_PROBES.items():  # facts a probe provides beside its own (imports → extensions)
        if p.provides and facts.get(n) is not None:
            facts.update({key: facts[n].get(key) for key in p.provides})
            facts[n] = {k: v for k, v in facts[n].items() if k not in p.provides}
        else:
            facts.update(dict.fromkeys(p.provides))
    facts["_collect_seconds"] = round(time.perf_counter() - t0, 3)
    # Assembled by name from TARGET_PROBES (which mypy cannot follow); each probe's data was
    # validated against its doctor.facts type where it entered (run_target_probe, run_local_probe).
    return cast(Facts, facts), probes


def _python_too_old(python: str) -> str | None:
    """'2.7' or '3.6' when the target is a Python too old for the probes (asked in a way every
    Python answers), else None."""
    try:
        out = subprocess.run([python, "-c", "import sys; sys.stdout.write('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL).stdout.strip()
        major, minor = (int(x) for x in out.split("."))
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return out if (major, minor) < (3, 8) else None


def run_check(python: str, *, fast=False, use_cache=True, scale=1.0, stack_name: str | None = None,
              lockfile: Path | None = None, progress=None, cluster: str | None = None,
              skip: tuple[str, ...] = (), no_gpu: bool = False, recipe: dict | None = None,
              show: bool = False, lenient_recipe: bool = False) -> CheckResult:
    lock = parse_lockfile(lockfile) if lockfile else None  # bad lockfile: exit 2 before any probe
    stack = get_stack(stack_name) if stack_name else None
    t0 = time.perf_counter()
    facts, probes = collect_facts(python, fast=fast, use_cache=use_cache, scale=scale, progress=progress, skip=skip)
    if cluster:  # --cluster: versions on every alive node, in each node's own interpreter
        # A TCP connect first: an address nothing listens on is one finding in seconds, not a
        # 120 s probe timeout.
        reach = head_answers(cluster, 3.0)
        if reach.get("answers") is False:
            facts["ray_cluster"] = {"ok": False, "address": cluster, "reachable": reach, "nodes": []}
        else:
            probes["ray_cluster"] = run_cluster_probe(python, cluster, stack or None, scale)
            facts["ray_cluster"] = cast(RayClusterFacts, probes["ray_cluster"].data) if probes["ray_cluster"].ok else None
    skipped = {n: ("--skip-probe" if n in skip else "--fast")
               for n, p in TARGET_PROBES.items() if p.deep and n not in probes}
    if recipe is not None:  # --recipe: its composed config, its GPU needs and its dry run are facts too
        recipe_errors: dict[str, str] = {}
        from doctor.recipes.checkfacts import recipe_facts  # lazy: only --recipe needs it (yaml, rich), not a warm check

        more = recipe_facts(python, recipe, dry_run=not fast, show=show, errors=recipe_errors if lenient_recipe else None)
        probes.update({n: ProbeResult(n, False, error=e) for n, e in recipe_errors.items()})
        facts["recipe"], facts["recipe_config"], facts["dryrun"] = more["recipe"], more["recipe_config"], more["dryrun"]
        if fast:
            skipped["dryrun"] = "--fast"
    t1 = time.perf_counter()
    chosen = choose_stack(facts, stack)
    ctx = Context(python=python, stack=stack, chosen=chosen, lock=lock, lockfile=str(lockfile) if lockfile else None,
                  probe_errors={n: r.error for n, r in probes.items() if not r.ok},
                  skipped={**skipped, **{k: why for n, why in skipped.items()
                                         for k in (TARGET_PROBES[n].provides if n in TARGET_PROBES else ())}},
                  cluster=cluster, no_gpu=no_gpu, reference=reference_pins(facts, chosen.stack, lockfile, lock))
    findings, checks = evaluate(facts, ctx)
    t2 = time.perf_counter()
    timings = {"probes": {n: round(r.seconds, 3) for n, r in probes.items()},
               "cached": sorted(n for n, r in probes.items() if r.cached),
               "collect_s": round(t1 - t0, 3), "rules_s": round(t2 - t1, 3)}
    return CheckResult(python=python, facts=facts, probes=probes, findings=findings, checks=checks, timings=timings,
                       skipped=ctx.skipped, no_gpu=no_gpu, chosen=chosen,
                       fix_together=together(findings, facts, python, chosen, lockfile))


def together(findings: list[Finding], facts: Facts, python: str, chosen: StackChoice, lockfile: Path | None) -> list[dict]:
    """The check's one-command fixes: what `doctor fix` would run for findings that share a cause."""
    try:
        return fix_together(findings, python=python, stack=chosen.stack, lockfile=str(lockfile) if lockfile else None,
                            protected=user_projects(facts), guard=family_guard(chosen, facts), facts=facts)
    except Exception:  # noqa: BLE001 - a hint; the findings' own fixes are printed anyway
        if strict():  # the tests: the doctor's own bug fails loudly instead of hiding the hint
            raise
        return []


def recheck_facts(path: str, *, stack_name: str | None = None, lockfile: Path | None = None,
                  no_gpu: bool = False) -> CheckResult:
    """`doctor check --facts FILE`: the rules of this doctor on the facts of an earlier `--json`
    (attached to a bug report, recorded on another machine). Nothing is probed."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"--facts {path}: not a doctor check --json document ({type(exc).__name__}: {exc})")
    if isinstance(doc, dict) and isinstance(doc.get("check"), dict):  # a bug-report bundle
        doc = doc["check"]
    if not isinstance(doc, dict) or doc.get("schema_version") != 1 or not isinstance(doc.get("facts"), dict) \
            or "distributions" not in doc["facts"]:
        raise UsageError(f"--facts {path}: not a doctor check --json document (schema_version 1 with facts)")
    try:
        check_facts(doc["facts"])
    except FactsError as exc:
        raise UsageError(f"--facts {path}: facts not of the doctor's shape: {exc}")
    facts = doc["facts"]
    probes = {n: ProbeResult(n, bool(p.get("ok")), error=p.get("error"), cached=True)
              for n, p in (doc.get("probes") or {}).items()}
    skipped = doc.get("skipped") or {}
    no_gpu = no_gpu or bool(doc.get("no_gpu"))
    lock = parse_lockfile(lockfile) if lockfile else None
    python = (doc.get("target") or {}).get("python") or "python"
    stack = get_stack(stack_name) if stack_name else None
    chosen = choose_stack(facts, stack)
    ctx = Context(python=python, stack=stack, chosen=chosen, lock=lock,
                  lockfile=str(lockfile) if lockfile else None,
                  probe_errors={n: r.error for n, r in probes.items() if not r.ok}, skipped=skipped,
                  cluster=(facts.get("ray_cluster") or {}).get("address"), no_gpu=no_gpu,
                  reference=reference_pins(facts, chosen.stack, lockfile, lock))
    t0 = time.perf_counter()
    findings, checks = evaluate(facts, ctx)
    return CheckResult(python=python, facts=facts, probes=probes, findings=findings, checks=checks,
                       timings={"probes": {}, "cached": [], "collect_s": 0.0, "rules_s": round(time.perf_counter() - t0, 3)},
                       skipped=skipped, replayed_from=path, no_gpu=no_gpu, chosen=chosen,
                       fix_together=together(findings, facts, python, chosen, lockfile))
