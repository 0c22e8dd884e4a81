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
