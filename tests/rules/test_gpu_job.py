"""The GPU checks answer "will my job run on these GPUs": the device selection as CUDA applies it,
and the kernels the compiled libraries carry for each GPU's architecture. Replays of real data,
named as test doubles: tests/data/gpu/h200-device-selection.json (CUDA's own answers for 20
selections on a lent H200), tests/data/h200-gpu-facts.json (NVML there), and
tests/data/kernels-working.json (the kernels probe on the working env's real wheels)."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import DATA
from doctor.rules import Context, evaluate
from doctor.rules.gpu import kernel_support, select_devices

SELECTIONS = json.loads((DATA / "gpu" / "h200-device-selection.json").read_text())
WORKING = json.loads((DATA / "facts-working.json").read_text())
H200 = json.loads((DATA / "h200-gpu-facts.json").read_text())
KERNELS = json.loads((DATA / "kernels-working.json").read_text())
NVML_GPUS = SELECTIONS["nvml"]["gpus"]


@pytest.mark.parametrize("sel", SELECTIONS["selections"], ids=[s["label"] for s in SELECTIONS["selections"]])
def test_the_selection_is_what_cuda_itself_gave_on_the_h200(sel):
    drv = sel["driver"]
    cuda_count = drv["cuDeviceGetCount"]["count"] if drv["cuInit"]["name"] == "CUDA_SUCCESS" else 0
    got = select_devices(sel["env"].get("CUDA_VISIBLE_DEVICES"), NVML_GPUS)
    assert len(got["devices"]) == cuda_count, (sel["label"], got)
    assert [d["uuid"] for d in got["devices"]] == [d["uuid"] for d in drv.get("devices", [])][:cuda_count]
    if drv["cuInit"]["name"] == "CUDA_ERROR_INVALID_DEVICE":
        assert got["kind"] == "duplicate"


def facts_with(cvd=None, cc=None, kernels=True):
    facts = copy.deepcopy(WORKING)
    facts["gpu"] = copy.deepcopy(H200["idle"] if "idle" in H200 else H200)
    facts["gpu"].setdefault("torch", {"version": "2.4.0+cu121", "cuda": "12.1"})
    for g, real in zip(facts["gpu"]["gpus"], NVML_GPUS):
        g.setdefault("uuid", real["uuid"])
        if cc:
            g["compute_capability"] = list(cc)
    facts["environment"] = {"CUDA_VISIBLE_DEVICES": cvd} if cvd is not None else {}
    facts["kernels"] = copy.deepcopy(KERNELS) if kernels else None
    return facts


def found(facts):
    findings, checks = evaluate(facts, Context(python="/x/bin/python"))
    return {f.id: f for f in findings}, {c.check: c for c in checks}


@pytest.mark.parametrize("cvd, fid", [("0,0", "gpu.selection-duplicate"), ("1", "gpu.selection-empty"),
                                      ("", "gpu.selection-empty"), ("0,1", "gpu.selection-truncated"),
                                      ("2c0c0a9f-de21-3065-fc28-4e39d2c909fa", "gpu.selection-empty")])
def test_a_bad_selection_is_named(cvd, fid):
    f, c = found(facts_with(cvd))
    assert fid in f, sorted(f)
    assert repr(cvd) in f[fid].evidence[0]


@pytest.mark.parametrize("cvd", [None, "0", "GPU-2c0c0a9f", " 0 "])
def test_a_good_selection_passes(cvd):
    f, c = found(facts_with(cvd))
    assert c["CUDA_VISIBLE_DEVICES selects the GPUs meant"].status == "ok"


def test_the_working_wheels_cover_the_h200():
    f, c = found(facts_with())
    assert c["the compiled kernels cover the job's GPUs"].status in ("ok", "warning"), c
    assert "gpu.no-kernel-image" not in f


def test_a_gpu_the_wheels_lack_is_an_error_naming_the_library_and_arch():
    f, c = found(facts_with(cc=(12, 0)))   # the H200's record replayed as an sm_120 GPU (Blackwell)
    err = f["gpu.no-kernel-image"]
    assert err.severity == "error" and "sm_120" in err.title and "torch/lib/libtorch_cuda.so" in err.title
    assert any("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90, no PTX" in e for e in err.evidence)


def test_no_gpu_selected_means_the_kernel_check_cannot_look():
    f, c = found(facts_with("-1"))
    assert c["the compiled kernels cover the job's GPUs"].status == "skipped"


def test_flash_attn_needs_ampere():
    facts = facts_with(cc=(7, 0))
    facts["distributions"]["flash-attn"] = {"name": "flash-attn", "version": "2.7.0.post2", "path": "/x"}
    f, c = found(facts)
    assert "gpu.flash-attn-unsupported-arch" in f and "7.0" in f["gpu.flash-attn-unsupported-arch"].title


@pytest.mark.parametrize("lib, cc, expect", [
    ({"sm": [80, 90], "ptx": [], "variants": []}, (8, 6), "cubin"),     # sm_80 runs on 8.6
    ({"sm": [90], "ptx": [], "variants": ["sm_90a"]}, (9, 0), "cubin"),
    ({"sm": [90], "ptx": [], "variants": ["sm_90a"]}, (10, 0), "none"),
    ({"sm": [60, 70, 75, 80], "ptx": [60, 80], "variants": []}, (9, 0), "ptx"),  # xformers/_C.so here
    ({"sm": [86], "ptx": [], "variants": []}, (8, 0), "none"),          # a newer minor does not run on an older one
])
def test_cuda_binary_compatibility(lib, cc, expect):
    assert kernel_support(lib, cc) == expect


def test_the_rollout_claim_against_the_memory_another_process_holds():
    """Issue 27: the preflight said ✓ on a GPU whose memory another process held. vLLM 0.6.3 claims
    gpu_memory_utilization × total (memory held before its worker started is not subtracted): on the
    lent H200 with a process holding 4.5 GiB (NVML, recorded), 0.98 × 140.4 GiB does not fit, 0.5 does."""
    import json

    from conftest import DATA

    busy = json.loads((DATA / "h200-gpu-facts.json").read_text())["busy"]

    def facts(util):
        return {"gpu": busy, "environment": {}, "distributions": {}, "markers": {"python_version": "3.12"},
                "recipe": {"name": "gsm8k-smoke-1gpu", "hardware": {"gpus": 1, "min_memory_gib": 20}},
                "recipe_config": {"config": {"actor_rollout_ref": {"rollout": {"gpu_memory_utilization": util}},
                                             "trainer": {"n_gpus_per_node": 1, "nnodes": 1}}}}

    findings, checks = evaluate(facts(0.98), Context(python="/x/bin/python"))
    (f,) = [f for f in findings if f.id == "gpu.memory-short-for-rollout"]
    assert f.severity == "error" and "held by: pid 459 python3 4.5 GiB" in f.evidence
    assert "0.98 × 140.4 GiB = 137.6 GiB" in " ".join(f.evidence) and "135.3 GiB free" in " ".join(f.evidence)
    assert "gpu_memory_utilization to 0.91 or less" in f.fix.summary
    findings, checks = evaluate(facts(0.5), Context(python="/x/bin/python"))
    assert "gpu.memory-short-for-rollout" not in {f.id for f in findings}
    assert any(c.check == "the GPU memory the rollout will claim is free" and c.status == "ok" for c in checks)
    plain = {k: v for k, v in facts(0.98).items() if k not in ("recipe", "recipe_config")}
    _, checks = evaluate(plain, Context(python="/x/bin/python"))
    assert not any(c.check == "the GPU memory the rollout will claim is free" for c in checks)  # no recipe: no line


@pytest.mark.parametrize("held,util,fits", [(0, 0.65, True), (60, 0.4, True), (60, 0.65, False), (120, 0.4, False)])
def test_the_rollout_claim_on_the_h200_with_memory_held_at_several_sizes(held, util, fits):
    """NVML recorded on the lent H200 while a second process held 0, 60 and 120 GiB (issue 27's case:
    120 GiB held, the smoke recipe's 0.4 × 140 GiB = 56 GiB cannot fit in the 19 GiB left)."""
    import json

    gpu = json.loads((DATA / "gpu" / "h200-memory-held" / f"h200-memory-held-{held}.json").read_text())
    facts = {"gpu": gpu, "environment": {}, "distributions": {}, "markers": {"python_version": "3.12"},
             "recipe": {"name": "r", "hardware": {"gpus": 1, "min_memory_gib": 20}},
             "recipe_config": {"config": {"actor_rollout_ref": {"rollout": {"gpu_memory_utilization": util}},
                                          "trainer": {"n_gpus_per_node": 1, "nnodes": 1}}}}
    findings, _ = evaluate(facts, Context(python="/x/bin/python"))
    short = [f for f in findings if f.id == "gpu.memory-short-for-rollout"]
    assert (not short) is fits, [f.title for f in short]
    if short:
        assert any(e.startswith("held by: pid ") and "python3" in e for e in short[0].evidence)
