"""`doctor triage`: each real failure excerpt of tests/data/logs/failures names its cause with the
matching line as evidence; the successful runs of tests/data/logs are never blamed, although they print
warnings and even a caught traceback."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import DATA, run_doctor

FAILURES = DATA / "logs" / "failures"
EXPECTED = {
    "ray-36742_import_ray_without_setuptools.log": ("python.setuptools-missing", 14, "ray/_private/parameter.py"),
    "tinyzero-7_ray_failed_to_register_worker_raylet.log": ("runtime.ray-worker-register-failed", 2,
                                                            "Failed to register worker to Raylet"),
    "verl-245_vllm_0.6.3.post1_not_supported.log": ("stack.verl-rejects-vllm", 1, "vllm version 0.6.3.post1"),
    "verl-pr259-issue189_vllm_max_num_batched_tokens_smaller_than_max_model_len.log": (
        "config.batched-tokens-lt-model-len", 1, "max_num_batched_tokens (8192)"),
    "vllm-9377_flash_attn_undefined_symbol_then_arch_not_supported.log": ("flash-attn.abi-mismatch", 1,
                                                                          "flash_attn_2_cuda"),
}


def triage(path, *extra) -> tuple[int, dict]:
    proc = run_doctor("triage", str(path), "--json", *extra, timeout=60)
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_every_failure_excerpt_is_covered():
    assert sorted(p.name for p in FAILURES.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_failure_excerpts_name_their_cause_with_the_line(name):
    fid, line, text = EXPECTED[name]
    rc, doc = triage(FAILURES / name)
    assert rc == 1 and doc["schema_version"] == 1 and doc["failed"] is True
    assert doc["log"] == str(FAILURES / name)
    first = doc["findings"][0]
    assert first["id"] == fid and first["severity"] == "error"
    assert any(e.startswith(f"line {line}: ") and text in e for e in first["evidence"]), first["evidence"]
    assert first["fix"]["summary"] and first["sources"]


@pytest.mark.parametrize("name", ["gemma-2-2b-it-gsm8k-ppo.log", "qwen2.5-0.5b-gsm8k-ppo-prompt512-resp256.log",
                                  "qwen2vl-2b-geo3k-grpo-1step.log"])
def test_successful_runs_are_not_blamed(name):
    rc, doc = triage(DATA / "logs" / name)
    assert rc == 0 and doc["failed"] is False and doc["findings"] == []
    assert doc["status"] in ("completed", "no-failure-evidence")
    proc = run_doctor("triage", str(DATA / "logs" / name))
    assert proc.returncode == 0 and "✓" in proc.stdout


def _crashed_copy(tmp_path, tail: str, src="gemma-2-2b-it-gsm8k-ppo.log"):
    log = tmp_path / "crashed.log"
    shutil.copy(DATA / "logs" / src, log)
    with open(log, "a") as fh:
        fh.write("\n" + tail)
    return log


OOM = """\x1b[36m(main_task pid=64899)\x1b[0m Traceback (most recent call last):
\x1b[36m(main_task pid=64899)\x1b[0m   File "/usr/local/lib/python3.9/dist-packages/verl/trainer/main_ppo.py", line 120, in main_task
\x1b[36m(main_task pid=64899)\x1b[0m     trainer.fit()
\x1b[36m(main_task pid=64899)\x1b[0m torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.2 GiB is free.
"""
APP = """Traceback (most recent call last):
  File "/usr/local/lib/python3.9/dist-packages/verl/trainer/main_ppo.py", line 50, in __call__
    score = compute_score(data_source=data_source, solution_str=sequences_str, ground_truth=ground_truth)
  File "/home/me/rewards/my_reward.py", line 12, in compute_score
    return float(ground_truth["answer"])
KeyError: 'answer'
"""
NCCL = """[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
node1:2345:2390 [1] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
node1:2345:2390 [1] include/shm.h:28 NCCL WARN Error: failed to extend /dev/shm/nccl-03v824 to 4194660 bytes
"""


@pytest.mark.parametrize("tail,fid,others", [(OOM, "runtime.cuda-oom", set()),
                                              (APP, "runtime.app-error", set()),
                                              (NCCL, "system.shm-small", {"runtime.nccl-error"})],
                         ids=["oom", "user-code", "nccl-shm"])
def test_a_crash_after_the_last_step_is_blamed(tmp_path, tail, fid, others):
    rc, doc = triage(_crashed_copy(tmp_path, tail))
    assert rc == 1 and doc["failed"] and doc["last_step"] == 105
    ids = [f["id"] for f in doc["findings"]]
    assert ids[0] == fid and set(ids[1:]) == others
    lines = [int(e.split(":")[0].split()[-1]) for e in doc["findings"][0]["evidence"] if e.startswith("line ")]
    assert lines and min(lines) > doc["last_step_line"]


def test_warnings_and_caught_tracebacks_before_the_last_step_are_not_causes(tmp_path):
    # the qwen2.5 log has a caught TypeError traceback at line 115 and finishes; cut its last line
    # (Final validation metrics) and it still shows no failure after its last step
    src = (DATA / "logs" / "qwen2.5-0.5b-gsm8k-ppo-prompt512-resp256.log").read_bytes()
    log = tmp_path / "cut.log"
    log.write_bytes(src[: src.rindex(b"\n", 0, src.rindex(b"Final validation metrics"))])
    rc, doc = triage(log)
    assert rc == 0 and doc["status"] == "no-failure-evidence" and doc["findings"] == []


def test_unknown_failure_is_reported_but_not_as_a_cause(tmp_path):
    rc, doc = triage(_crashed_copy(tmp_path, "Traceback (most recent call last):\n  File \"/usr/lib/python3.11/"
                                             "site-packages/foo/bar.py\", line 3, in f\nFooError: something odd\n"))
    # a failed run is a problem (exit 1) even when its cause is not recognised
    assert rc == 1 and doc["failed"] is True
    assert [f["id"] for f in doc["findings"]] == ["runtime.unrecognized-failure"]


def test_a_text_without_log_structure_is_read_and_blames_nothing():
    """Whatever people paste is read (issue 25: short pastes were refused with exit 2 and no JSON);
    a README has no failure in it: nothing blamed, exit 0, and the report says what to give instead."""
    from conftest import REPO, run_doctor

    proc = run_doctor("triage", str(REPO / "README.md"))
    assert proc.returncode == 0 and "give its console output" in proc.stdout, proc.stderr
    rc, doc = triage(REPO / "README.md")
    assert rc == 0 and doc["failed"] is False and doc["findings"] == [] and doc["log_like"] is False


def test_fix_commands_name_the_interpreter_given(tmp_path):
    from conftest import DATA

    import sys

    rc, doc = triage(DATA / "logs" / "failures" / "verl-245_vllm_0.6.3.post1_not_supported.log", "--python", sys.executable)
    cmds = [c for f in doc["findings"] for c in f["fix"]["commands"]]
    assert cmds and all("--python python " not in c for c in cmds)
    assert any(sys.executable in c for c in cmds), cmds



def test_the_wheel_a_fix_names_is_for_the_python_given(tmp_path):
    """A log from a Python 3.10 machine, triaged for a 3.11 env with --python: the flash-attn wheel
    is the cp311 one (issue 28: it was cp310, which pip refuses on 3.11); without --python the
    log's own Python decides."""
    import sys

    log = tmp_path / "fa.log"
    log.write_text('Traceback (most recent call last):\n'
                   '  File "/opt/conda/lib/python3.10/site-packages/verl/models/transformers/qwen2.py", line 3, in <module>\n'
                   '    from flash_attn import flash_attn_func\n'
                   "ModuleNotFoundError: No module named 'flash_attn'\n")
    mine = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    _, doc = triage(log, "--python", sys.executable)
    cmds = " ".join(c for f in doc["findings"] for c in f["fix"]["commands"])
    assert f"{mine}-{mine}" in cmds, cmds
    _, doc = triage(log)
    assert "cp310-cp310" in " ".join(c for f in doc["findings"] for c in f["fix"]["commands"])

def test_stdin_and_bad_input(tmp_path):
    proc = run_doctor("triage", "-", "--json", input=(FAILURES / "verl-245_vllm_0.6.3.post1_not_supported.log").read_text())
    assert proc.returncode == 1 and json.loads(proc.stdout)["findings"][0]["id"] == "stack.verl-rejects-vllm"
    empty = tmp_path / "empty.log"
    empty.write_text("")
    binary = tmp_path / "bin.log"
    binary.write_bytes(bytes(range(256)) * 40)
    for bad in (empty, binary, tmp_path / "missing.log"):
        proc = run_doctor("triage", str(bad))
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout, proc.stderr


@pytest.mark.parametrize("line, step", [
    ("[rank0]:step:3 - actor/pg_loss:0.1 - critic/score/mean:0.5", 3),
    ("\x1b[36m(TaskRunner pid=12)\x1b[0m step:7 - timing_s/gen:1.5", 7),
    ("(main_task pid=1) step:0 - val/test_score/openai/gsm8k:0.2", 0),
    ("global_step:3 - actor/pg_loss:0.1", None),
    ("Training step:3 of 10", None),
])
def test_one_step_grammar_for_triage_report_and_run(line, step, tmp_path):
    """triage, `recipes report` and `recipes run` read step lines with one function."""
    from doctor import logparse
    from doctor.recipes import launch as run
    from doctor.triage import triage_text

    got = logparse.parse_step(line)
    assert (got[0] if got else None) == step
    assert run.parse_step is logparse.parse_step
    t = triage_text(line + "\nTraceback (most recent call last):\nValueError: x\n", "x.log")
    assert t.last_step == step
