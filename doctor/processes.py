"""Child process groups the doctor starts (probes, the trainer): stopped as a group, so that nothing
they started (Ray workers, vLLM engines) outlives the doctor."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, first: int = signal.SIGKILL, grace_s: float = 0.0) -> None:
    """Send `first` to the process group `proc` leads (it was started with start_new_session=True);
    after grace_s, SIGKILL whatever of the group is left (stragglers: Ray workers the trainer
    started), then reap `proc`. Never touches another process group."""
    try:
        os.killpg(proc.pid, first)
    except (ProcessLookupError, PermissionError):
        pass
    if first != signal.SIGKILL and grace_s > 0:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    if first != signal.SIGKILL:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
