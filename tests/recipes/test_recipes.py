"""Recipes: catalog, config lint (against the real verl installs of tests/envs.py), preflight on this GPU-less machine, and the run loop driven by a named test double
(tests/doubles/replay_trainer.py: replays a real log from tests/data/logs at speed)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import DATA, REPO, envs, recipe_variant, run_doctor
from doctor.recipes import catalog

DOUBLE = REPO / "tests" / "doubles" / "replay_trainer.py"
SEED = catalog.RECIPES_DIR / "seed-article-printed.overrides"
QWEN = json.loads((DATA / "fixtures" / "qwen2.5-0.5b-instruct" / "config.json").read_text())
RECIPES = ["gsm8k-2xA100", "gsm8k-baseline-2xA100", "gsm8k-smoke-1gpu"]


def recipes(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", "import sys; from doctor.recipes.cli import main; sys.exit(main())",
                           *args], capture_output=True, text=True, env=full, timeout=timeout, cwd=str(REPO))


# -- catalog ---------------------------------------------------------------------------------------


# sha256 of the files of eric-haibin-lin/verl-data's gsm8k/ (the project's shared copy of them).
GSM8K_SHA256 = {
    "train.parquet": "967a8ce7e9b5ed375029f23ece19bcb52c96223a09c4b4cbc4283280be76abee",
    "test.parquet": "573f36f82932cba89e7f7a427a40bdffc786eafefcbd6372c41223a3833b6d52",
}


def test_shipped_data_is_the_public_gsm8k_and_model_config():
    import hashlib

    for f, digest in GSM8K_SHA256.items():
        assert hashlib.sha256((catalog.PKG_DATA / "gsm8k" / f).read_bytes()).hexdigest() == digest, f
    shipped = json.loads((catalog.MODEL_CONFIGS / "Qwen--Qwen2.5-0.5B-Instruct.config.json").read_text())
    assert shipped == QWEN


@pytest.mark.parametrize("name", RECIPES)
def test_recipes_load_with_sourced_bands(name):
    r = catalog.load(name)
    assert r["stack"] == "verl041-vllm063post1" and r["model"]["architecture"] == "Qwen2ForCausalLM"
    res = catalog.resolve(r, quick=True)
    assert res["overrides"][-1] == f"trainer.total_training_steps={r['quick']['max_steps']}"
    assert not any("{" in o and "}" in o and "=" in o and o.split("=", 1)[1].startswith("{") for o in res["overrides"])
    assert Path(res["files"]["train"]).is_file() and res["env"]["RAY_TMPDIR"]
    assert len(res["env"]["RAY_TMPDIR"]) < 40  # Ray's socket paths must stay under 107 bytes
    for b in r["bands"] + r["quick"]["bands"]:
        assert b["source"] and b.get("status") in ("measured", "claimed")


def test_seed_overrides_file_is_the_article_command_as_printed():
    article = (DATA / "seed" / "verl-ppo-tuning-article.zh.txt").read_text()
    cmd = article[article.index("python3 -m verl.trainer.main_ppo"):article.index("2>&1 | tee verl_tuned.log")]
    printed = [w for w in cmd.replace("\\", " ").split()[3:]]
    assert catalog.read_overrides_file(str(SEED)) == printed


def test_list_show_data_and_bad_input(tmp_path):
    p = recipes("list")
    assert p.returncode == 0 and all(n in p.stdout for n in RECIPES)
    p = recipes("show", "gsm8k-2xA100")
    assert p.returncode == 0 and "algorithm.use_kl_in_reward=True" in p.stdout
    assert "14 steps per epoch (95.9% of the rows" in p.stdout  # 7473 // 512, not the article's 99.7 %
    p = recipes("data", "gsm8k", "--out", str(tmp_path / "d"))
    assert p.returncode == 0
    assert sorted(x.name for x in (tmp_path / "d").iterdir()) == ["LICENSE", "SOURCE.md", "test.parquet", "train.parquet"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    for args in (("show", "no-such-recipe"), ("show", str(bad)), ("lint", str(bad)), ("run", "nope"),
                 ("data", "mnist", "--out", str(tmp_path)), ("lint",), ("lint", "--overrides-file", "/nonexistent")):
        p = recipes(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, (args, p.stderr)
    missing = tmp_path / "m.yaml"
    missing.write_text(yaml.safe_dump({"name": "x", "description": "d", "stack": "s"}))
    p = recipes("show", str(missing))
    assert p.returncode == 2 and "missing 'hardware'" in p.stderr


# -- lint against the real verl installs ------------------------------------------------------------


def lint_json(env_name: str, *args: str) -> tuple[int, dict]:
    p = recipes("lint", *args, "--python", str(envs.build(env_name)), "--json")
    assert p.stdout.strip(), p.stderr
    return p.returncode, json.loads(p.stdout)


@pytest.mark.realenv
def test_seed_command_fails_on_verl_020post1_with_exactly_two_unknown_keys():
    rc, doc = lint_json("verl020post1", "--overrides-file", str(SEED))
    assert rc == 1 and doc["verl"] == "0.2.0.post1"
    unknown = [f for f in doc["findings"] if f["id"] == "config.unknown-key"]
    assert sorted(e["evidence"][0].split(": ", 1)[1] for e in unknown) == \
        ["algorithm.kl_ctrl.target_kl=0.05", "trainer.val_before_train=False"]
    assert all("Could not override" in f["evidence"][1] for f in unknown)
    assert any("+trainer.val_before_train=False" in f["fix"]["summary"] for f in unknown)
    assert "config.ignored-key" in {f["id"] for f in doc["findings"]}  # max_num_seqs: no reader in 0.2 either


@pytest.mark.realenv
def test_write_fixed_makes_the_seed_command_compose_on_verl_020post1(tmp_path):
    """--write-fixed: a NEW file with the two rejected keys appended with '+', which the installed
    verl 0.2.0.post1's Hydra then composes (a second real compose); the input is not touched."""
    seed = tmp_path / "seed.overrides"
    seed.write_bytes(SEED.read_bytes())
    out = tmp_path / "fixed.overrides"
    rc, doc = lint_json("verl020post1", "--overrides-file", str(seed), "--write-fixed", str(out))
    assert rc == 0, doc["after"]["findings"]
    assert sorted((c["override"], c["replacement"]) for c in doc["changes"]) == [
        ("algorithm.kl_ctrl.target_kl=0.05", "+algorithm.kl_ctrl.target_kl=0.05"),
        ("trainer.val_before_train=False", "+trainer.val_before_train=False")]
    assert len(doc["before"]["rejected"]) == 2 and doc["after"]["rejected"] == [] and doc["after"]["composed"]
    lines = [ln for ln in out.read_text().splitlines() if ln and not ln.startswith("#")]
    assert len(lines) == len(doc["before"]["overrides"]) and "+trainer.val_before_train=False" in lines
    assert seed.read_bytes() == SEED.read_bytes()
    # an existing file is never overwritten: one line, exit 2, before any compose
    p = recipes("lint", "--overrides-file", str(seed), "--python", sys.executable, "--write-fixed", str(seed))
    assert p.returncode == 2 and "it exists" in p.stderr and "Traceback" not in p.stderr
    assert seed.read_bytes() == SEED.read_bytes()


