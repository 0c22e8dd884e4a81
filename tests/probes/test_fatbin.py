"""doctor/probes/scripts/fatbin.py: the GPU archs a library carries code for, read from its fatbin.

Two real sources: the tiny nvcc 13.0 libraries of tests/data/fatbin/ (README there: how they were
made), and the real CUDA libraries of the `working` env (torch 2.4.0+cu121, vllm 0.6.3.post1,
xformers 0.0.27.post2), whose expected values are what cuobjdump 12.4 (triton 3.0's copy in that
env) lists for them — and, where cuobjdump is fast, what it lists now."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

import envs

SCRIPT = REPO / "doctor" / "probes" / "scripts" / "fatbin.py"
DATA = REPO / "tests" / "data" / "fatbin"
sys.path.insert(0, str(SCRIPT.parent))
import fatbin  # noqa: E402


def test_tiny_sm80_cubin_and_compute90_ptx():
    # nvcc -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=compute_90
    assert fatbin.archs(DATA / "libtiny-sm80-ptx90.so") == {
        "sm": [80], "ptx": [90], "variants": [], "entries": 3, "relocatable": None, "error": None}


def test_tiny_arch_and_family_specific_variants():
    # nvcc -gencode ...code=sm_90a -gencode ...code=sm_100f -gencode ...code=compute_100a
    assert fatbin.archs(DATA / "libtiny-sm90a-sm100f-ptx100a.so") == {
        "sm": [90, 100], "ptx": [100], "variants": ["sm_90a", "compute_100a", "sm_100f"], "entries": 5,
        "relocatable": None, "error": None}


def test_entries_of_the_tiny_library():
    es = list(fatbin.entries(DATA / "libtiny-sm80-ptx90.so"))
    assert [(e["section"], e["kind"], e["arch"]) for e in es] == [
        (".nv_fatbin", 2, 80), (".nv_fatbin", 2, 80), (".nv_fatbin", 1, 90)]
    assert es[2]["flags"] & 0x8000  # nvcc 13 compresses the PTX (ZSTD); its arch is read anyway
    with open(DATA / "libtiny-sm80-ptx90.so", "rb") as f:
        f.seek(es[0]["offset"] + es[0]["header_size"])
        assert f.read(4) == b"\x7fELF"  # an uncompressed cubin follows its entry header


def test_a_cpu_only_elf_has_no_archs_and_no_error():
    lib = Path(os.path.realpath(sys.executable))
    assert fatbin.archs(lib) == {"sm": [], "ptx": [], "variants": [], "entries": 0, "relocatable": None, "error": None}


def test_not_elf_and_missing_files_are_errors(tmp_path):
    text = tmp_path / "x.so"
    text.write_text("INPUT(-lfoo)\n")  # a linker script named .so, as some distros ship
    assert fatbin.archs(text)["error"] == "FatbinError: not an ELF file"
    assert fatbin.archs(tmp_path / "missing.so")["error"].startswith("FileNotFoundError")


def test_a_fatbin_claiming_more_than_its_section_is_an_error(tmp_path):
    lib = tmp_path / "bad.so"
    shutil.copy(DATA / "libtiny-sm80-ptx90.so", lib)
    with open(lib, "rb") as f:
        off, size = fatbin._sections(f)[".nv_fatbin"]
    with open(lib, "r+b") as f:
        f.seek(off)
        assert struct.unpack("<I", f.read(4))[0] == fatbin.FATBIN_MAGIC
        f.seek(off + 8)
        f.write(struct.pack("<Q", size * 2))  # fatSize past the section end
    res = fatbin.archs(lib)
    assert res["sm"] == [] and "past the section end" in res["error"]


def test_a_truncated_library_is_an_error(tmp_path):
    lib = tmp_path / "cut.so"
    lib.write_bytes((DATA / "libtiny-sm80-ptx90.so").read_bytes()[:4096])  # section table cut off
    assert "truncated" in fatbin.archs(lib)["error"]


def test_the_script_prints_json_per_path_and_is_python38_syntax():
    proc = subprocess.run([sys.executable, str(SCRIPT), str(DATA / "libtiny-sm80-ptx90.so")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {str(DATA / "libtiny-sm80-ptx90.so"): fatbin.archs(DATA / "libtiny-sm80-ptx90.so")}
    ast.parse(SCRIPT.read_text(), feature_version=(3, 8))


# ------------------------------------------------------------------ the real libraries of `working`

# What cuobjdump 12.4 --list-elf / --list-ptx says (2026-12-01), and the number of entries it lists.
EXPECTED = {
    "torch/lib/libtorch_cuda.so": ([50, 60, 70, 75, 80, 86, 90], [], [], 2359),
    "torch/lib/libtorch_cuda_linalg.so": ([50, 60, 70, 80, 86, 90], [], [], 642),
    "torch/lib/libtorch_cpu.so": ([], [], [], 0),
    "vllm/_C.abi3.so": ([52, 70, 75, 80, 86, 89, 90], [52], ["sm_90a"], 174),
    "vllm/_moe_C.abi3.so": ([70, 75, 80, 86, 89, 90], [], [], 22),
    "vllm/vllm_flash_attn/vllm_flash_attn_c.abi3.so": ([80, 90], [], [], 128),
    "xformers/_C.so": ([60, 70, 75, 80], [60, 80], [], 126),
}


@pytest.fixture(scope="module")
def working_site() -> tuple[Path, Path]:
    py = envs.build("working")
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return py, Path(purelib)


def _in_target(py: Path, paths: list[Path]) -> dict:
    proc = subprocess.run([str(py), str(SCRIPT), *map(str, paths)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.realenv
def test_real_torch_vllm_xformers_libraries(working_site):
    py, site = working_site
    got = _in_target(py, [site / rel for rel in EXPECTED])
    for rel, (sm, ptx, variants, n) in EXPECTED.items():
        res = got[str(site / rel)]
        assert (res["sm"], res["ptx"], res["variants"], res["entries"], res["error"]) == (sm, ptx, variants, n, None), rel
    # The stack's GPUs: A100 (8.0) and H100/H200 (9.0) cubins in torch and in vllm's kernels.
    for rel in ("torch/lib/libtorch_cuda.so", "vllm/_C.abi3.so"):
        assert {80, 90} <= set(got[str(site / rel)]["sm"])


@pytest.mark.realenv
def test_relocatable_fatbin_is_reported_apart(working_site):
    # libnccl's __nv_relfatbin: 784 relocatable entries that cuobjdump lists only with --all-fatbin.
    py, site = working_site
    res = _in_target(py, [site / "nvidia/nccl/lib/libnccl.so.2"])[str(site / "nvidia/nccl/lib/libnccl.so.2")]
    assert (res["sm"], res["ptx"], res["entries"]) == ([50, 60, 61, 70, 80, 90], [], 6)
    assert res["relocatable"] == {"sm": [50, 60, 61, 70, 80, 90], "ptx": [90], "variants": [], "entries": 784}


@pytest.mark.realenv
def test_agrees_with_cuobjdump_where_it_is_fast(working_site):
    _, site = working_site
    tool = site / "triton" / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        pytest.skip("no cuobjdump in the env (triton's copy)")
    for rel in ("vllm/_C.abi3.so", "vllm/_moe_C.abi3.so", "xformers/_C.so", "torch/lib/libcusparseLt-f80c68d1.so.0"):
        lib = site / rel
        listed = {}
        for kind, ext in (("elf", "cubin"), ("ptx", "ptx")):
            out = subprocess.run([str(tool), f"--list-{kind}", str(lib)], capture_output=True, text=True, timeout=120).stdout
            listed[kind] = [m for m in (re.search(rf"\.sm_(\d+)([a-z]?)\.{ext}$", ln) for ln in out.splitlines()) if m]
        res = fatbin.archs(lib)
        assert res["sm"] == sorted({int(m.group(1)) for m in listed["elf"]}), rel
        assert res["ptx"] == sorted({int(m.group(1)) for m in listed["ptx"]}), rel
        assert res["entries"] == len(listed["elf"]) + len(listed["ptx"]), rel
        # CUDA 12 builds: cuobjdump names arch-specific cubins sm_90a, as the entry flag says
        assert [n for n in res["variants"] if n.startswith("sm_")] == sorted(
            {f"sm_{m.group(1)}{m.group(2)}" for m in listed["elf"] if m.group(2)}), rel


@pytest.mark.realenv
def test_scanning_every_library_of_torch_vllm_xformers_is_fast(working_site):
    # 18 files, 2.1 GB (libtorch_cuda.so alone 902 MB): only section tables and entry headers are read.
    _, site = working_site
    libs = sorted(p for d in ("torch", "vllm", "xformers") for p in (site / d).rglob("*.so*") if p.is_file())
    t = time.perf_counter()
    res = fatbin.scan(libs)
    took = time.perf_counter() - t
    assert len(res) == len(libs) >= 15 and not [p for p, r in res.items() if r["error"]]
    assert took < 10, f"{took:.2f} s for {len(libs)} libraries"


def test_needed_reads_the_sonames_a_library_links():
    # the tiny nvcc 13.0 library links the CUDA 13 runtime: that major is what the
    # extension.cuda-major-mismatch rule compares with torch's libtorch_cuda.so
    assert fatbin.needed(DATA / "libtiny-sm80-ptx90.so") == ["libcudart.so.13", "libstdc++.so.6", "libgcc_s.so.1", "libc.so.6"]
    assert "libc.so.6" in fatbin.needed("/bin/ls")  # any dynamically linked executable of this machine
