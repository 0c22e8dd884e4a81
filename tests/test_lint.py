"""ruff and mypy are clean (pyproject.toml configures both; the probe scripts' prelude names are in
doctor/probes/scripts/ruff.toml). Part of the README's test command, so CI holds them."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *cmd], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean():
    proc = _run("ruff", "check", "doctor", "tests", "benchmarks", "setup.py")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_mypy_is_clean():
    proc = _run("mypy")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