@pytest.mark.realenv
def test_seed_command_composes_on_verl_041_but_its_kl_settings_are_inert():
    rc, doc = lint_json("working", "--overrides-file", str(SEED))
    ids = {f["id"] for f in doc["findings"]}
    assert rc == 0 and doc["verl"] == "0.4.1" and doc["composed"] and not doc["rejected"]
    assert {"config.target-kl-inert", "config.kl-inert", "config.ignored-key"} <= ids
    assert "config.unknown-key" not in ids


@pytest.mark.realenv
@pytest.mark.parametrize("name", RECIPES)
def test_shipped_recipes_lint_clean_on_verl_041(name):
    rc, doc = lint_json("working", name)
    assert rc == 0 and doc["findings"] == [], [f["id"] for f in doc["findings"]]


@pytest.mark.realenv
def test_doctor_check_recipe_joins_config_findings(tmp_path):
    f = recipe_variant(tmp_path, "gsm8k-smoke-1gpu", "tp4", "tensor_model_parallel_size=1", "tensor_model_parallel_size=4")
    p = run_doctor("check", "--fast", "--json", "--python", str(envs.build("working")), "--recipe", str(f))
    doc = json.loads(p.stdout)
    ids = {x["id"] for x in doc["findings"]}
    assert {"config.tp-heads", "config.tp-gpus"} <= ids and "gpu.none" in ids and p.returncode == 1
    checks = {c["check"]: c for c in doc["checks"]}
    assert checks["enough GPUs for the recipe"]["status"] == "skipped"  # no GPU here: gpu.none says it once
    steps = [c for c in doc["checks"] if c["area"] == "trainer"]  # each step of the dry run is a rule's check
    assert steps and all(c["status"] == "skipped" and c["why"] == "skipped by --fast" for c in steps)
    # the bug report replays: the same findings and exit code from the JSON alone
    (tmp_path / "check.json").write_text(p.stdout)
    again = run_doctor("check", "--json", "--facts", str(tmp_path / "check.json"))
    assert again.returncode == p.returncode
    assert sorted(x["id"] for x in json.loads(again.stdout)["findings"]) == sorted(x["id"] for x in doc["findings"])
    assert run_doctor("check", "--fast", "--recipe", "no-such-recipe").returncode == 2


