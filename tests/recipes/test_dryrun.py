"""The dry run of the trainer: verl's own main_ppo on CPU, up to RayPPOTrainer.init_workers.

Real envs synced from each shipped lockfile pass it (the locks' install proof); real failures
(a batch size verl's own _validate_config rejects, an env where verl does not import) fail the step
they happen in, with verl's exception and the cause the signature table names; Ctrl-C leaves no
process behind. The rule tests replay a recorded run (tests/data/dryrun/, recorded with
`recipes run gsm8k-2xA100 --dry-run --json` on the working env)."""

from __future__ import annotations

import copy
import glob
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, REPO, envs, recipe_variant, run_doctor
from processes import cmdline, descendants, left_alive
from doctor import knowledge
from doctor.recipes.dryrun import steps_known
from doctor.report.recipes_text import render_dry_run as render_text
from doctor.rules.dryrun import evaluate_dry_run

RECORDED = json.loads((DATA / "dryrun" / "working-gsm8k-2xA100.json").read_text())
GSM8K_TRAIN_ROWS = 7473  # the shipped GSM8K train split (doctor/recipes/data/gsm8k/SOURCE.md)
ALWAYS = [k["id"] for k in steps_known() if not k.get("optional") and k.get("trainer") in (None, "v0")]  # the V0 envs


