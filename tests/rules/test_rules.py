"""Rules on recorded facts: pure functions, no subprocesses. The facts are real recordings
(tests/data/facts-working.json from the `working` env; tests/data/h200-gpu-facts.json from NVML on a
lent H200, idle and with a process holding 4.5 GiB; tests/data/h200-py312-facts.json, a whole check of
that machine's own Python 3.12 env) — test doubles only for what this machine lacks."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from doctor.rules import Context, evaluate

from conftest import DATA  # noqa: E402
WORKING = json.loads((DATA / "facts-working.json").read_text())
H200 = json.loads((DATA / "h200-gpu-facts.json").read_text())
# A whole `doctor check` of the lent H200's own Python 3.12 env (torch 2.11, no verl/vllm/ray):
# recorded there 2026-11-30 (docs/recorded/h200-check-py312.*), replayed here as a test double.
H200_PY312 = json.loads((DATA / "h200-py312-facts.json").read_text())


def run(facts, **ctx):
    findings, checks = evaluate(facts, Context(python="/env/bin/python", **ctx))
    return {f.id: f for f in findings}, checks


def with_gpu(facts, gpu):
    f = copy.deepcopy(facts)
    f["gpu"] = dict(copy.deepcopy(gpu), torch=f["gpu"]["torch"])
    return f


def set_version(facts, dist, version):
    f = copy.deepcopy(facts)
    f["distributions"][dist]["version"] = version
    return f


def test_working_facts_have_no_errors_but_gpu_none():
    found, _ = run(WORKING)
    assert {i for i, f in found.items() if f.severity == "error"} == {"gpu.none"}
    assert found["flash-attn.missing"].severity == "warning"  # no GPU in the recording


def test_real_h200_reading_clears_gpu_findings_and_makes_flash_attn_an_error():
    found, _ = run(with_gpu(WORKING, H200["idle"]))
    # the one GPU finding is true: xformers 0.0.27.post2 has no sm_90 cubin, only PTX the driver JITs
    assert [i for i in found if i.startswith("gpu.")] == ["gpu.kernels-jit"]
    assert any(e.startswith("xformers/_C.so") and "sm_90" in e for e in found["gpu.kernels-jit"].evidence)
    assert found["flash-attn.missing"].severity == "error"


def test_memory_held_uses_processes_not_memory_used():
    idle = copy.deepcopy(H200["idle"])
    assert idle["gpus"][0]["memory_used"] > 600_000_000  # driver-reserved memory, no process
    assert "gpu.memory-held" not in run(with_gpu(WORKING, idle))[0]
    found, _ = run(with_gpu(WORKING, H200["busy"]))
    assert "pid 459 (python3) holds 4.5 GiB" in found["gpu.memory-held"].evidence[0]


def test_a_driver_of_the_same_cuda_major_runs_torch_by_minor_version_compatibility():
    gpu = copy.deepcopy(H200["idle"])
    gpu["cuda_driver_version"] = 12000  # CUDA 12.0 driver, torch 2.4.0 is cu121: it runs (CUDA minor-version compatibility)
    found, _ = run(with_gpu(WORKING, gpu))
    assert "gpu.driver-too-old" not in found
    f = found["gpu.driver-older-minor"]
    assert f.severity == "info" and "CUDA 12.0" in f.evidence[0] and "torch 2.4.0 (torch.version.cuda): CUDA 12.1" in f.evidence


def test_bf16_needs_compute_capability_8():
    gpu = copy.deepcopy(H200["idle"])
    gpu["gpus"][0].update(name="Tesla V100-SXM2-32GB", compute_capability=[7, 0])
    found, _ = run(with_gpu(WORKING, gpu))
    assert found["gpu.bf16-unsupported"].title.startswith("GPU 0 (Tesla V100")


@pytest.mark.parametrize("dist,version,fid,severity", [
    ("transformers", "5.0.0", "version.transformers", "error"),
    ("numpy", "2.1.2", "version.numpy", "warning"),   # declared by vLLM; imports and the registry work with 2.2.6
    ("torch", "2.5.1", "version.torch", "error"),
    ("tensordict", "0.6.2", "version.tensordict", "error"),
    ("protobuf", "3.19.5", "version.protobuf", "warning"),
    ("setuptools", "80.9.0", "version.setuptools", "warning"),
    ("xformers", "0.0.28.post1", "version.xformers", "error"),
    ("ray", "2.60.0", "version.ray", "warning"),
    ("pyarrow", "26.0.1", "version.pyarrow", "error"),
])
def test_version_rules_come_from_stack_data(dist, version, fid, severity):
    found, _ = run(set_version(WORKING, dist, version))
    assert found[fid].severity == severity
    assert f"{dist}=={version} installed" in found[fid].evidence[0]
    assert found[fid].sources and found[fid].fix.commands


@pytest.mark.parametrize("verl,vllm,rejected", [
    ("0.2.0.post1", "0.6.3.post1", True),
    ("0.2.0.post2", "0.6.3", False),
    ("0.3.0.post1", "0.6.3.post1", True),
    ("0.3.0.post1", "0.6.3", False),
    ("0.4.1", "0.6.3.post1", False),
    ("0.4.0", "0.6.3.post1", False),
    ("0.5.0", "0.6.3.post1", True),
    ("0.1", "0.6.3.post1", True),
])
def test_verl_vllm_acceptance_table(verl, vllm, rejected):
    facts = set_version(set_version(WORKING, "verl", verl), "vllm", vllm)
    found, _ = run(facts)
    assert ("stack.verl-rejects-vllm" in found) is rejected


def test_pip_conflict_reports_violated_requirement():
    facts = set_version(WORKING, "huggingface-hub", "1.33.0")
    found, _ = run(facts)
    assert any("transformers 4.47.1 requires huggingface-hub<1.0,>=0.24.0, but 1.33.0 is installed" in e
               for e in found["pip.conflict"].evidence)
    # its fix installs what is violated, within the lock as constraints: never a sync, which would
    # replace the user's own checkout and remove their other packages (issue 26)
    (command,) = found["pip.conflict"].fix.commands
    assert "pip sync" not in command and "'huggingface-hub<1.0,>=0.24.0'" in command and "--constraint " in command


def test_lockfile_fixes_name_the_lockfile_shipped_in_the_package():
    # The fix must run after `pip install verl-doctor` too, not only inside a checkout: the path
    # is the one doctor.paths finds (the checkout's lockfiles/, or the wheel's copy: test_packaging).
    found, _ = run(set_version(WORKING, "huggingface-hub", "1.33.0"))
    for fid in ("pip.conflict", "stack.detected"):
        command = found[fid].fix.commands[0]
        path = Path(command.split()[-1] if fid == "stack.detected" else command.split("--constraint ", 1)[1].split()[0])
        assert path.is_absolute() and path.is_file(), command
        assert path.name == "verl041-vllm063post1-py3.11.txt"
        assert ("--require-hashes" in command) is (fid == "stack.detected")


def test_a_missing_stack_dist_is_one_finding_and_its_checks_are_skipped():
    facts = copy.deepcopy(WORKING)
    del facts["distributions"]["vllm"]
    gone = {"ok": False, "type": "ModuleNotFoundError", "message": "ModuleNotFoundError: No module named 'vllm'",
            "missing_module": "vllm", "chain": []}
    for m in ("vllm", "verl.third_party.vllm"):
        facts["imports"]["modules"][m] = dict(gone)
    found, checks = run(facts)
    f = found["stack.dists-missing"]
    assert f.severity == "error" and f.evidence[0].startswith("not installed: vllm (stack verl041-vllm063post1")
    (folded,) = [e for e in f.evidence if e.startswith("imports that fail only because of it: ")]
    assert set(folded.split(": ", 1)[1].split(", ")) == {"vllm", "verl.third_party.vllm"}
    assert not any("none of verl, vllm, torch" in e for e in f.evidence)  # verl and torch are there
    assert "import.failed" not in found
    status = {c.check: (c.status, c.why) for c in checks}
    assert status["vllm._C loads"] == ("skipped", "vllm is not installed")
    assert status["verl accepts the installed vLLM"] == ("skipped", "vllm is not installed")
    assert status["the stack's modules import"][0] == "error"
    # the working facts: nothing missing (flash-attn has its own finding: flash-attn.missing)
    assert "stack.dists-missing" not in run(WORKING)[0]


def test_unknown_import_failure_is_import_failed_with_the_dist_at_fault():
    facts = copy.deepcopy(WORKING)
    facts["imports"]["modules"]["pyarrow"] = {
        "ok": False, "type": "ImportError", "message": "ImportError: pyarrow requires NumPy 2.0 or newer, found 1.26.4",
        "chain": ["/env/lib/python3.11/site-packages/pyarrow/__init__.py:65"], "chain_dists": ["pyarrow"],
        "failing_dist": "pyarrow"}
    found, _ = run(facts)
    # pyarrow's own precise message names the cause (a signature), not the generic import.failed
    f = found["pyarrow.incompatible"]
    assert f.severity == "error" and "pyarrow requires NumPy 2.0 or newer, found 1.26.4" in f.title
    assert "uv pip install" in f.fix.commands[0] and '"pyarrow>=19,<21"' in f.fix.commands[0]
    # never an unbounded reinstall: the stack's shipped lockfile constrains the resolution
    lock = f.fix.commands[0].split("--constraint ", 1)[1].split()[0]
    assert lock.endswith("verl041-vllm063post1-py3.11.txt") and Path(lock).is_file()


def test_shm_small_formula():
    facts = copy.deepcopy(WORKING)
    facts["system"]["shm"]["free_bytes"] = 64 * 2**20  # Docker's default --shm-size
    facts["system"]["memory"]["available_bytes"] = 64 * 2**30
    found, _ = run(facts)
    f = found["system.shm-small"]
    assert "64.0 MiB" in f.title and "--shm-size=21.12gb" in f.fix.commands[0]


def test_lock_drift_names_missing_extra_and_different():
    lock = {name: {"version": d["version"], "hashes": []} for name, d in WORKING["distributions"].items()}
    lock["transformers"]["version"] = "4.46.3"
    lock["made-up-dist"] = {"version": "1.0", "hashes": []}
    del lock["wandb"]
    found, _ = run(WORKING, lock=lock, lockfile="x.txt")
    ev = found["lock.drift"].evidence
    assert "different: transformers 4.47.1 installed, 4.46.3 locked" in ev
    assert "missing: made-up-dist==1.0" in ev
    assert any(e.startswith("extra: wandb==") for e in ev)


def test_skipped_probes_mark_checks_skipped_not_ok():
    facts = copy.deepcopy(WORKING)
    for k in ("imports", "registry", "extensions"):
        facts[k] = None
    # As the engine passes it: the imports probe's skip covers the extensions it provides.
    _, checks = run(facts, skipped={"imports": "--fast", "registry": "--fast", "extensions": "--fast"})
    skipped = {c.check: c.why for c in checks if c.status == "skipped"}
    assert skipped["vLLM can inspect Qwen2ForCausalLM"] == "skipped by --fast"
    assert skipped["the stack's modules import"] == "skipped by --fast"
    assert skipped["the target matches the lockfile"] == "no --lock given"
    assert "versions within the stack's known-good ranges" not in skipped


def test_h200_py312_replay_unverified_python_and_partial_stack():
    # no verl there: no known family (tests/rules/test_families.py), so the Python version is judged
    # against a stack only when one is named; --stack verl041-vllm063post1 names it
    from doctor.knowledge import get_stack

    found, checks = run(H200_PY312, stack=get_stack("verl041-vllm063post1"))
    f = found["python.version-unverified"]
    assert f.severity == "warning" and "Python 3.12" in f.title and "(3.10, 3.11)" in f.title
    command = f.fix.commands[0]
    from doctor.uv import runnable  # printed as it runs in a new shell (uv from the doctor's venv)

    assert command.startswith(runnable("uv venv -p 3.11 train") + " && " + runnable("uv pip sync"))
    assert command.endswith("-py3.11.txt")
    assert Path(command.split()[-1]).is_file()  # never a lockfile for a Python the stack has none for
    for fid in ("stack.dists-missing", "stack.detected", "pip.conflict"):
        if fid in found:
            assert "-py3.11.txt" in found[fid].fix.commands[0], fid
    assert found["stack.dists-missing"].title.endswith("not installed: verl, vllm, ray, tensordict, xformers, datasets")
    status = {c.check: c.status for c in checks}
    assert status["an NVIDIA GPU is usable"] == "ok" and status["GPUs support bfloat16"] == "ok"
    assert found["flash-attn.missing"].severity == "error"  # a GPU is present: verl needs it
    assert "python.version-unverified" not in run(WORKING)[0]


def failing_import(facts, module, dist, message, frame):
    """facts with `module` failing to import (as the imports probe records it), and the known-good
    set: the working env's own versions."""
    exc = message.split(":", 1)[0]
    facts["imports"]["modules"][module] = {"ok": False, "type": exc, "message": message, "chain": [frame],
                                           "chain_dists": [dist], "failing_dist": dist}
    return facts, {"lockfile": "/locks/x.txt", "pins": {n: d["version"] for n, d in WORKING["distributions"].items()}}