# -- preflight on this GPU-less machine -------------------------------------------------------------


@pytest.mark.realenv
def test_preflight_and_quick_run_fail_cleanly_naming_the_gpu_requirement(tmp_path):
    py = str(envs.build("working"))
    p = recipes("run", "gsm8k-2xA100", "--preflight-only", "--preflight-fast", "--python", py)
    assert p.returncode == 1, p.stderr  # a problem found (issue 27: it was 3, "did not complete")
    assert "[preflight]" in p.stderr and "the tokenizer and the data" in p.stderr  # each step as it starts
    assert "! model: Qwen/Qwen2.5-0.5B-Instruct is not on this machine: the run downloads it" in p.stdout  # not a ✓
    assert ("✗ GPUs: recipe gsm8k-2xA100 needs 2 GPU(s) (trainer.n_gpus_per_node=2 × trainer.nnodes=1) with ≥ 40 GiB "
            "each; this machine has no usable NVIDIA GPU") in p.stdout
    assert "gpu.none" not in p.stdout  # the GPU problem is reported once, on the GPUs line
    assert "doctor fix" not in p.stdout
    assert "✓ data:train" in p.stdout and "✓ config: verl 0.4.1" in p.stdout and "Traceback" not in p.stderr
    p = recipes("run", "gsm8k-smoke-1gpu", "--quick", "--preflight-fast", "--python", py, "--out", str(tmp_path / "r"), "--json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["status"] == "preflight-failed" and "needs 1 GPU(s)" in doc["reason"]
    assert not (tmp_path / "r").exists() and doc["out"] is None  # nothing started, no folder claimed


TINY_QWEN2 = r"""
import sys
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
out = sys.argv[1]
cfg = Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=1, max_position_embeddings=128)
Qwen2ForCausalLM(cfg).save_pretrained(out, safe_serialization=True)
vocab = {"<unk>": 0, "<|endoftext|>": 1, **{chr(97 + i): 2 + i for i in range(26)}}
tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                              unk_token="<unk>", eos_token="<|endoftext|>", pad_token="<|endoftext|>")
tok.save_pretrained(out)
"""


@pytest.mark.realenv
def test_preflight_on_a_tiny_local_qwen2_model(tmp_path):
    """A real (tiny, random) Qwen2 checkpoint that the working env's transformers writes: the
    preflight finds it through VERL_DOCTOR_MODEL_PATH, reads its architecture, checks the
    safetensors file against its header and loads its tokenizer in the target. Then a truncated
    copy (an interrupted download) and one without tokenizer files fail, each naming why."""
    py = str(envs.build("working"))
    model = tmp_path / "tiny-qwen2"
    subprocess.run([py, "-c", TINY_QWEN2, str(model)], check=True, capture_output=True, timeout=300)

    def preflight(path):
        p = recipes("run", "gsm8k-smoke-1gpu", "--preflight-only", "--preflight-fast", "--python", py,
                    env={"VERL_DOCTOR_MODEL_PATH": str(path)})
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]  # no GPU here: a problem found
        return p.stdout

    out = preflight(model)
    assert f"✓ model: {model} (Qwen2ForCausalLM)" in out
    assert f"✓ weights: {model}: model.safetensors" in out
    assert "✓ tokenizer: PreTrainedTokenizerFast (28 tokens)" in out

    cut = tmp_path / "truncated"
    shutil.copytree(model, cut)
    w = cut / "model.safetensors"
    w.write_bytes(w.read_bytes()[:-100])
    assert "✗ weights: " in (out := preflight(cut)) and "truncated download?" in out

    notok = tmp_path / "no-tokenizer"
    shutil.copytree(model, notok)
    for f in notok.glob("*token*"):
        f.unlink()
    out = preflight(notok)
    assert "✗ tokenizer: does not load from" in out and "✓ weights:" in out


# -- the run loop, with the replaying test double ---------------------------------------------------


def double_env(**extra) -> dict:
    return {"VERL_DOCTOR_TRAINER_CMD": f"{{python}} {DOUBLE}",
            "REPLAY_STEP_DELAY": "0.01", **extra}


