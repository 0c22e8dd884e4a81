"""Differential diagnosis on real envs: the working set with one distribution pinned over it the
way users do it (tests/envs.py PINNED_OVER, each from a public thread). The doctor names what
differs from the known-good set as the cause (stack.culprit), lists where it surfaced under it,
keeps the library's own precise message as evidence, and its fix, run as printed in a new shell,
restores the known-good set exactly."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import REPO, envs, run_doctor
from doctor.lockfiles import parse_lockfile

FAST = ("--no-gpu", "--skip-probe", "ray_smoke", "--skip-probe", "registry")


def check(py) -> dict:
    proc = run_doctor("check", "--json", *FAST, "--python", str(py))
    assert proc.stdout.strip(), proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.realenv
@pytest.mark.parametrize("name", sorted(envs.PINNED_OVER))
def test_the_pin_laid_over_the_set_is_the_headline(name):
    dist, version, thread = envs.PINNED_OVER[name]
    doc = check(envs.build(name))
    culprit = [f for f in doc["findings"] if f["id"] == "stack.culprit"]
    assert culprit, (thread, [(f["id"], f["title"]) for f in doc["findings"]])
    assert culprit[0]["title"].startswith(f"{dist} {version} differs from the known-good set"), culprit[0]["title"]
    surfaced = [f for f in doc["findings"] if f.get("caused_by") == "stack.culprit"]
    assert surfaced, "where it surfaced is listed under the cause"
    assert f'"{dist}==' in culprit[0]["fix"]["commands"][0] and "--constraint" in culprit[0]["fix"]["commands"][0]


@pytest.mark.realenv
def test_a_librarys_own_version_check_is_the_evidence():
    doc = check(envs.build("pin-tokenizers020"))
    ev = " ".join(e for f in doc["findings"] if f["id"] == "stack.culprit" for e in f["evidence"])
    assert "tokenizers>=0.21,<0.22 is required for a normal functioning of this module, but found tokenizers==0.20.3" in ev
    assert "pip install transformers -U" not in ev


@pytest.mark.realenv
@pytest.mark.parametrize("name", ["pin-pydantic1", "pin-tokenizers020", "pin-jinja2-2113"])
def test_the_fix_as_printed_restores_the_known_good_set(name, tmp_path):
    py = envs.build_copy(name, tmp_path / "env")
    doc = check(py)
    command = next(f for f in doc["findings"] if f["id"] == "stack.culprit")["fix"]["commands"][0]
    # a new shell: the machine's own settings (CA bundle, proxies) but no venv activated and a
    # PATH without the doctor's .venv/bin
    shell = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    shell.update(PATH="/usr/local/bin:/usr/bin:/bin", UV_CACHE_DIR=envs.uv_env()["UV_CACHE_DIR"])
    proc = subprocess.run(["bash", "-c", command], env=shell, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    freeze = subprocess.run([envs.uv(), "pip", "freeze", "--python", str(py)], capture_output=True, text=True,
                            env=envs.uv_env()).stdout
    have = dict(line.split("==", 1) for line in freeze.splitlines() if "==" in line)
    locked = {n: e["version"] for n, e in parse_lockfile(REPO / "lockfiles" / "verl041-vllm063post1-py3.11.txt").items()}
    from doctor.names import canonical_name

    have = {canonical_name(k): v for k, v in have.items()}
    assert {n: have.get(n) for n in locked if have.get(n) != locked[n]} == {}
    after = check(py)
    assert "stack.culprit" not in {f["id"] for f in after["findings"]}
    assert not [m for m, i in after["facts"]["imports"]["modules"].items() if not i["ok"] and m != "flash_attn"]
