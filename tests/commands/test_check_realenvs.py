"""`doctor check --json` on real virtualenvs built with uv from PyPI (tests/envs.py). Each broken env
reproduces a breakage from docs/research/STACK.md; the doctor must name its cause."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import envs
from conftest import REPO, check_json, finding, ids, run_doctor

pytestmark = pytest.mark.realenv

HOST = {"gpu.none"}  # this machine has no GPU


def errors(doc):
    return ids(doc, "error") - HOST


def test_working_set_has_no_errors_but_gpu():
    rc, doc = check_json("working")
    assert errors(doc) == set()
    assert "gpu.none" in ids(doc, "error") and rc == 1
    mods = doc["facts"]["imports"]["modules"]
    for m in ("verl.trainer.main_ppo", "verl.third_party.vllm", "verl.workers.fsdp_workers", "vllm", "ray"):
        assert mods[m]["ok"], (m, mods[m])
    assert doc["facts"]["registry"]["ok"] is True
    assert doc["facts"]["registry"]["model_info"]["is_text_generation_model"] is True
    assert finding(doc, "stack.detected")["title"].startswith("stack family verl-0.4: judged against verl041-vllm063post1")
    assert doc["schema_version"] == 1 and set(doc) >= {"doctor_version", "target", "findings", "facts", "timings"}


def test_second_stack_install_proof_verl030():
    rc, doc = check_json("verl030")
    assert errors(doc) == set()
    assert doc["facts"]["imports"]["modules"]["verl.trainer.main_ppo"]["ok"]
    # verl 0.3's vllm_rollout calls torch.cuda.get_device_name() at import: a host fact, not a break
    gpu_only = finding(doc, "gpu.required-at-import")
    assert gpu_only["severity"] == "info" and "verl.workers.rollout.vllm_rollout" in gpu_only["title"]
    assert "verl030-vllm063" in finding(doc, "stack.detected")["title"]


def test_verl020post1_rejects_vllm_post1_with_the_real_error():
    _, doc = check_json("verl020post1")
    f = finding(doc, "stack.verl-rejects-vllm")
    assert f["severity"] == "error"
    assert "ValueError: vllm version 0.6.3.post1 not supported" in f["evidence"][0]
    assert "verl 0.2.0.post1 + vllm 0.6.3.post1" in " ".join(f["evidence"])
    assert "import.failed" not in ids(doc)  # explained by the specific rule


def test_transformers5_is_caught_although_every_import_works():
    _, doc = check_json("transformers5")
    assert {"version.transformers", "vllm.tokenizer-incompatible"} <= ids(doc, "error")
    assert "all_special_tokens_extended" in finding(doc, "vllm.tokenizer-incompatible")["evidence"][0]
    assert doc["facts"]["imports"]["modules"]["vllm"]["ok"]


def test_no_setuptools():
    _, doc = check_json("no-setuptools")
    assert {"python.setuptools-missing", "vllm.qwen2-not-inspectable"} <= ids(doc, "error")
    assert any("No module named 'setuptools'" in e for e in finding(doc, "python.setuptools-missing")["evidence"])
    # the registry child's stderr names the real cause
    ev = finding(doc, "vllm.qwen2-not-inspectable")["evidence"]
    # read by the failure model triage uses: the root exception and the frame that raised it
    assert any(e.startswith("root exception: ") and "No module named 'setuptools'" in e for e in ev), ev
    assert any(e.startswith("raised at ") for e in ev), ev


def test_setuptools80_breaks_pkg_resources():
    _, doc = check_json("setuptools80")
    assert "python.pkg-resources-missing" in ids(doc, "error")
    assert "version.setuptools" in ids(doc)
    assert "setuptools==84.2.1" in " ".join(finding(doc, "python.pkg-resources-missing")["evidence"])


def test_check_lock_reports_real_drift_on_a_changed_package():
    from envs import LOCK_041

    _, clean = check_json("working", "--fast", "--lock", str(LOCK_041))
    assert "lock.drift" not in ids(clean)
    # each family's lock against the env it installs: clean (issue 26), no error at all
    for env, lock in (("modern", envs.LOCK_091), ("verl030", envs.LOCK_030)):
        _, doc = check_json(env, "--fast", "--no-gpu", "--lock", str(lock))
        assert "lock.drift" not in ids(doc) and not ids(doc, "error"), (env, ids(doc, "error"))
    _, doc = check_json("transformers5", "--fast", "--lock", str(LOCK_041))
    ev = finding(doc, "lock.drift")["evidence"]
    assert "different: transformers 5.0.0 installed, 4.47.1 locked" in ev


def test_an_interpreter_without_the_stack_says_so_once(tmp_path):
    """The newcomer's most common mistake: --python names an interpreter that is not the training
    env (here a fresh uv venv). One error that says so, no import.failed per module, and the checks
    about vLLM, Ray and the kernels skipped ("… is not installed") rather than passing."""
    import envs
    import json
    import subprocess

    py = envs.python_of(tmp_path / "bare")
    subprocess.run([envs.uv(), "venv", "-q", "--python", envs.sys.executable, str(tmp_path / "bare")], check=True)
    proc = run_doctor("check", "--json", "--python", str(py), env={"VERL_DOCTOR_CACHE_DIR": str(tmp_path / "cache")})
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1
    f = finding(doc, "stack.dists-missing")
    assert f["severity"] == "error" and f["title"].startswith("11 of the stack's distributions are not installed: verl, vllm, torch")
    assert any("none of verl, vllm, torch is installed" in e and "--python PATH" in e for e in f["evidence"])
    assert any(e.startswith("imports that fail only because of it: numpy, pyarrow, torch") for e in f["evidence"])
    assert "import.failed" not in ids(doc) and "ray.import-failed" not in ids(doc)
    status = {c["check"]: (c["status"], c.get("why")) for c in doc["checks"]}
    assert status["vLLM can inspect Qwen2ForCausalLM"] == ("skipped", "vllm is not installed")
    assert status["a private Ray instance starts and runs a task"] == ("skipped", "ray is not installed")
    assert status["xformers._C loads against this torch"] == ("skipped", "xformers is not installed")
    assert status["the stack's modules import"][0] == "error"  # its failures are the finding's


def test_deep_probes_are_cached_and_invalidated_by_the_environment(tmp_path):
    from conftest import run_doctor
    import envs
    import json
    import subprocess

    py = envs.python_of(tmp_path / "tiny")
    subprocess.run([envs.uv(), "venv", "-q", "--python", envs.sys.executable, str(tmp_path / "tiny")], check=True)
    env = {"VERL_DOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    first = json.loads(run_doctor("check", "--json", "--python", str(py), env=env).stdout)
    second = json.loads(run_doctor("check", "--json", "--python", str(py), env=env).stdout)
    from doctor.probes import TARGET_PROBES

    deep = sorted(n for n, p in TARGET_PROBES.items() if p.deep)
    assert first["timings"]["cached"] == [] and second["timings"]["cached"] == sorted(deep + ["distributions"])
    subprocess.run([envs.uv(), "pip", "install", "-q", "--python", str(py), "six"], check=True, env=envs.uv_env())
    third = json.loads(run_doctor("check", "--json", "--python", str(py), env=env).stdout)
    assert third["timings"]["cached"] == []  # a new distribution is a new fingerprint
    assert "six" in third["facts"]["distributions"]
    nocache = json.loads(run_doctor("check", "--json", "--no-cache", "--python", str(py), env=env).stdout)
    assert nocache["timings"]["cached"] == []


def test_hung_probe_is_killed_and_reported(tmp_path):
    """A target whose `verl` hangs on import: the import probe is killed at its budget."""
    from conftest import run_doctor
    import envs
    import json
    import os
    import subprocess

    venv = tmp_path / "hang"
    subprocess.run([envs.uv(), "venv", "-q", "--python", envs.sys.executable, str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "verl").mkdir()
    (site / "verl" / "__init__.py").write_text("import time\ntime.sleep(600)\n")
    proc = run_doctor("check", "--json", "--no-cache", "--timeout-scale", "0.02", "--python", str(venv / "bin" / "python"))
    doc = json.loads(proc.stdout)
    f = finding(doc, "probe.could-not-run")
    assert "imports: timed out after 5 s (killed)" in f["evidence"]
    assert not doc["probes"]["imports"]["ok"]
    # the sleeping interpreter is gone: no process still imports that verl
    left = [p for p in os.listdir("/proc") if p.isdigit() and str(venv) in _cmdline(p)]
    assert left == []


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""



def test_one_cause_one_command_run_as_printed_fixes_them_all(tmp_path):
    """transformers 5: three findings, one cause. The check prints ONE command for them ("Fix
    together", the step `doctor fix` would run); pasted into a new shell (here: on a private copy of
    the env), it leaves no version finding and no new conflict (issue 28: four separate commands, the
    first of which, run alone, left a conflict)."""
    import json
    import subprocess
    import envs

    py = envs.build_copy("transformers5", tmp_path / "t5")

    def check() -> dict:
        return json.loads(run_doctor("check", "--json", "--no-gpu", "--python", str(py)).stdout)

    doc = check()
    (group,) = doc["fix_together"]
    targets = {"version.transformers", "version.tokenizers", "vllm.tokenizer-incompatible"}
    assert targets <= set(group["targets"])
    cmd = group["command"]
    assert str(py) in cmd and "SNAPSHOT_DIR" not in cmd and "{" not in cmd and "<" + "lockfile>" not in cmd
    text = run_doctor("check", "--no-gpu", "--python", str(py)).stdout
    assert text.count(cmd) == 1 and "Fix together" in text  # printed once, not once per finding
    shell = {k: v for k, v in envs.uv_env().items() if k != "VIRTUAL_ENV"}  # a new shell: no venv active or on PATH
    shell["PATH"] = ":".join(p for p in shell.get("PATH", "").split(":") if ".venv" not in p)
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=900, env=shell)
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = check()
    assert not targets & ids(after) and "pip.conflict" not in ids(after), ids(after)
    assert ids(after, "error") == set(), ids(after, "error")


def test_a_pairwise_pin_fires_only_where_its_condition_holds():
    # datasets < 2.14.6 cannot load from fsspec > 2023.9.2 (checked: load_dataset('parquet') raises
    # "Loading a dataset cached in a LocalFileSystem is not supported"); datasets 4.0 can.
    _, broken = check_json("datasets2144-fsspec2025")
    f = finding(broken, "version.fsspec")
    assert f["severity"] == "error" and "<=2023.9.2" in f["title"]
    _, healthy = check_json("datasets4-fsspec2025")
    assert errors(healthy) == set(), errors(healthy)
    assert "version.fsspec" not in ids(healthy)
    assert healthy["facts"]["imports"]["modules"]["verl.utils.dataset.rl_dataset"]["ok"]


def test_the_modern_family_lock_installs_and_is_judged_as_its_own_family():
    # issue 26: verl 0.9.1 + vLLM 0.24 + torch 2.11 + transformers 5.9 from lockfiles/verl091-vllm024-py3.11.txt
    rc, doc = check_json("modern", "--no-gpu")
    assert errors(doc) == set(), [(f["id"], f["title"]) for f in doc["findings"] if f["severity"] == "error"]
    assert rc == 0 or ids(doc, "warning"), rc
    assert finding(doc, "stack.detected")["title"].startswith("stack family verl-modern: judged against verl091-vllm024")
    mods = doc["facts"]["imports"]["modules"]
    for m in ("verl.trainer.main_ppo", "verl.third_party.vllm", "vllm", "ray", "transformers"):
        assert mods[m]["ok"], (m, mods[m].get("message"))
    assert doc["facts"]["registry"]["ok"] is True          # vLLM 0.24's registry inspects Qwen2 on CPU
    assert doc["facts"]["imports"]["checks"]["vllm_tokenizer"]["ok"] is True   # found where 0.24 keeps it
    # two wheels own 180 paths (nvidia-cutlass-dsl libs-base/-cu13): named as an overlap, not a truncation
    assert "python.half-installed" not in ids(doc)
    overlap = [f for f in doc["findings"] if f["id"] == "python.files-overlap" and "cutlass" in f["title"]]
    assert overlap and "differ in content" in overlap[0]["evidence"][0]
    assert "stack.differs" not in ids(doc)   # the env is its lock


def test_the_seed_recipe_on_the_modern_family_lints_clean_and_dry_runs_to_the_v1_trainers_first_gpu_call():
    py = str(envs.build("modern"))
    lint = run_doctor_recipes("lint", "gsm8k-2xA100", "--python", py)
    assert lint.returncode == 0 and "verl 0.9.1" in lint.stdout, lint.stdout[-2000:]
    dry = run_doctor_recipes("run", "gsm8k-2xA100", "--dry-run", "--json", "--python", py, timeout=600)
    doc = json.loads(dry.stdout)
    assert dry.returncode == 0 and doc["status"] == "passed", (dry.returncode, doc.get("status"), dry.stderr[-2000:])
    steps = {s["name"]: s for s in doc["dry_run"]["steps"]}
    # verl 0.9's own V1 path: main's validate_config, TaskRunnerV1, the transfer queue, PPOTrainer's setup
    assert set(steps) >= {"config", "entry", "validate-config", "ray", "task-runner", "transfer-queue", "model",
                          "dataset", "dataloader", "batch", "reward"}
    assert "workers" not in steps and all(s["status"] == "ok" for s in steps.values())
    assert doc["dry_run"]["entry"] == "TaskRunnerV1"
    assert steps["dataloader"]["detail"]["batches_per_epoch"] == 7473 // 512
    assert steps["reward"]["detail"]["right_answer"] == 1.0 and steps["reward"]["detail"]["wrong_answer"] == 0.0
    assert doc["next_on_gpu"].startswith("PPOTrainer._init_resource_pool_mgr()")
    # this machine's cores are fewer than the V1 trainer's one-CPU actors: said, not hidden
    ids = [f["id"] for f in doc["findings"]]
    assert ("trainer.ray-cpus-short" in ids) == ((os.cpu_count() or 1) < 10)


def run_doctor_recipes(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "doctor.recipes.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(REPO))
