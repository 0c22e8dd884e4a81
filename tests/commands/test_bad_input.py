"""Bad input: one clear line on stderr, exit 2, never a traceback."""

from __future__ import annotations

import json
import os

import pytest

from conftest import DATA, REPO, run_doctor


def one_line_exit_2(proc):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("doctor: "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    return lines[0]


def test_missing_interpreter():
    assert "no such file" in one_line_exit_2(run_doctor("check", "--python", "/nonexistent/bin/python"))


def test_directory_as_interpreter(tmp_path):
    assert "is a directory" in one_line_exit_2(run_doctor("check", "--python", str(tmp_path)))


def test_non_python_binary():
    assert "cannot inspect it as a Python interpreter" in one_line_exit_2(run_doctor("check", "--python", "/bin/ls"))


def test_not_executable(tmp_path):
    f = tmp_path / "python"
    f.write_text("#!/bin/sh\n")
    assert "not executable" in one_line_exit_2(run_doctor("check", "--python", str(f)))


def test_script_that_is_not_python(tmp_path):
    f = tmp_path / "python"
    f.write_text("#!/bin/sh\necho hello\n")
    f.chmod(0o755)
    one_line_exit_2(run_doctor("check", "--fast", "--python", str(f)))


def test_corrupt_cache_file(tmp_path):
    cache = tmp_path / "cache"
    env = {"VERL_DOCTOR_CACHE_DIR": str(cache)}
    # first run fills the cache for this interpreter; then corrupt every entry
    first = run_doctor("check", "--json", env=env)
    assert first.returncode in (0, 1, 3), first.stderr
    entries = list((cache / "probes").glob("*.json"))
    assert entries
    for e in entries:
        e.write_text("{not json")
    assert "unreadable" in one_line_exit_2(run_doctor("check", env=env))
    assert run_doctor("check", "--no-cache", "--json", env=env).returncode in (0, 1, 3)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_cache_file(tmp_path):
    cache = tmp_path / "cache"
    env = {"VERL_DOCTOR_CACHE_DIR": str(cache)}
    run_doctor("check", "--json", env=env)
    for e in (cache / "probes").glob("*.json"):
        e.chmod(0)
    one_line_exit_2(run_doctor("check", env=env))


def test_unknown_finding_id():
    assert "unknown finding ID" in one_line_exit_2(run_doctor("explain", "nope.nothing"))
    assert "unknown finding ID" in one_line_exit_2(run_doctor("explain", "version.not-a-stack-dist"))


def test_unknown_subcommand_and_option():
    one_line_exit_2(run_doctor("frobnicate"))
    one_line_exit_2(run_doctor("check", "--no-such-option"))


def test_lockfile_missing_and_garbage(tmp_path):
    assert "no such file" in one_line_exit_2(run_doctor("check", "--fast", "--lock", str(tmp_path / "x.txt")))
    bad = tmp_path / "bad.txt"
    bad.write_text("this is === not a lock\n")
    assert "does not parse" in one_line_exit_2(run_doctor("check", "--fast", "--lock", str(bad)))
    unpinned = tmp_path / "unpinned.txt"
    unpinned.write_text("numpy>=1\n")
    assert "not pinned" in one_line_exit_2(run_doctor("check", "--fast", "--lock", str(unpinned)))
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00\x01garbage")
    one_line_exit_2(run_doctor("check", "--fast", "--lock", str(binary)))


def test_unknown_stack():
    assert "unknown stack" in one_line_exit_2(run_doctor("check", "--fast", "--stack", "nope"))
    assert "unknown stack" in one_line_exit_2(run_doctor("lock", "--stack", "nope"))


def test_lock_python_not_in_stack(tmp_path):
    assert "supports Python" in one_line_exit_2(run_doctor("lock", "--python", "3.9", "--out", str(tmp_path)))
    assert not list(tmp_path.iterdir())  # nothing written


def _venv(tmp_path, name="t"):
    import subprocess
    import sys

    import envs

    d = tmp_path / name
    subprocess.run([envs.uv(), "venv", "-q", "--python", sys.executable, str(d)], check=True)
    return d, next((d / "lib").glob("python*/site-packages"))


def test_target_with_broken_metadata_is_reported_not_crashed(tmp_path):
    venv, site = _venv(tmp_path)
    (site / "foo-1.0.dist-info").mkdir()
    (site / "foo-1.0.dist-info" / "METADATA").write_text("")
    (site / "baz-1.0.dist-info").mkdir()
    (site / "baz-1.0.dist-info" / "METADATA").write_bytes(b"\xff\xfe\x00garbage")
    for v in ("1.0", "2.0"):
        (site / f"bar-{v}.dist-info").mkdir()
        (site / f"bar-{v}.dist-info" / "METADATA").write_text(f"Metadata-Version: 2.1\nName: bar\nVersion: {v}\n")
    proc = run_doctor("check", "--fast", "--json", "--python", str(venv / "bin" / "python"))
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    f = next(f for f in doc["findings"] if f["id"] == "python.broken-metadata")
    text = " ".join(f["evidence"])
    assert "foo-1.0.dist-info: METADATA has no Name or Version" in text
    assert "baz-1.0.dist-info: UnicodeDecodeError" in text and "second copy of bar" in text
    # an env without triton/verl does not need setuptools
    assert "python.setuptools-missing" not in {f["id"] for f in doc["findings"]}


# --- every command: one line, exit 2, nothing written outside the output dir, nothing lost ----------

def run_recipes(*args, env=None):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "doctor.recipes.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300, cwd=str(REPO))


def _one_line(proc, prog):
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


SFT_LOG = "epoch 1 step 10 - train/loss:1.234 - train/lr:1e-5\nepoch 1 step 20 - train/loss:1.100 - train/lr:1e-5\n"


@pytest.fixture
def files(tmp_path):
    f = {}
    f["empty"] = tmp_path / "empty.log"
    f["empty"].write_text("")
    f["binary"] = tmp_path / "binary.log"
    f["binary"].write_bytes(bytes(range(256)) * 40)
    f["sft"] = tmp_path / "sft.log"
    f["sft"].write_text(SFT_LOG)
    f["bad_yaml"] = tmp_path / "bad.yaml"
    f["bad_yaml"].write_text("name: [unclosed\n  overrides: {\n")
    f["not_recipe"] = tmp_path / "list.yaml"
    f["not_recipe"].write_text("- just\n- a list\n")
    f["wrong_hash_lock"] = tmp_path / "wrong-hash.txt"
    f["wrong_hash_lock"].write_text("six==1.16.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    f["a_file"] = tmp_path / "a-file"
    f["a_file"].write_text("I am a file, not a directory\n")
    f["bad_override"] = tmp_path / "bad.overrides"
    f["bad_override"].write_text("data.train_batch_size=8\ntrainer.logger=[console\n")
    f["users_dir"] = tmp_path / "o-mine"
    f["users_dir"].mkdir()
    (f["users_dir"] / "notes.txt").write_text("mine\n")
    return f


PPO_LOG = str(DATA / "logs") + "/qwen2vl-2b-geo3k-grpo-1step.log"

CASES = [
    # (id, program, argv builder, expected words in the line)
    ("recipes-unknown", "recipes", lambda f, t: ["show", "no-such-recipe"], "no-such-recipe"),
    ("recipes-run-unknown", "recipes", lambda f, t: ["run", "no-such-recipe"], "no-such-recipe"),
    ("recipes-malformed-yaml", "recipes", lambda f, t: ["show", str(f["bad_yaml"])], ""),
    ("recipes-yaml-not-a-recipe", "recipes", lambda f, t: ["show", str(f["not_recipe"])], ""),
    ("recipes-lint-missing-overrides", "recipes", lambda f, t: ["lint", "--overrides-file", str(t / "nope.txt")], ""),
    ("report-empty-log", "recipes", lambda f, t: ["report", str(f["empty"]), "--out", str(t / "o1")], ""),
    ("report-binary-log", "recipes", lambda f, t: ["report", str(f["binary"]), "--out", str(t / "o2")], ""),
    ("report-sft-log", "recipes", lambda f, t: ["report", str(f["sft"]), "--out", str(t / "o3")], "PPO"),
    ("report-missing-log", "recipes", lambda f, t: ["report", str(t / "missing.log"), "--out", str(t / "o4")], ""),
    ("report-out-is-a-file", "recipes", lambda f, t: ["report", PPO_LOG, "--out", str(f["a_file"])], ""),
    ("data-unknown-dataset", "recipes", lambda f, t: ["data", "mnist", "--out", str(t / "d")], "mnist"),
    ("data-out-is-a-file", "recipes", lambda f, t: ["data", "gsm8k", "--out", str(f["a_file"])], ""),
    ("triage-missing", "doctor", lambda f, t: ["triage", str(t / "missing.log")], ""),
    ("triage-binary", "doctor", lambda f, t: ["triage", str(f["binary"])], ""),
    ("triage-empty", "doctor", lambda f, t: ["triage", str(f["empty"])], ""),
    ("fix-unknown-only-id", "doctor", lambda f, t: ["fix", "--yes", "--only", "no.such-id"], "no.such-id"),
    ("fix-no-tty-no-yes", "doctor", lambda f, t: ["fix"], ""),
    ("fix-missing-lock", "doctor", lambda f, t: ["fix", "--yes", "--lock", str(t / "nope.txt")], ""),
    ("rollback-unknown-snapshot", "doctor", lambda f, t: ["rollback", "--yes", "no-such-snapshot"], ""),
    ("lock-out-is-a-file", "doctor", lambda f, t: ["lock", "--python", "3.11", "--out", str(f["a_file"])], ""),
    ("check-skip-unknown-probe", "doctor", lambda f, t: ["check", "--skip-probe", "nope"], "nope"),
    ("check-html-over-a-users-file", "doctor", lambda f, t: ["check", "--fast", "--html", str(f["a_file"])],
     "not a verl-doctor report"),
    ("check-html-missing-folder", "doctor", lambda f, t: ["check", "--fast", "--html", str(t / "nope" / "r.html")],
     "does not exist"),
    ("lint-write-fixed-over-a-users-file", "recipes",
     lambda f, t: ["lint", "gsm8k-2xA100", "--write-fixed", str(f["a_file"])], "it exists"),
    ("container-no-engine", "doctor", lambda f, t: ["container", "build", "--no-flash-attn"], ""),
    ("container-verify-no-engine", "doctor", lambda f, t: ["container", "verify", "some/tag:1"], ""),
    ("container-unhashed-lock", "doctor", lambda f, t: ["container", "build", "--lock", str(f["sft"])], ""),
    # --- the target interpreter, for every command that takes one
    ("check-python-directory", "doctor", lambda f, t: ["check", "--python", str(t)], "is a directory"),
    ("check-python-not-executable", "doctor", lambda f, t: ["check", "--python", str(f["a_file"])], "not executable"),
    ("check-python-missing", "doctor", lambda f, t: ["check", "--python", str(t / "nope")], "no such file"),
    ("check-python-not-a-python", "doctor", lambda f, t: ["check", "--python", "/bin/true"], "Python interpreter"),
    ("fix-python-missing", "doctor", lambda f, t: ["fix", "--yes", "--python", str(t / "nope")], "no such file"),
    ("rollback-python-missing", "doctor", lambda f, t: ["rollback", "--yes", "--python", str(t / "nope")], "no such file"),
    ("triage-python-missing", "doctor", lambda f, t: ["triage", PPO_LOG, "--python", str(t / "nope")], "no such file"),
    ("lint-python-missing", "recipes", lambda f, t: ["lint", "gsm8k-2xA100", "--python", str(t / "nope")], "no such file"),
    ("run-python-missing", "recipes", lambda f, t: ["run", "gsm8k-smoke-1gpu", "--python", str(t / "nope")],
     "no such file"),
    # --- check's other inputs
    ("check-lock-missing", "doctor", lambda f, t: ["check", "--fast", "--lock", str(t / "nope.txt")], "no such file"),
    ("check-lock-binary", "doctor", lambda f, t: ["check", "--fast", "--lock", str(f["binary"])], "lockfile"),
    ("check-unknown-stack", "doctor", lambda f, t: ["check", "--fast", "--stack", "nope"], "unknown stack"),
    ("check-unknown-recipe", "doctor", lambda f, t: ["check", "--fast", "--recipe", "nope"], "nope"),
    ("check-unknown-option", "doctor", lambda f, t: ["check", "--frobnicate"], "--frobnicate"),
    ("unknown-subcommand", "doctor", lambda f, t: ["frobnicate"], "frobnicate"),
    ("explain-unknown-id", "doctor", lambda f, t: ["explain", "no.such-id"], "no.such-id"),
    # --- lock, fix, container
    ("lock-unknown-stack", "doctor", lambda f, t: ["lock", "--stack", "nope", "--out", str(t / "o5")], "unknown stack"),
    ("lock-python-not-in-stack", "doctor", lambda f, t: ["lock", "--python", "2.7", "--out", str(t / "o6")], "2.7"),
    ("fix-unknown-stack", "doctor", lambda f, t: ["fix", "--yes", "--stack", "nope"], "unknown stack"),
    ("fix-json-without-yes", "doctor", lambda f, t: ["fix", "--json"], "--yes"),
    ("fix-lock-and-stack", "doctor", lambda f, t: ["fix", "--yes", "--lock", "a", "--stack", "b"], "not allowed"),
    ("container-unknown-stack", "doctor", lambda f, t: ["container", "build", "--stack", "nope"], "unknown stack"),
    ("container-lock-and-stack", "doctor", lambda f, t: ["container", "build", "--stack", "a", "--lock", "b"],
     "not allowed"),
    ("container-no-subcommand", "doctor", lambda f, t: ["container"], ""),
    # --- triage
    ("triage-directory", "doctor", lambda f, t: ["triage", str(t)], ""),
    ("triage-binary", "doctor", lambda f, t: ["triage", str(f["binary"])], "binary"),  # text is read, whatever it is
    # --- recipes
    ("lint-binary-overrides", "recipes", lambda f, t: ["lint", "--overrides-file", str(f["binary"])], "binary"),
    ("lint-malformed-override-line", "recipes", lambda f, t: ["lint", "--overrides-file", str(f["bad_override"])],
     "line 2"),
    ("lint-unknown-recipe", "recipes", lambda f, t: ["lint", "nope"], "nope"),
    ("show-missing-recipe-file", "recipes", lambda f, t: ["show", str(t / "nope.yaml")], "no such recipe file"),
    ("report-directory-as-log", "recipes", lambda f, t: ["report", str(t), "--out", str(t / "o7")], ""),
    ("report-out-holds-a-users-files", "recipes", lambda f, t: ["report", PPO_LOG, "--out", str(f["users_dir"])],
     "not an earlier report"),
    ("data-without-out", "recipes", lambda f, t: ["data", "gsm8k"], "--out"),
    ("recipes-unknown-subcommand", "recipes", lambda f, t: ["frobnicate"], "frobnicate"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_everywhere(case, files, tmp_path):
    name, prog, argv, words = case
    outside_before = set(os.listdir(tmp_path))
    a_file_before = files["a_file"].read_bytes()
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    args = argv(files, tmp_path)
    proc = run_recipes(*args, env=env) if prog == "recipes" else run_doctor(*args, env=env, input="")
    line = _one_line(proc, prog)
    assert words in line
    # nothing the user had is lost, nothing new appears except what the command was told to write
    assert files["a_file"].read_bytes() == a_file_before
    new = set(os.listdir(tmp_path)) - outside_before
    assert not {n for n in new if not n.startswith(("o", "d"))}, new


def test_full_disk_gives_one_line_and_keeps_nothing_half_written(tmp_path):
    """A 64 KiB tmpfs as the report's output dir: the report does not fit."""
    import subprocess

    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        big = str(DATA / "logs" / "qwen2.5-0.5b-gsm8k-ppo-prompt512-resp256.log")
        proc = run_recipes("report", big, "--out", str(mnt / "out"))
        _one_line(proc, "recipes")
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_fix_with_a_lockfile_of_wrong_hashes_changes_nothing(tmp_path, files):
    """Documented code 1: the sync fails on the hash, the snapshot is restored, the env is as before."""
    import subprocess

    import envs

    venv, _ = _venv(tmp_path, "wh")
    py = str(venv / "bin" / "python")
    before = subprocess.run([envs.uv(), "pip", "freeze", "--python", py], capture_output=True, text=True).stdout
    proc = run_doctor("fix", "--yes", "--lock", str(files["wrong_hash_lock"]), "--python", py,
                      env={"VERL_DOCTOR_STATE_DIR": str(tmp_path / "state")})
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Hash mismatch" in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    after = subprocess.run([envs.uv(), "pip", "freeze", "--python", py], capture_output=True, text=True).stdout
    assert after == before


def test_a_python_too_old_for_the_probes_is_one_line(tmp_path):
    """Python 2.7 (tests/doubles/python27, a named test double: no such interpreter here)."""
    proc = run_doctor("check", "--python", str(REPO / "tests" / "doubles" / "python27"), "--no-cache")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "is Python 2.7: the doctor's probes (and verl) need Python 3.8 or newer" in lines[0]
    assert "SyntaxError" not in proc.stderr
