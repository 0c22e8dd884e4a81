"""`doctor lock --project PATH`: a working env of a paper's checkout pinned for the next person —
every installed distribution at its version, hashed by uv, the checkout's own code left out — and
`doctor check --lock` against it. A real env: verl 0.3.0.post1's source installed editable as a
fork (tests/envs.py verl-fork-editable)."""

from __future__ import annotations

import json

import pytest

from conftest import envs, run_doctor
from doctor.lockfiles import parse_lockfile


@pytest.mark.realenv
def test_a_project_lock_pins_the_env_without_the_projects_own_code(tmp_path):
    py = str(envs.build("verl-fork-editable"))
    checkout = json.loads(run_doctor("check", "--fast", "--json", "--python", py).stdout)["facts"]["distributions"]["verl"]["project"]
    p = run_doctor("lock", "--project", checkout, "--from", py, "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    path = tmp_path / "verl-fork-editable-checkout-py3.11.txt"
    assert p.stdout.strip() == str(path) and "left out (the project's own code" in p.stderr
    pins = parse_lockfile(path)
    assert "verl" not in pins and pins["vllm"]["version"] == "0.6.3" and pins["torch"]["version"] == "2.4.0"
    assert all(pin["hashes"] for pin in pins.values())  # uv pip sync --require-hashes can install it
    assert f"pip install --no-deps -e {checkout}" in path.read_text()
    # the env matches its own lock; the checkout is no "extra"
    doc = json.loads(run_doctor("check", "--fast", "--json", "--no-gpu", "--python", py, "--lock", str(path)).stdout)
    assert "lock.drift" not in {f["id"] for f in doc["findings"]}


def test_a_project_lock_needs_the_env_to_use_the_checkout(tmp_path):
    p = run_doctor("lock", "--project", str(tmp_path), "--out", str(tmp_path / "out"))
    assert p.returncode == 2 and "no distribution of this env is installed from it" in p.stderr
    p = run_doctor("lock", "--project", str(tmp_path), "--stack", "verl030-vllm063")
    assert p.returncode == 2 and "takes no --stack" in p.stderr
