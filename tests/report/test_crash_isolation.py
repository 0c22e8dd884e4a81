"""The doctor's own bugs are visible and contained: a renderer or the triage engine that raises is
one line on stderr naming it (and, for the check, the findings as JSON), exit 3 — never a bare
traceback that hides what was found. Real copies of the package with one function made to raise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from conftest import DATA, REPO


def _broken_copy(tmp_path, rel: str, old: str, new: str):
    shutil.copytree(REPO / "doctor", tmp_path / "doctor", ignore=shutil.ignore_patterns("__pycache__"))
    f = tmp_path / "doctor" / rel
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new, 1))
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


def test_a_crashing_text_report_still_gives_the_findings(tmp_path):
    sig = "def render_finding(console: Printer, f, together: list[str] | None = None) -> None:\n"
    env = _broken_copy(tmp_path, "report/text.py", sig, sig + "    raise ZeroDivisionError('boom')\n")
    proc = subprocess.run([sys.executable, "-m", "doctor", "check", "--fast", "--no-gpu"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "the text report crashed (ZeroDivisionError: boom" in lines[0], proc.stderr
    doc = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert doc["findings"] and proc.returncode in (1, 3)
    assert "Traceback" not in proc.stderr


def test_a_crashing_triage_is_one_line_and_exit_3(tmp_path):
    env = _broken_copy(tmp_path, "signatures.py", '    text = text.replace("\\r\\n", "\\n")\n',
                       '    text = text.replace("\\r\\n", "\\n")\n    1 / 0\n')
    log = DATA / "logs" / "failures" / "verl-245_vllm_0.6.3.post1_not_supported.log"
    proc = subprocess.run([sys.executable, "-m", "doctor", "triage", str(log)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "triage crashed" in lines[0] and "ZeroDivisionError" in lines[0]
