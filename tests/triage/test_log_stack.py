"""Fix parameters come from the log, not from the default stack: the Python, torch and vLLM a log
shows pick the wheel, the lockfile and the versions its fixes name; a log from another stack is
not told to install the locked set as if that were the same fix; and no fix command is printed
with a placeholder left in it (every printed command runs as printed). Real corpus excerpts."""

from __future__ import annotations

import re

import pytest

from conftest import DATA
from doctor import knowledge
from doctor.triage import log_context, read_log, triage_text

CORPUS = DATA / "corpus"
ALL_LOGS = sorted(CORPUS.glob("*/*/*.log"))
WHEELS = knowledge.default_stack()["flash_attn"]["wheels"]


def triage(rel: str, python_version: str | None = None):
    return triage_text(read_log(str(CORPUS / rel)), rel, python="/opt/train/bin/python", python_version=python_version)


def test_the_log_shows_its_own_python_and_versions():
    assert log_context(read_log(str(CORPUS / "import/transformers-version/qwen3-vl-247.log"))) == \
        {"python": "3.10", "vllm": "0.6.1", "transformers": "4.45.0.dev0", "torch": "2.4.0"}  # a conda list
    # pasted under the traceback (every line of it), site-packages paths
    assert log_context(read_log(str(CORPUS / "import/cuda-driver-too-old/vllm-11623.log")))["torch"] == "2.4.0+cu121"


def test_versions_a_person_writes_are_the_runs_but_not_the_ones_they_should_install():
    assert log_context("I found an error when I use verl0.7.0 +vllm0.12.0") == {"verl": "0.7.0", "vllm": "0.12.0"}
    assert log_context("installed vLLM v0.7.2 with sglang 0.4.5.post3") == {"vllm": "0.7.2", "sglang": "0.4.5.post3"}
    assert log_context("after pip install vllm==0.8.5, torch is 2.6.0") == {"vllm": "0.8.5"}
    # a requirement or a fix is not what the run had
    assert log_context("ValueError: requires vllm>=0.8.5; please upgrade to transformers 4.51.0") == {}
    assert log_context("works with torch 2.x") == {}


def test_the_flash_attn_wheel_is_the_one_for_the_logs_python():
    f = triage("import/flash-attn-abi/flash-attention-1612.log").findings[0]  # cpython-311 in the .so name
    assert f.id == "flash-attn.abi-mismatch" and WHEELS["3.11"]["url"] in f.fix.commands[0]
    f = triage("import/flash-attn-abi/flash-attention-1832.log").findings[0]  # cpython-312: no wheel of the stack
    assert f.fix.commands == [] and "Python 3.12" in f.fix.summary and "To adapt" in f.fix.summary


def test_a_log_of_another_vllm_is_not_told_to_install_the_locked_one():
    t = triage("import/transformers-version/qwen3-vl-247.log", python_version="3.11")
    assert t.differs == ["vllm 0.6.1 (the locked set: 0.6.3.post1)", "transformers 4.45.0.dev0 (the locked set: 4.47.1)"]
    assert not any("lockfiles/" in c for f in t.findings for c in f.fix.commands)


def test_the_lockfile_is_the_one_for_the_logs_python_and_none_for_a_python_without_one():
    t = triage("import/vllm-extension/vllm-3147.log", python_version="3.11")  # the log shows python3.10
    (cmd,) = t.findings[0].fix.commands
    assert "verl041-vllm063post1-py3.10.txt" in cmd and '"vllm==0.6.3.post1" "torch==2.4.0"' in cmd
    t = triage("import/vllm-extension/vllm-5501.log")  # python3.8: no lockfile of the stack
    assert t.findings[0].fix.commands == [] and "<lockfile>" in t.findings[0].fix.summary  # never the raw {lockfile}


@pytest.mark.parametrize("path", ALL_LOGS, ids=[str(p.relative_to(CORPUS)) for p in ALL_LOGS])
def test_no_printed_fix_command_has_a_placeholder_left(path):
    t = triage_text(read_log(str(path)), str(path), python="/opt/train/bin/python")
    for f in t.findings:
        for cmd in f.fix.commands:
            assert not re.search(r"\{[a-z_]+\}|<[^<>]{3,}>", cmd), (f.id, cmd)
