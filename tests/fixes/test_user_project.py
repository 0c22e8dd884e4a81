"""A paper's own verl (an editable checkout, as TinyZero and its forks install theirs) is the
user's code: judged by what its code does, never replaced, reinstalled or removed by a fix.
Real envs: verl 0.3.0.post1's source from PyPI installed with `pip install -e` under a fork's
version string (tests/envs.py verl-fork-editable), and the same with vllm 0.6.3.post1 laid over
(verl-fork-post1), which the checkout's own adapter rejects."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from conftest import check_json, envs, ids, run_doctor


def finding(doc, fid):
    return next(f for f in doc["findings"] if f["id"] == fid)


@pytest.mark.realenv
def test_an_editable_fork_is_the_users_project_not_an_outdated_verl():
    _, doc = check_json("verl-fork-editable", "--no-gpu")
    verl = doc["facts"]["distributions"]["verl"]
    assert verl["editable"] and verl["project"].endswith("verl-fork-editable-checkout")
    assert "version.user-project" in ids(doc, "info")
    # not an out-of-range verl, not a stale copy of its own egg-info, not a difference to sync away
    assert not {"version.verl", "python.broken-metadata", "stack.differs"} & ids(doc)
    assert verl["vllm_accepts"]["exact"] == ["0.3.1", "0.4.2", "0.5.4", "0.6.3"]  # read from the checkout's code


@pytest.mark.realenv
def test_fix_never_plans_over_the_checkout_not_even_with_a_lockfile(tmp_path):
    py = str(envs.build("verl-fork-editable"))
    lock = str(envs.LOCK_030)
    p = run_doctor("fix", "--dry-run", "--json", "--python", py, "--lock", lock)
    plan = json.loads(p.stdout)["plan"]
    assert not [s for s in plan["steps"] if s["kind"] in ("packages", "sync-lock")], plan["steps"]
    (drift,) = [m for m in plan["manual"] if m["id"] == "lock.drift"]
    assert "would replace or remove your own checkout(s): verl" in drift["why"]


@pytest.mark.realenv
def test_a_vllm_the_checkout_rejects_gets_the_vllm_its_code_accepts_and_the_command_works(tmp_path):
    _, doc = check_json("verl-fork-post1", "--no-gpu")
    f = finding(doc, "stack.project-rejects-vllm")
    assert "accepts exactly 0.3.1, 0.4.2, 0.5.4, 0.6.3 or 0.7.0+" in f["title"]
    assert finding(doc, "stack.verl-rejects-vllm")["caused_by"] == "stack.project-rejects-vllm"
    # the checkout's own metadata (setup.py's extra 'vllm': vllm<=0.8.2) allows what its code refuses
    assert any("declared requirement vllm<=0.8.2" in e and "disagree" in e for e in f["evidence"])
    (cmd,) = f["fix"]["commands"]
    assert '"vllm==0.6.3"' in cmd and "verl030-vllm063-py3.11.txt" in cmd  # the family that pins it
    plan = json.loads(run_doctor("fix", "--dry-run", "--json", "--python", str(envs.build("verl-fork-post1"))).stdout)["plan"]
    assert any(k["dists"] == ["verl"] for k in plan["kept"])  # stack.verl-rejects-vllm's "install verl": not done
    # the printed command, run as printed on a copy of the env, fixes it and leaves the checkout alone
    copy = envs.build_copy("verl-fork-post1", tmp_path / "env")
    words = shlex.split(cmd.replace(str(envs.build("verl-fork-post1")), str(copy)))
    subprocess.run(words, check=True, capture_output=True, timeout=600, env=envs.uv_env())
    after = json.loads(run_doctor("check", "--no-gpu", "--json", "--no-cache", "--python", str(copy)).stdout)
    assert not {"stack.project-rejects-vllm", "stack.verl-rejects-vllm", "import.failed"} & ids(after, "error"), ids(after)
    assert after["facts"]["distributions"]["verl"]["version"] == "0.1.0"  # still the fork
    assert after["facts"]["distributions"]["vllm"]["version"] == "0.6.3"