def test_a_changed_dependency_the_message_does_not_name_is_found_through_the_graph():
    """Issue 24: culprits were found by name only. datasets fails with a message that names no module
    (no `from 'x'`, no path, no missing module): the distribution that differs from the known-good set
    and that datasets needs (its declared requirements, followed through the graph) is the cause."""
    facts, ref = failing_import(set_version(WORKING, "pyarrow", "25.0.1"), "datasets", "datasets",
                                "TypeError: Expected bytes, got a 'int' object",
                                "/env/lib/python3.11/site-packages/datasets/features/features.py:634")
    found, _ = run(facts, reference=ref)
    culprit = found["stack.culprit"]
    assert culprit.title.startswith("pyarrow 25.0.1 differs from the known-good set"), culprit.title


def test_an_import_name_is_mapped_to_the_distribution_that_provides_it():
    """Issue 24: `yaml` is PyYAML, `cv2` opencv-python-headless: the error names the module, what
    changed is the distribution. The distributions probe records each one's import names (top_level)."""
    facts, ref = failing_import(set_version(WORKING, "pyyaml", "5.1"), "verl", "verl",
                                "ImportError: cannot import name 'CSafeLoader' from 'yaml'",
                                "/env/lib/python3.11/site-packages/verl/utils/config.py:3")
    facts["distributions"]["pyyaml"]["top_level"] = ["yaml"]
    pins = ref["pins"]
    found, _ = run(facts, reference=ref)
    assert found["stack.culprit"].title.startswith("pyyaml 5.1 differs from the known-good set"), found["stack.culprit"].title
    # named by its import name, not guessed from the graph: another changed dependency of verl is not blamed
    from doctor.reference import culprits

    facts["distributions"]["requests"]["version"] = "2.0.0"
    info = facts["imports"]["modules"]["verl"]
    assert culprits(facts, {"pins": pins}, info) == ["pyyaml"]
    del facts["distributions"]["pyyaml"]["top_level"]  # without the mapping: only the graph's guess, both
    assert culprits(facts, {"pins": pins}, info) == ["pyyaml", "requests"]



