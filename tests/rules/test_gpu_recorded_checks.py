"""Whole `doctor check --json` runs recorded on a lent H200 (benchmarks/record_doctor_on_gpu.sh:
seven device selections, the image's CUDA compat copy first on LD_LIBRARY_PATH, a process holding
20 GiB), replayed here with `doctor check --facts` — named test doubles, since no machine here has
a GPU. The target there is the machine's own Python (torch 2.11, no stack), so the stack findings
are the same in each; the GPU findings must be what CUDA itself did with each setting
(tests/data/gpu/h200-device-selection.json, tests/data/gpu/h200-libcuda.json)."""

from __future__ import annotations

import json

import pytest

from conftest import DATA, run_doctor
from doctor.probes.environment import environment_facts

RECORDINGS = DATA / "gpu" / "h200-checks"
# name -> the GPU findings, from what CUDA did with the same setting on the same machine
EXPECTED = {
    "cvd-unset": set(),
    "cvd-0": set(),
    "cvd-uuid": set(),                              # cuInit OK: a full GPU UUID selects it
    "cvd-0-1": {"gpu.selection-truncated"},         # CUDA stops at the invalid ordinal 1: one GPU
    "cvd-1": {"gpu.selection-empty"},               # CUDA_ERROR_NO_DEVICE
    "cvd-empty": {"gpu.selection-empty"},           # CUDA_ERROR_NO_DEVICE
    "cvd-dup": {"gpu.selection-duplicate"},         # CUDA_ERROR_INVALID_DEVICE
    "compat-first": {"gpu.libcuda-compat-older"},   # cuInit 803
    "held": {"gpu.memory-held"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_replay_of_the_h200_check_names_what_cuda_did(name, tmp_path):
    path = RECORDINGS / f"h200-{name}.json"
    recorded = json.loads(path.read_text())
    gpu = lambda doc: {f["id"] for f in doc["findings"] if f["area"] == "gpu"}  # noqa: E731
    assert gpu(recorded) == EXPECTED[name]  # what the doctor said on the H200
    p = run_doctor("check", "--facts", str(path), "--json")
    again = json.loads(p.stdout)
    assert gpu(again) == EXPECTED[name]  # and what this doctor says of the same facts


def test_a_gpu_uuid_in_cuda_visible_devices_is_not_redacted_as_a_secret():
    """It was (a 40-character value), and the selection then read as 'selects no GPU'."""
    recorded = json.loads((RECORDINGS / "h200-cvd-uuid.json").read_text())
    uuid = recorded["facts"]["gpu"]["gpus"][0]["uuid"]
    assert recorded["facts"]["environment"]["CUDA_VISIBLE_DEVICES"] == uuid
    assert environment_facts({"CUDA_VISIBLE_DEVICES": f"{uuid},0"}) == {"CUDA_VISIBLE_DEVICES": f"{uuid},0"}
    assert environment_facts({"CUDA_VISIBLE_DEVICES": "sk-" + "a" * 20})["CUDA_VISIBLE_DEVICES"] == "<redacted>"


def test_check_recipe_counts_the_gpus_the_job_sees_on_the_recorded_h200():
    from doctor.recipes import catalog
    from doctor.rules.gpu import recipe_gpus

    def verdict(name, recording, recipe):
        facts = json.loads((RECORDINGS / f"h200-{recording}.json").read_text())["facts"]
        r = catalog.load(recipe)
        config = {"trainer": {"n_gpus_per_node": r["hardware"]["gpus"], "nnodes": 1}}
        return recipe_gpus(facts["gpu"], facts["environment"], r["hardware"], r["name"], config)

    found, _ = verdict("2xA100", "cvd-unset", "gsm8k-2xA100")  # 2 GPUs asked, 1 H200 there
    assert [f.id for f in found] == ["gpu.too-few-for-recipe"] and "found 1 (0: NVIDIA H200 140 GiB)" in found[0].title
    found, seen = verdict("smoke", "cvd-uuid", "gsm8k-smoke-1gpu")
    assert found == [] and seen.startswith("1 GPU(s) ≥ 24 GiB (0: NVIDIA H200")
    found, _ = verdict("smoke", "cvd-1", "gsm8k-smoke-1gpu")  # CUDA_VISIBLE_DEVICES=1 on a 1-GPU machine
    assert "CUDA_VISIBLE_DEVICES='1' leaves the job 0" in found[0].title
