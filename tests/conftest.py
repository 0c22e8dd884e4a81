"""Shared fixtures: the doctor CLI as a user runs it, and the real test environments (tests/envs.py)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"  # everything the tests read (tests/data/README.md)
sys.path.insert(0, str(REPO / "tests"))

import envs  # noqa: E402

# Contract slips are errors in the tests, never printed to users: a finding whose {placeholder} its
# rule does not fill, or an ID a rule emits without declaring it (doctor/findings.py strict()).
# Subprocesses of the doctor inherit it.
os.environ.setdefault("VERL_DOCTOR_STRICT", "1")

# The signal tests send SIGINT/SIGHUP to the doctor as a user's terminal does. A suite started in
# the background (`nohup`, `cmd &` in a script) inherits both as *ignored*, and an ignored signal
# stays ignored across exec: the doctor would never see them. Handled here, they reach each child
# with their default disposition, as in a user's shell.
import signal  # noqa: E402

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda *_: None)  # pytest itself goes on; its children get SIG_DFL


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    # Tests never read or write the user's cache; one cache per test session (deep probes of each
    # real env run once per session, then come from it).
    if "VERL_DOCTOR_CACHE_DIR" not in os.environ:
        os.environ["VERL_DOCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("doctor-cache"))
    os.environ.setdefault("VERL_DOCTOR_STATE_DIR", str(tmp_path_factory.mktemp("doctor-state")))
    # Ray findings read $RAY_TMPDIR/ray: the machine's own /tmp/ray (stale sessions of other runs)
    # must not leak into test results. Short, because Ray's socket paths must fit 107 bytes.
    if "RAY_TMPDIR" not in os.environ:
        import shutil
        import tempfile

        os.environ["RAY_TMPDIR"] = ray_tmp = tempfile.mkdtemp(prefix="rdt", dir="/tmp")
        yield
        shutil.rmtree(ray_tmp, ignore_errors=True)
        return
    yield


def run_doctor(*args: str, env: dict | None = None, input: str | None = None, timeout: float = 600,
               cwd: str | None = None) -> subprocess.CompletedProcess:
    """`doctor ARGS` in a subprocess, exactly as a user runs it."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True,
                          env=full_env, input=input, timeout=timeout, cwd=cwd or str(REPO))


@functools.lru_cache(maxsize=None)
def check_json(env_name: str, *extra: str) -> tuple[int, dict]:
    """`doctor check --json` on a real env, once per session (cached by arguments)."""
    py = envs.build(env_name)
    proc = run_doctor("check", "--json", "--python", str(py), *extra)
    assert proc.stdout.strip(), f"no JSON on stdout; stderr: {proc.stderr[-3000:]}"
    return proc.returncode, json.loads(proc.stdout)


def ids(doc: dict, severity: str | None = None) -> set[str]:
    return {f["id"] for f in doc["findings"] if severity is None or f["severity"] == severity}


def finding(doc: dict, fid: str) -> dict:
    return next(f for f in doc["findings"] if f["id"] == fid)


def recipe_variant(tmp_path: Path, base: str, name: str, old: str, new: str) -> Path:
    """A shipped recipe with one override changed (old → new), written as a recipe file."""
    import yaml

    from doctor.recipes import catalog

    r = yaml.safe_load((catalog.RECIPES_DIR / f"{base}.yaml").read_text())
    r["name"] = name
    r["overrides"] = [o.replace(old, new) for o in r["overrides"]]
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(r))
    return f