def test_cuda_majors_are_compared_only_where_torch_links_a_cuda_runtime():
    facts = copy.deepcopy(WORKING)
    libs = facts["kernels"]["libraries"]
    for v in libs.values():
        v["cuda_needed"] = ["libcudart.so.12"]
    _, checks = run(facts)
    status = {c.check: (c.status, c.why) for c in checks}
    assert status["compiled extensions link the CUDA major torch was built with"][0] == "ok"
    # a CPU build of torch: nothing to compare with, so the check says it did not look (no ✓)
    for v in libs.values():
        if v["dist"] == "torch":
            v["cuda_needed"] = []
    _, checks = run(facts)
    status = {c.check: (c.status, c.why) for c in checks}
    assert status["compiled extensions link the CUDA major torch was built with"][0] == "skipped"
    assert "no CUDA runtime" in status["compiled extensions link the CUDA major torch was built with"][1]
    # another major beside torch's: the error names the library and both majors
    for rel, v in libs.items():
        v["cuda_needed"] = ["libcudart.so.12"] if v["dist"] == "torch" else (["libcudart.so.13"] if v["dist"] == "vllm" else [])
    found, _ = run(facts)
    f = found["extension.cuda-major-mismatch"]
    assert f.severity == "error" and "built for CUDA 13" in f.title and "for CUDA 12" in f.title
