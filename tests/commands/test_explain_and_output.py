"""explain, secrets, JSON purity, exit codes."""

from __future__ import annotations

import json

import pytest

from conftest import run_doctor
from doctor import knowledge


@pytest.mark.parametrize("fid", [d["id"] for d in knowledge.load("findings") if d["id"] != "version.*"]
                         + ["version.transformers", "version.setuptools"])
def test_every_finding_explains(fid):
    proc = run_doctor("explain", fid)
    assert proc.returncode == 0, proc.stderr
    for part in ("What it means", "How to fix it"):
        assert part in proc.stdout
    assert ("Sources" in proc.stdout) or ("Known-good ranges" in proc.stdout and "source:" in proc.stdout)


def test_explain_lists_all_ids():
    out = run_doctor("explain").stdout
    assert "stack.verl-rejects-vllm" in out and "version.transformers" in out


def test_secrets_never_appear_in_output():
    secrets = {
        "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz123456",
        "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
        "RAY_ADDRESS": "ray://admin:hunter2pass@10.0.0.1:10001",
        "VLLM_SOMETHING": "sk-proj-ABCDEFGHIJKLMNOPQRSTUV",
        "AWS_SECRET_ACCESS_KEY": "notallowlisted-at-all",
    }
    proc = run_doctor("check", "--fast", "--json", env=secrets)
    doc = json.loads(proc.stdout)
    text = proc.stdout + proc.stderr + run_doctor("check", "--fast", env=secrets).stdout
    for value in ("hf_abcdefghijklmnopqrstuvwxyz123456", "0123456789abcdef0123456789abcdef01234567",
                  "hunter2pass", "sk-proj-ABCDEFGHIJKLMNOPQRSTUV", "notallowlisted-at-all"):
        assert value not in text
    env = doc["facts"]["environment"]
    assert env["HF_TOKEN"] == "<redacted>" and env["WANDB_API_KEY"] == "<redacted>"
    assert env["RAY_ADDRESS"] == "ray://***@10.0.0.1:10001"
    assert "AWS_SECRET_ACCESS_KEY" not in env


def test_json_is_the_only_stdout_and_exit_code_matches_errors():
    proc = run_doctor("check", "--fast", "--json")
    doc = json.loads(proc.stdout)  # would fail on any extra line
    has_error = any(f["severity"] == "error" for f in doc["findings"])
    assert proc.returncode == (1 if has_error else 0)


def test_strict_counts_warnings(tmp_path):
    proc = run_doctor("check", "--fast", "--json", "--strict")
    doc = json.loads(proc.stdout)
    if any(f["severity"] in ("error", "warning") for f in doc["findings"]):
        assert proc.returncode == 1


def test_text_report_has_marks_and_summary():
    out = run_doctor("check", "--fast").stdout
    assert "✓" in out and "error(s)" in out and "skipped by --fast" in out