def test_run_quick_passes_with_live_progress_and_summary(tmp_path):
    out = tmp_path / "run"
    p = recipes("run", "gsm8k-smoke-1gpu", "--quick", "--skip-preflight", "--python", sys.executable, "--out", str(out),
                env=double_env())
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    assert "[recipes] step 2 (3/3)" in p.stderr and "reward 0.004" in p.stderr
    assert "verdict: PASS" in p.stdout
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "passed" and s["steps"] == 3 and all(b["passed"] for b in s["bands"])
    assert s["command"][-1] == "trainer.total_training_steps=3"
    assert (out / "console.log").read_text().count("step:") == 3


def test_run_band_missed_exits_1(tmp_path):
    r = yaml.safe_load((catalog.RECIPES_DIR / "gsm8k-smoke-1gpu.yaml").read_text())
    r["quick"]["bands"].append({"metric": "critic/score/mean", "agg": "last", "comparison": ">=", "value": 0.5,
                                "source": "test", "status": "measured"})
    f = tmp_path / "r.yaml"
    f.write_text(yaml.safe_dump(r))
    p = recipes("run", str(f), "--quick", "--skip-preflight", "--python", sys.executable, "--out", str(tmp_path / "o"),
                env=double_env())
    assert p.returncode == 1 and "verdict: BAND MISSED" in p.stdout
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["status"] == "band-missed" and not s["bands"][-1]["passed"] and s["bands"][-1]["value"] == 0.004


def test_run_failure_exits_3_and_shows_the_error(tmp_path):
    p = recipes("run", "gsm8k-smoke-1gpu", "--skip-preflight", "--python", sys.executable, "--out", str(tmp_path / "o"),
                env=double_env(REPLAY_FAIL_AT="2"))
    assert p.returncode == 3 and "verdict: RUN FAILED" in p.stdout
    assert "CUDA out of memory" in p.stderr and "runtime.cuda-oom" in p.stderr  # doctor triage of console.log
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["status"] == "run-failed" and s["trainer_exit_code"] == 1 and s["steps"] == 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_ctrl_c_kills_only_the_trainers_process_group(tmp_path):
    pidfile = tmp_path / "pids"
    env = dict(os.environ, **double_env(REPLAY_STEP_DELAY="0.3", REPLAY_HANG="1", REPLAY_PIDFILE=str(pidfile)))
    bystander = subprocess.Popen(["sleep", "60"])  # another job of this user: must survive
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from doctor.recipes.cli import main; sys.exit(main())",
                             "run", "gsm8k-smoke-1gpu", "--skip-preflight", "--python", sys.executable,
                             "--out", str(tmp_path / "o")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO))
    try:
        seen = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            seen.append(line)
            if "[recipes] step 2 " in line:  # parsed live, while the trainer still runs
                break
        assert any("[recipes] step 2 " in s for s in seen), seen
        trainer_pid, child_pid = map(int, pidfile.read_text().split())
        assert _alive(trainer_pid) and _alive(child_pid)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        deadline = time.monotonic() + 5
        while (_alive(trainer_pid) or _alive(child_pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(trainer_pid) and not _alive(child_pid)
        assert bystander.poll() is None
        s = json.loads((tmp_path / "o" / "summary.json").read_text())
        assert s["status"] == "interrupted" and s["steps"] >= 3 and "SIGINT" in s["reason"]
        assert "verdict: INTERRUPTED" in out
    finally:
        bystander.kill()
        if proc.poll() is None:
            proc.kill()


def test_the_gpu_preflight_counts_what_the_job_asks_against_what_it_sees():
    """gsm8k-2xA100 on a 1-GPU machine (the H200's recorded NVML facts, a named test double):
    the preflight stops with the GPU count, taken from the composed config, before anything starts."""
    from doctor.recipes import preflight as run

    h200 = json.loads((DATA / "h200-gpu-facts.json").read_text())["idle"]
    recipe = catalog.load("gsm8k-2xA100")
    config = {"trainer": {"n_gpus_per_node": 2, "nnodes": 1}}
    c = run._gpu_check(h200, recipe["hardware"], recipe["name"], config, environ={})
    assert not c.ok and "needs 2 GPU(s) (trainer.n_gpus_per_node=2 × trainer.nnodes=1)" in c.line and "found 1" in c.line
    c = run._gpu_check(h200, {"gpus": 1, "min_memory_gib": 20}, "one", {"trainer": {"n_gpus_per_node": 1, "nnodes": 1}},
                       environ={"CUDA_VISIBLE_DEVICES": "1"})
    assert not c.ok and "CUDA_VISIBLE_DEVICES='1' leaves the job 0" in c.line
    c = run._gpu_check(h200, {"gpus": 1, "min_memory_gib": 20}, "one", {"trainer": {"n_gpus_per_node": 1, "nnodes": 1}},
                       environ={})
    assert c.ok, c.line
