"""Cases of the env batch of issue 24 (benchmarks/env_batch/CASES.yaml: one change to the working set
each, from a public thread; first-look and final scores in docs/benchmarks.md) kept as tests: the
cause is the headline (the one error not caused by another), not where it surfaced — also where
`uv pip check` says nothing."""

from __future__ import annotations

import json
import subprocess

import pytest

import envs
from conftest import check_json, run_doctor
from doctor.uv import uv_bin

pytestmark = pytest.mark.realenv
HOST = {"gpu.none"}


def headlines(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["severity"] == "error" and not f.get("caused_by") and f["id"] not in HOST]


def test_a_wheel_that_overwrites_another_wheels_library_is_the_cause():
    # https://github.com/rwth-i6/returnn/issues/1802: libtorch_cuda.so: undefined symbol: ncclCommRegister
    _, doc = check_json("extra-nccl-cu11")
    (head,) = headlines(doc)
    assert head["id"] == "python.files-overlap" and "nvidia-nccl-cu11" in head["title"], head["title"]
    assert any("ncclCommRegister" in e for e in head["evidence"]), head["evidence"]
    assert head["fix"]["commands"] and "--reinstall --no-deps" in head["fix"]["commands"][0]


def test_a_library_refusing_an_older_dependency_names_that_dependency():
    # pandas 3.0.6: "Please upgrade numpy to >= 1.26.0" (https://github.com/alexnathanson/solar-protocol/issues/3)
    _, doc = check_json("pin-numpy1252")
    (head,) = headlines(doc)
    assert head["id"] == "stack.culprit" and "numpy" in head["title"], head["title"]


def test_a_setting_that_switches_on_a_missing_integration_is_the_cause():
    # VLLM_USE_MODELSCOPE=True without modelscope (https://github.com/vllm-project/vllm/issues/16524)
    py = envs.build("working")
    doc = json.loads(run_doctor("check", "--json", "--no-gpu", "--python", str(py),
                                env={"VLLM_USE_MODELSCOPE": "True"}).stdout)
    (head,) = headlines(doc)
    assert head["id"] == "setting.unusable-value" and head["title"].startswith("VLLM_USE_MODELSCOPE=True"), head


def test_a_preloaded_library_of_another_version_is_the_cause(tmp_path):
    # LD_PRELOAD of NCCL 2.18.1's libnccl.so.2 (https://github.com/NVIDIA/nccl/issues/1180)
    subprocess.run([uv_bin(), "pip", "install", "-q", "--target", str(tmp_path / "nccl"), "--no-deps",
                    "nvidia-nccl-cu12==2.18.1"], check=True, env=envs.uv_env())
    lib = tmp_path / "nccl" / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    py = envs.build("working")
    doc = json.loads(run_doctor("check", "--json", "--no-gpu", "--python", str(py), env={"LD_PRELOAD": str(lib)}).stdout)
    (head,) = headlines(doc)
    assert head["id"] == "setting.loads-code" and head["title"].startswith("LD_PRELOAD makes torch"), head["title"]
    assert head["fix"]["commands"][0].startswith("env -u LD_PRELOAD ")


def test_a_cached_check_is_not_reused_under_another_setting(tmp_path):
    # the probe cache keys on every setting the environment facts read: a check without
    # VLLM_USE_MODELSCOPE must not answer for one with it (found in CI: the second check reused the first)
    py = str(envs.build("working"))
    cache = {"VERL_DOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    plain = json.loads(run_doctor("check", "--json", "--no-gpu", "--python", py, env=cache).stdout)
    assert not headlines(plain)
    switched = json.loads(run_doctor("check", "--json", "--no-gpu", "--python", py,
                                     env={**cache, "VLLM_USE_MODELSCOPE": "True"}).stdout)
    assert [f["id"] for f in headlines(switched)] == ["setting.unusable-value"]
    assert not switched["timings"].get("cached"), switched["timings"]


def test_wheels_of_two_cuda_majors_are_named_by_the_libraries_they_link():
    # vLLM 0.24's wheel (CUDA 13) over torch 2.4 (CUDA 12): field-modern class 7, vllm-project/vllm#43435
    _, doc = check_json("vllm024-over-cu12")
    (mixed,) = [f for f in doc["findings"] if f["id"] == "extension.cuda-major-mismatch"]
    assert mixed["severity"] == "error" and mixed["title"].startswith("vllm 0.24.0 was built for CUDA 13, torch 2.4.0 for CUDA 12")
    assert any("libcudart.so.13" in e for e in mixed["evidence"]) and any("libcudart.so.12" in e for e in mixed["evidence"])
    # one CUDA major everywhere: no finding (the seed's cu12 set, today's cu13 set)
    for healthy in ("working", "modern"):
        _, doc = check_json(healthy)
        assert not [f for f in doc["findings"] if f["id"] == "extension.cuda-major-mismatch"], healthy
