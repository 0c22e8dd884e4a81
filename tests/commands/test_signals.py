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


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(p))
    return kids


def descendants(pid: int) -> set[int]:
    kids, out, todo = _children(), set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


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
    until = time.time() + 15
    left = [p for p in seen if alive(p)]
    while left and time.time() < until:
        time.sleep(0.5)
        left = [p for p in seen if alive(p)]
    assert not left, [(p, cmdline(p)[:120]) for p in left]
