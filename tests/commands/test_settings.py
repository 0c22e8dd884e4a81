"""Settings as causes (issue 24), on the real working env: a shell setting breaks it, the doctor
names the setting (not where it surfaced), and the command it prints re-checks the env without it,
run as printed in a new shell. The settings come from public threads:
- PYTHONPATH with an older typing_extensions ahead of the env's own: the same ImportError as
  https://github.com/vladmandic/sdnext/issues/1602 (typing_extensions 4.4.0 under newer code)
- VLLM_ATTENTION_BACKEND naming a backend whose library is not installed (FLASHINFER without
  flashinfer: "TypeError: 'NoneType' object is not callable" at the first generate,
  https://github.com/vllm-project/vllm/issues/6991, https://github.com/vllm-project/vllm/pull/12513),
  or a name vLLM does not know."""

from __future__ import annotations

import json
import os
import shlex
import subprocess

import pytest

import envs
from conftest import finding, ids, run_doctor
from doctor.uv import uv_bin

pytestmark = pytest.mark.realenv


def _check(env: dict) -> tuple[int, dict]:
    py = envs.build("working")
    proc = run_doctor("check", "--json", "--python", str(py), env=env)
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def old_typing_extensions(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("pythonpath")
    subprocess.run([uv_bin(), "pip", "install", "-q", "--target", str(d), "--no-deps", "typing-extensions==4.4.0"],
                   check=True, env={**envs.uv_env()})
    return str(d)


def test_a_pythonpath_entry_that_breaks_imports_is_the_cause(old_typing_extensions):
    rc, doc = _check({"PYTHONPATH": old_typing_extensions})
    f = finding(doc, "setting.loads-code")
    assert f["severity"] == "error" and f["title"].startswith("PYTHONPATH makes torch") and "load code from" in f["title"]
    assert doc["facts"]["environment"]["PYTHONPATH"] == old_typing_extensions   # a path is not a secret
    # what surfaced is under it, not beside it
    for fid in ("import.failed", "import.name-missing"):
        assert all(g.get("caused_by") == "setting.loads-code" for g in doc["findings"] if g["id"] == fid), fid
    # the printed command runs as printed in a new shell and finds the env healthy without the setting
    cmd = f["fix"]["commands"][0]
    assert cmd.startswith("env -u PYTHONPATH ") and " check --python " in cmd
    proc = subprocess.run(shlex.split(cmd) + ["--json"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": old_typing_extensions}, timeout=600)
    again = json.loads(proc.stdout)
    assert not [g for g in again["findings"] if g["severity"] == "error" and g["id"] != "gpu.none"], \
        [g["id"] for g in again["findings"] if g["severity"] == "error"]


@pytest.mark.parametrize("value,words", [("FLASHINFER", "needs flashinfer"), ("FLASH_ATTN_V9", "Invalid attention backend")])
def test_an_attention_backend_setting_is_exercised_on_cpu(value, words):
    rc, doc = _check({"VLLM_ATTENTION_BACKEND": value})
    f = finding(doc, "setting.unusable-value")
    assert f["severity"] == "error" and words in f["title"] and rc == 1, f["title"]
    assert "import.failed" not in ids(doc)   # vLLM itself imports: only the chosen backend cannot run


def test_a_backend_the_env_has_is_no_finding():
    _, doc = _check({"VLLM_ATTENTION_BACKEND": "XFORMERS"})
    assert "setting.unusable-value" not in ids(doc)
    assert doc["facts"]["imports"]["checks"]["attention_backend"]["ok"] is True
