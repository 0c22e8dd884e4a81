"""TERM, HUP and INT end the doctor the way Ctrl-C does: every process it started — the probes and
the Ray smoke test's private Ray instance (gcs_server, raylet, workers) — is gone within 15 s.
Real signals, a real deep check on the working env, a real Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, envs
from processes import cmdline, descendants, left_alive


@pytest.mark.realenv
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_mid_deep_check_leaves_no_process_behind(sig, tmp_path):
    py = envs.build("working")
    env = {**os.environ, "VERL_DOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "doctor", "check", "--no-cache", "--no-gpu", "--python", str(py)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    seen: set[int] = set()
    deadline = time.time() + 180
    ray_up = False
    while time.time() < deadline and proc.poll() is None:
        now = descendants(proc.pid)
        seen |= now
        if any("gcs_server" in cmdline(p) for p in now):
            ray_up = True
            break
        time.sleep(0.2)
    assert ray_up, "the Ray smoke test's private instance never started: " + proc.communicate()[1][-2000:]
    time.sleep(1.0)
    seen |= descendants(proc.pid)
    os.kill(proc.pid, sig)  # the doctor only, as `kill` or `timeout -s TERM` sends it
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "interrupted" in err
    left = left_alive(seen, within=15)
    assert not left, [(p, cmdline(p)[:120]) for p in left]
