"""The rule mechanism itself (doctor/rules/registry.py), on the recorded facts of the working env:
no check is ✓ on facts it did not see, and a rule that raises is a `crash`, not a dead check."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import DATA, REPO
from doctor.probes import TARGET_PROBES
from doctor.rules import Context, evaluate

WORKING = json.loads((DATA / "facts-working.json").read_text())
DEEP = sorted({n for n, p in TARGET_PROBES.items() if p.deep} |
              {k for p in TARGET_PROBES.values() if p.deep for k in p.provides} | {"ray_cluster"})


def run(facts, **ctx):
    trace: dict = {}
    findings, checks = evaluate(facts, Context(python="/x/bin/python", **ctx), trace=trace)
    return findings, checks, trace


@pytest.mark.parametrize("absent", DEEP)
def test_no_check_passes_on_a_deep_fact_it_did_not_see(absent):
    facts = copy.deepcopy(WORKING)
    facts[absent] = None
    _, checks, trace = run(facts, skipped={absent: "--skip-probe"})
    read_it = [c for c in checks if absent in trace.get(c.check, ())]
    assert read_it or absent == "ray_cluster", f"no rule reads {absent}: the parametrization is stale"
    passed = [c.check for c in read_it if c.status == "ok"]
    assert not passed, f"✓ although {absent} is absent: {passed}"
    for c in read_it:
        if c.status == "skipped":
            assert c.why and ("--skip-probe" in c.why or absent in c.why), (c.check, c.why)


def test_every_rule_reads_only_facts_that_exist_in_a_real_recording():
    _, checks, trace = run(copy.deepcopy(WORKING))
    known = set(WORKING) | set(DEEP) | {"gpu", "system", "environment", "ray_state", "load_paths"}  # the local probes
    for check, reads in trace.items():
        assert reads <= known, f"{check} reads facts no probe provides: {reads - known}"


def test_no_gpu_or_no_nvml_skips_what_needs_a_gpu():
    facts = copy.deepcopy(WORKING)
    facts["gpu"] = {"available": False, "reason": "NVML: NVML Shared Library Not Found", "torch": {"cuda": "12.1"}}
    _, checks, _ = run(facts)
    by = {c.check: c for c in checks}
    for name in ("the driver supports the CUDA of torch and of each NVIDIA wheel", "GPUs support bfloat16", "no other process holds GPU memory"):
        assert by[name].status == "skipped" and "no GPU to look at" in by[name].why, by[name]
    assert by["an NVIDIA GPU is usable"].status == "error"


def test_no_gpu_flag_turns_gpu_checks_off_and_says_so():
    facts = copy.deepcopy(WORKING)
    facts["gpu"] = {"available": False, "reason": "NVML: Driver Not Loaded", "torch": {"cuda": "12.1"}}
    findings, checks, _ = run(facts, no_gpu=True)
    gpu_checks = [c for c in checks if c.area == "gpu"]
    assert gpu_checks and all(c.status == "skipped" and "--no-gpu" in c.why for c in gpu_checks)
    assert not [f for f in findings if f.severity == "error"], [f.id for f in findings if f.severity == "error"]


def test_an_empty_venv_passes_no_version_check():
    facts = copy.deepcopy(WORKING)
    facts["distributions"] = {k: v for k, v in facts["distributions"].items() if k in ("pip",)}
    for d in DEEP:
        facts[d] = None
    _, checks, _ = run(facts)
    by = {c.check: c for c in checks}
    assert by["versions within the stack's known-good ranges"].status == "skipped"


def test_a_gpu_record_of_an_unexpected_shape_does_not_kill_the_check():
    facts = copy.deepcopy(WORKING)
    facts["gpu"] = {"available": True, "gpus": [{"index": 0, "compute_capability": [7, 0]}], "torch": {}}
    findings, checks, _ = run(facts)
    assert "gpu.bf16-unsupported" in {f.id for f in findings}


def test_a_crashing_rule_is_a_crash_check_and_the_others_go_on(tmp_path):
    # A real copy of the package with one rule that raises, run as a user runs `doctor check`.
    shutil.copytree(REPO / "doctor", tmp_path / "doctor", ignore=shutil.ignore_patterns("__pycache__"))
    probes_rules = tmp_path / "doctor" / "rules" / "probes.py"
    probes_rules.write_text(probes_rules.read_text() + '''

@rule("a rule that raises", "doctor")
def raises(facts, ctx):
    gpu = {"index": 0}
    yield gpu["name"]  # KeyError, like a GPU record without a name
''')
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "doctor", "check", "--fast", "--json", "--no-gpu"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    doc = json.loads(proc.stdout)
    crash = [c for c in doc["checks"] if c["check"] == "a rule that raises"]
    assert crash and crash[0]["status"] == "crash", crash
    f = next(f for f in doc["findings"] if f["id"] == "doctor.rule-crashed")
    assert "KeyError: 'name'" in f["title"] and any("KeyError" in e for e in f["evidence"])
    assert "report" in f["fix"]["summary"].lower()
    assert len(doc["checks"]) > 20  # the other checks ran
    errors = [x for x in doc["findings"] if x["severity"] == "error"]
    assert proc.returncode == (1 if errors else 3), (proc.returncode, [x["id"] for x in errors])