def recipes(*args: str, env: dict | None = None, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "doctor.recipes.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **(env or {})}, timeout=timeout)


def dry_run_json(env_name: str, recipe: str) -> tuple[int, dict, str]:
    p = recipes("run", recipe, "--dry-run", "--json", "--python", str(envs.build(env_name)))
    assert p.stdout.strip(), p.stderr[-3000:]
    return p.returncode, json.loads(p.stdout), p.stderr


def _leftover_work_dirs() -> set[str]:
    return set(glob.glob("/tmp/verl-doctor-dryrun-*"))


def _private_ray_processes() -> set[int]:
    """Processes of any private Ray instance the doctor starts (its temp dir on their command line):
    the early head's are not the dry run's descendants once `ray start` has exited."""
    prefix = knowledge.load("ray")["smoke"]["temp_prefix"]
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if prefix.encode() in (d / "cmdline").read_bytes():
                    out.add(int(d.name))
            except OSError:
                pass
    return out


@pytest.mark.realenv
def test_the_working_lock_passes_the_dry_run_of_the_seed_recipe():
    before = _leftover_work_dirs()
    rc, doc, err = dry_run_json("working", "gsm8k-2xA100")
    dry = doc["dry_run"]
    assert rc == 0 and doc["status"] == "passed", [(s["name"], s["error"]) for s in dry["steps"] if s["error"]]
    steps = {s["name"]: s for s in dry["steps"]}
    assert set(ALWAYS) <= set(steps) and all(s["status"] == "ok" for s in steps.values())
    assert "reward-manager" in steps  # verl 0.4's load_reward_manager, wrapped on the driver's side
    # verl's own dataloader arithmetic (drop_last=True), not the doctor's
    loader = steps["dataloader"]["detail"]
    assert loader["train_rows"] == GSM8K_TRAIN_ROWS and loader["batch_size"] == 512
    assert loader["batches_per_epoch"] == GSM8K_TRAIN_ROWS // 512
    assert loader["rows_dropped_per_epoch"] == GSM8K_TRAIN_ROWS % 512
    assert loader["total_training_steps"] == GSM8K_TRAIN_ROWS // 512 * 15
    assert steps["batch"]["detail"]["shapes"]["input_ids"] == [512, 512]  # train_batch_size × max_prompt_length
    reward = steps["reward"]["detail"]
    assert reward["data_source"] == "openai/gsm8k" and reward["right_answer"] == 1.0 and reward["wrong_answer"] == 0.0
    assert dry["stand_in_for"] == "Qwen/Qwen2.5-0.5B-Instruct" and steps["stand-in"]["status"] == "ok"
    assert "[2] GPU(s)" in doc["next_on_gpu"] and "tensor_model_parallel_size=2" in doc["next_on_gpu"]
    assert dry["ray"]["temp_removed"] and dry["ray"]["asked"]["runtime_env"]["env_vars"]["TOKENIZERS_PARALLELISM"] == "true"
    # the private head was started beside the driver's import, and main_ppo's ray.init joined it
    assert dry["ray"]["early_head"] == {"used": True}
    assert [f["id"] for f in doc["findings"]] == ["trainer.rows-dropped"]
    assert _leftover_work_dirs() <= before  # the stand-in and the events file are gone
    assert "[dry run]" in err  # progress lines on a non-terminal stderr


@pytest.mark.realenv
def test_the_stand_in_is_built_once_per_target_and_then_read_from_the_cache(tmp_path):
    env = {"VERL_DOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    py = str(envs.build("working"))
    runs = []
    for _ in range(2):
        p = recipes("run", "gsm8k-smoke-1gpu", "--dry-run", "--json", "--python", py, env=env)
        assert p.returncode == 0, p.stderr[-2000:]
        runs.append({s["name"]: s for s in json.loads(p.stdout)["dry_run"]["steps"]}["stand-in"]["detail"])
    assert not runs[0].get("cached") and runs[1]["cached"] is True
    assert runs[0]["vocab"] == runs[1]["vocab"] and runs[0]["texts"] == runs[1]["texts"]
    assert len(list((tmp_path / "cache" / "stand-in").iterdir())) == 1  # one entry, no .part left


@pytest.mark.realenv
def test_the_verl030_lock_passes_the_dry_run_of_its_smoke_recipe():
    """verl 0.3's own path: TaskRunner without load_reward_manager, the dataset built inside
    _create_dataloader, its _default_compute_score."""
    rc, doc, _ = dry_run_json("verl030", "gsm8k-smoke-1gpu-verl030")
    dry = doc["dry_run"]
    assert rc == 0 and dry["verl"] == "0.3.0.post1", [(s["name"], s["error"]) for s in dry["steps"] if s["error"]]
    steps = {s["name"]: s for s in dry["steps"]}
    assert set(ALWAYS) <= set(steps) and "reward-manager" not in steps
    assert steps["reward"]["detail"]["function"].endswith("_default_compute_score")
    assert steps["dataloader"]["detail"]["total_training_steps"] == 20  # trainer.total_training_steps wins
    assert not doc["findings"]  # 20 steps end before an epoch does: no rows-dropped note


@pytest.mark.realenv
def test_the_041_smoke_recipe_stops_at_verl_030s_config_naming_the_key():
    rc, doc, _ = dry_run_json("verl030", "gsm8k-smoke-1gpu")
    assert rc == 1 and doc["status"] == "failed"
    # trainer.val_before_train is not a key of verl 0.3's config: Hydra stops it at the first step
    steps = {s["name"]: s for s in doc["dry_run"]["steps"]}
    assert steps["config"]["status"] == "failed" and "val_before_train" in steps["config"]["error"]["message"]
    assert {"config.unknown-key", "trainer.step-failed"} <= {f["id"] for f in doc["findings"]}
    cause = next(f for f in doc["findings"] if f["id"] == "config.unknown-key")
    assert "verl 0.3.0.post1" in cause["title"]  # the version the dry run saw, not a placeholder


@pytest.mark.realenv
def test_a_batch_size_verl_rejects_fails_its_step_with_verls_exception(tmp_path):
    f = recipe_variant(tmp_path, "gsm8k-2xA100", "three-gpus", "n_gpus_per_node=2", "n_gpus_per_node=3")
    py = str(envs.build("working"))
    p = recipes("run", str(f), "--dry-run", "--python", py)
    assert p.returncode == 1, p.stderr[-2000:]
    assert "✗" in p.stdout and "RayPPOTrainer._validate_config" in p.stdout
    assert "real_train_batch_size (512) must be divisible by minimal possible batch size (3)" in p.stdout
    assert "in verl: trainer/ppo/ray_trainer.py:" in p.stdout
    assert "not reached: the train dataloader" in p.stdout
    assert f"recipes run {f} --dry-run --python {py}" in p.stdout  # the fix's command, as printed


@pytest.mark.realenv
def test_an_env_where_verl_does_not_import_fails_at_the_entry_module_with_its_cause():
    rc, doc, _ = dry_run_json("setuptools80", "gsm8k-2xA100")
    assert rc == 1
    steps = {s["name"]: s["status"] for s in doc["dry_run"]["steps"]}
    assert steps["entry"] == "failed" and "ray" not in steps
    found = {f["id"]: f for f in doc["findings"]}
    assert found["trainer.step-failed"]["caused_by"] == "python.pkg-resources-missing"
    assert "python.pkg-resources-missing" in found


@pytest.mark.realenv
def test_ctrl_c_mid_dry_run_leaves_no_process_and_no_temp_dir(tmp_path):
    before = _leftover_work_dirs()
    ray_before = _private_ray_processes()
    proc = subprocess.Popen([sys.executable, "-m", "doctor.recipes.cli", "run", "gsm8k-smoke-1gpu", "--dry-run",
                             "--python", str(envs.build("working"))], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen: set[int] = set()
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        now = descendants(proc.pid)
        seen |= now
        if any("default_worker.py" in cmdline(p) for p in now):  # the TaskRunner's Ray worker is up
            break
        time.sleep(0.2)
    assert any("raylet" in cmdline(p) for p in seen), proc.communicate()[1][-2000:]
    time.sleep(1.0)
    seen |= descendants(proc.pid)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    left = left_alive(seen, within=15)
    assert not left, [(p, cmdline(p)[:120]) for p in left]
    assert _leftover_work_dirs() <= before
    assert not left_alive(_private_ray_processes() - ray_before, within=15)  # the early head's too


# -- the rules on a recorded run --------------------------------------------------------------------


def test_the_recorded_run_is_one_passing_check_per_step():
    findings, checks = evaluate_dry_run(RECORDED["dry_run"], "gsm8k-2xA100", "python")
    by_name = {c.check: c.status.value for c in checks}
    assert len(checks) == len(steps_known())
    assert by_name["dry run: the reward manager (load_reward_manager)"] == "ok"
    loader = "dry run: the train dataloader (verl's batch arithmetic: RayPPOTrainer._create_dataloader, PPOTrainer._init_dataloader)"
    assert by_name[loader] == "info"
    v1_only = {f"dry run: {k['title']}" for k in steps_known() if k.get("trainer") == "v1"}
    assert all(by_name[k] == "skipped" for k in v1_only)   # verl 0.4.1's trainer has no such step: said, not ✓
    assert all(v == "ok" for k, v in by_name.items() if k != loader and k not in v1_only)
    (rows,) = findings
    assert rows.id == "trainer.rows-dropped" and rows.title.startswith(f"{GSM8K_TRAIN_ROWS % 512} of {GSM8K_TRAIN_ROWS}")


def test_a_failed_step_marks_the_later_ones_not_reached():
    dry = copy.deepcopy(RECORDED["dry_run"])
    keep = [s for s in dry["steps"] if s["name"] in ("stand-in", "config", "entry", "ray", "task-runner", "model")]
    keep[-1].update(status="failed", error={"type": "OSError", "message": "OSError: Can't load tokenizer for '/m'",
                                            "text": "OSError: Can't load tokenizer for '/m'", "chain": []})
    dry.update(steps=keep, ok=False, reached_gpu=False)
    findings, checks = evaluate_dry_run(dry, "r", "python")
    status = {c.check.split(": ", 1)[1]: (c.status.value, c.why) for c in checks}
    assert status["the model's files and tokenizer"][0] == "error"
    assert status["verl's RLHFDataset over the recipe's parquet files"] == ("skipped", "not reached: an earlier step failed (model)")
    cause, failed = findings  # the signature table knows this exception: its cause is the headline
    assert (cause.id, failed.id, failed.caused_by) == ("runtime.model-not-found", "trainer.step-failed", "runtime.model-not-found")
    assert "Can't load tokenizer" in failed.title


def test_a_reward_that_does_not_tell_right_from_wrong_is_a_warning():
    dry = copy.deepcopy(RECORDED["dry_run"])
    reward = next(s for s in dry["steps"] if s["name"] == "reward")
    reward["detail"].update(right_answer=0.0, wrong_answer=0.0)
    reward["warning"] = "the reward function scores the right answer 0.0 and a wrong one 0.0: it does not tell them apart"
    findings, _ = evaluate_dry_run(dry, "r", "python")
    assert "trainer.reward-indistinct" in {f.id for f in findings}


def test_a_dry_run_that_could_not_run_is_skipped_not_passed():
    findings, checks = evaluate_dry_run({"ok": False, "error": "timed out after 330 s (killed)", "steps": []}, "r", "python")
    assert findings == [] and [(c.status.value, c.why) for c in checks] == [
        ("skipped", "the dry run could not run: timed out after 330 s (killed)")]


def test_the_transcript_names_every_step_and_what_comes_next_on_a_gpu():
    buf = io.StringIO()
    findings, _ = evaluate_dry_run(RECORDED["dry_run"], "gsm8k-2xA100", "python")
    render_text(RECORDED["dry_run"], findings, "gsm8k-2xA100", "python", out=buf)
    text = buf.getvalue()
    assert text.count("✓") == len(RECORDED["dry_run"]["steps"])
    assert f"{GSM8K_TRAIN_ROWS} rows ÷ 512 = {GSM8K_TRAIN_ROWS // 512} batches per epoch" in text
    assert "next, on a GPU: RayPPOTrainer.init_workers()" in text and "tiny Qwen2 stand-in" in text


def test_check_facts_judges_a_recorded_dry_run_again(tmp_path):
    doc = json.loads(run_doctor("check", "--fast", "--json").stdout)  # the doctor's own env, a real document
    doc["facts"]["dryrun"] = {**RECORDED["dry_run"], "recipe": "gsm8k-2xA100"}
    f = tmp_path / "facts.json"
    f.write_text(json.dumps(doc))
    p = run_doctor("check", "--facts", str(f), "--verbose")
    assert "Trainer (dry run on CPU)" in p.stdout and "trainer.rows-dropped" in p.stdout, p.stdout[-3000:]


def test_a_dry_run_in_an_interpreter_without_verl_says_why_and_which_target():
    """`recipes run NAME --dry-run` without --python in the doctor's own venv (no verl): the reason,
    not "could not run: None", and the first line says the target is the doctor's own interpreter
    (issue 27). Exit 3: nothing was judged."""
    p = recipes("run", "gsm8k-smoke-1gpu", "--dry-run", env={"VIRTUAL_ENV": ""})  # no venv active
    assert p.returncode == 3, p.stderr
    assert "the dry run could not run: ImportError: verl is not installed" in p.stdout, p.stdout
    assert "None" not in p.stdout and "the doctor's own interpreter" in p.stdout.splitlines()[0]
