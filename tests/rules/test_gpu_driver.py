"""The driver against what the job loads: the libcuda a CUDA process picks (a container's
forward-compatibility copy is CUDA error 803), and the CUDA of torch and each NVIDIA wheel.

tests/data/gpu/h200-libcuda.json is a named test double: recorded on a lent H200 by
benchmarks/record_libcuda_on_gpu.py — the gpu probe's facts under two library paths, each beside
what CUDA really did there in a fresh process (cuInit 803 with the image's compat copy first, 0
with the host driver's). The probe's loader walk is tested here on real files laid out the same way."""

from __future__ import annotations

import copy
import json
import os

from conftest import DATA
from doctor.probes.gpu import libcuda_facts
from doctor.rules import Context, evaluate

RECORDED = json.loads((DATA / "gpu" / "h200-libcuda.json").read_text())
WORKING = json.loads((DATA / "facts-working.json").read_text())


def judged(gpu: dict, **dists) -> dict:
    facts = copy.deepcopy(WORKING)
    facts["gpu"] = {**copy.deepcopy(gpu), "torch": WORKING["gpu"]["torch"]}
    for name, version in dists.items():
        facts["distributions"][name]["version"] = version
    findings, checks = evaluate(facts, Context(python="python"))
    return {"findings": {f.id: f for f in findings if f.area == "gpu"}, "checks": {c.check: c for c in checks}}


def test_the_recording_is_what_cuda_did():
    assert RECORDED["compat-first"]["observed"]["cuInit"] == 803
    assert "Error 803" in RECORDED["compat-first"]["observed"]["torch_warning"]
    assert RECORDED["host-driver-first"]["observed"]["cuInit"] == 0
    assert RECORDED["host-driver-first"]["observed"]["torch_available"] is True


def test_the_compat_copy_first_is_803_and_the_fix_is_the_path_cuda_worked_with():
    got = judged(RECORDED["compat-first"]["facts"])["findings"]
    f = got["gpu.libcuda-compat-older"]
    assert "580.95.05" in f.title and "580.159.04" in f.title and f.severity == "error"
    # the printed fix is the library path under which cuInit returned 0 on the same machine
    assert f.fix.commands == ["export LD_LIBRARY_PATH=" + RECORDED["host-driver-first"]["facts"]["libcuda"]["ld_library_path"]]


def test_the_host_drivers_libcuda_first_passes_the_check():
    got = judged(RECORDED["host-driver-first"]["facts"])
    assert not [i for i in got["findings"] if i.startswith("gpu.libcuda")]
    assert got["checks"]["a CUDA process loads the kernel driver's own libcuda"].status.value == "ok"


def test_without_a_kernel_module_the_check_is_skipped_not_passed():
    gpu = {"available": False, "reason": "NVML: NVML Shared Library Not Found",
           "libcuda": libcuda_facts(proc_version="/nonexistent", environ={}, default_dirs=())}
    c = judged(gpu)["checks"]["a CUDA process loads the kernel driver's own libcuda"]
    assert c.status.value == "skipped" and "no NVIDIA kernel module" in c.why


def _lib(d, version):
    d.mkdir(parents=True, exist_ok=True)
    (d / f"libcuda.so.{version}").write_bytes(b"\x7fELF")
    os.symlink(f"libcuda.so.{version}", d / "libcuda.so.1")


def test_the_probe_walks_ld_library_path_like_the_loader_on_real_files(tmp_path):
    rec = RECORDED["compat-first"]["facts"]["libcuda"]
    compat, host = tmp_path / "cuda-13.0" / "compat", tmp_path / "nvidia" / "lib64"
    _lib(compat, "580.95.05")
    _lib(host, "580.159.04")
    proc = tmp_path / "version"
    proc.write_text(rec["kernel_module_line"] + "\nGCC version:  gcc version 15.3.0 (GCC)\n")
    got = libcuda_facts(proc_version=str(proc), environ={"LD_LIBRARY_PATH": f"{compat}:{host}"}, default_dirs=(str(host),))
    assert got["kernel_module"] == rec["kernel_module"] == "580.159.04"
    assert [(c["version"], c["compat"], c["found_by"]) for c in got["candidates"]] == \
        [(c["version"], c["compat"], c["found_by"]) for c in rec["candidates"]]  # the host copy once, deduplicated
    assert got["selected"]["real"] == str(compat / "libcuda.so.580.95.05")
    host_first = libcuda_facts(proc_version=str(proc), environ={"LD_LIBRARY_PATH": str(host)}, default_dirs=(str(compat),))
    assert host_first["selected"]["version"] == "580.159.04"


def test_a_userspace_driver_newer_than_the_kernel_module_is_a_mismatch(tmp_path):
    """A driver upgraded without a reboot: the files as an upgrade leaves them (real files here)."""
    lib = tmp_path / "lib"
    _lib(lib, "580.159.04")
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build\n")
    gpu = {**RECORDED["host-driver-first"]["facts"],
           "libcuda": libcuda_facts(proc_version=str(proc), environ={}, default_dirs=(str(lib),))}
    f = judged(gpu)["findings"]["gpu.libcuda-userspace-mismatch"]
    assert "575.57.08" in f.title and "reboot" in f.fix.summary.lower()


def test_the_driver_against_the_cuda_of_torch_and_each_nvidia_wheel():
    h200 = RECORDED["host-driver-first"]["facts"]  # driver 580.159.04: CUDA 13.0
    assert not [i for i in judged(h200)["findings"] if i.startswith("gpu.driver")]
    # NVML's number for a CUDA 12.4 driver (550.x) beside the locked wheels: nvjitlink 12.9 runs by
    # minor-version compatibility (info), torch's 12.1 is fine
    older = {**h200, "driver_version": "550.54.15", "cuda_driver_version": 12040}
    got = judged(older)["findings"]
    assert set(i for i in got if i.startswith("gpu.driver")) == {"gpu.driver-older-minor"}
    assert got["gpu.driver-older-minor"].severity == "info" and "nvidia-nvjitlink-cu12" in got["gpu.driver-older-minor"].title
    assert "575.51.03" in got["gpu.driver-older-minor"].fix.summary  # CUDA 12.9's minimum driver
    # a CUDA 11 driver cannot run CUDA 12 libraries at all
    cuda11 = {**h200, "driver_version": "470.256.02", "cuda_driver_version": 11040}
    f = judged(cuda11)["findings"]["gpu.driver-too-old"]
    assert f.severity == "error" and "CUDA 11.4" in f.title and "CUDA 12.9" in f.title
