"""Bad input: one clear line on stderr, exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import stat

import pytest

from conftest import REPO, run_doctor


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
