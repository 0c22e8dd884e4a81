"""Typed facts (doctor/facts.py): every recorded facts file has the shape rules rely on; a probe's
output that does not is a failed probe with that reason; a `--facts` document that does not is one
line and exit 2."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import DATA, run_doctor
from doctor.facts import FACT_TYPES, PROBE_TYPES, check_facts, FactsError, validate, validate_facts, validate_probe
from doctor.probes import TargetProbe, run_local_probe, run_target_probe

CHECK_DOCUMENTS = sorted(p for p in DATA.rglob("*.json") if "schema_version" in p.read_text()[:200]
                         and '"facts"' in p.read_text())


def test_recorded_check_documents_are_found():
    assert len(CHECK_DOCUMENTS) >= 9  # the H200 checks (tests/data/gpu/h200-checks)


@pytest.mark.parametrize("path", CHECK_DOCUMENTS, ids=lambda p: p.name)
def test_every_recorded_check_document_is_valid(path):
    assert validate_facts(json.loads(path.read_text())["facts"]) == []


@pytest.mark.parametrize("name", ["facts-working.json", "h200-py312-facts.json"])
def test_every_recorded_facts_file_is_valid(name):
    facts = json.loads((DATA / name).read_text())
    assert validate_facts(facts) == []
    assert {"distributions", "gpu", "imports", "extensions"} <= set(facts)


def test_recorded_probe_data_is_valid():
    gpu = json.loads((DATA / "h200-gpu-facts.json").read_text())
    assert [validate("gpu", g) for g in gpu.values()] == [[], []]
    assert validate("kernels", json.loads((DATA / "kernels-working.json").read_text())) == []


def test_every_fact_the_engine_files_is_typed():
    from doctor.probes import TARGET_PROBES

    names = {"python", "markers", "distributions", "metadata_problems", "gpu", "system", "environment", "ray_state",
             "ray_cluster", "recipe", "recipe_config", "dryrun"}
    names |= {n for n, p in TARGET_PROBES.items() if p.deep} | {k for p in TARGET_PROBES.values() for k in p.provides}
    assert names <= set(FACT_TYPES)
    assert set(TARGET_PROBES) <= set(PROBE_TYPES)


def test_problems_name_the_fact_and_what_is_wrong():
    assert validate("gpu", {"available": "yes"}) == ["gpu.available: expected bool, got str"]
    assert validate("gpu", {}) == ["gpu.available: missing"]
    assert validate("distributions", {"torch": {"name": "torch"}}) == ["distributions['torch'].version: missing"]
    assert validate("kernels", {"libraries": {}, "missing": None}) == ["kernels.missing: expected list, got null"]
    assert validate("imports", []) == ["imports: expected object or null, got list"]
    assert validate("ray_smoke", None) == []        # a skipped or failed deep probe
    assert validate("from_a_newer_doctor", 1) == []  # not judged
    assert validate_facts({"gpu": {"available": False}}) == ["distributions: missing"]
    # a probe's output is judged as printed: the imports probe carries the extensions fact
    assert validate_probe("imports", {"modules": {}, "checks": {}}) == ["imports.extensions: missing"]
    assert validate("imports", {"modules": {}, "checks": {}}) == []
    with pytest.raises(FactsError, match=r"^distributions: missing \(and 1 more\)$"):
        check_facts({"gpu": {}})


def test_a_probe_whose_output_lacks_what_rules_read_has_failed(tmp_path):
    (tmp_path / "bad.py").write_text('emit({"libraries": {}, "missing": "none"})\n')
    probe = TargetProbe("kernels", ("bad.py",), budget_s=30, deep=True, script_dir=tmp_path)
    got = run_target_probe(probe, sys.executable)
    assert not got.ok and got.data is None
    assert got.error == "unexpected probe output: kernels.missing: expected list, got str"
    (tmp_path / "good.py").write_text('emit({"libraries": {}, "missing": []})\n')
    assert run_target_probe(TargetProbe("kernels", ("good.py",), budget_s=30, deep=True, script_dir=tmp_path),
                            sys.executable).ok
    local = run_local_probe("system", lambda: {"shm": {}, "tmp": {}, "nofile": {}}, 5)
    assert not local.ok and local.error == "unexpected probe output: system.memory: missing"


@pytest.mark.parametrize("break_it, named", [
    (lambda f: f["gpu"].update(available="yes"), "gpu.available: expected bool, got str"),
    (lambda f: f["distributions"]["torch"].pop("version"), "distributions['torch'].version: missing"),
    (lambda f: f.update(ray_state=[]), "ray_state: expected object or null, got list"),
])
def test_a_bad_facts_document_is_one_line_and_exit_2(tmp_path, break_it, named):
    doc = json.loads((DATA / "gpu" / "h200-checks" / "h200-cvd-0.json").read_text())
    break_it(doc["facts"])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    proc = run_doctor("check", "--facts", str(bad))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and str(bad) in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
