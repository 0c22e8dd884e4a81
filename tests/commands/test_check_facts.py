"""`doctor check --facts FILE`: this doctor's rules on the facts of an earlier `--json`, nothing
probed. Real documents: a check of the doctor's own env here, and recorded H200 NVML facts (a
named test double, tests/data/h200-gpu-facts.json) put into one."""

from __future__ import annotations

import json

from conftest import DATA, run_doctor


def _doc(tmp_path, name="check.json"):
    proc = run_doctor("check", "--fast", "--json")
    path = tmp_path / name
    path.write_text(proc.stdout)
    return proc, json.loads(proc.stdout), path


def test_a_replay_gives_the_same_verdict(tmp_path):
    first, doc, path = _doc(tmp_path)
    again = run_doctor("check", "--facts", str(path), "--json")
    assert again.returncode == first.returncode
    doc2 = json.loads(again.stdout)
    assert [f["id"] for f in doc2["findings"]] == [f["id"] for f in doc["findings"]]
    assert [(c["check"], c["status"]) for c in doc2["checks"]] == [(c["check"], c["status"]) for c in doc["checks"]]
    text = run_doctor("check", "--facts", str(path)).stdout
    assert "nothing was probed" in text and "skipped by --fast" not in text.split("nothing was probed")[0]


def test_recorded_gpu_facts_are_judged_again(tmp_path):
    _, doc, _ = _doc(tmp_path)
    h200 = json.loads((DATA / "h200-gpu-facts.json").read_text())["idle"]
    sel = json.loads((DATA / "gpu" / "h200-device-selection.json").read_text())
    for g, real in zip(h200["gpus"], sel["nvml"]["gpus"]):
        g["uuid"] = real["uuid"]
    doc["facts"]["gpu"] = {**h200, "torch": {"version": "2.4.0+cu121", "cuda": "12.1"}}
    doc["facts"]["environment"] = {"CUDA_VISIBLE_DEVICES": "0,0"}
    path = tmp_path / "h200.json"
    path.write_text(json.dumps(doc))
    proc = run_doctor("check", "--facts", str(path), "--json")
    ids = {f["id"] for f in json.loads(proc.stdout)["findings"]}
    assert "gpu.selection-duplicate" in ids and "gpu.none" not in ids
    assert proc.returncode == 1


def test_not_a_document_is_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    proc = run_doctor("check", "--facts", str(bad))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "schema_version 1" in proc.stderr
    proc = run_doctor("check", "--facts", str(bad), "--python", "/usr/bin/python3")
    assert proc.returncode == 2 and "does not apply" in proc.stderr
