"""Machine facts: shared memory, temp space, open-files limit, CPUs, RAM."""

from __future__ import annotations

import os
import resource
import tempfile


def _free(path: str) -> dict:
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return {"path": path, "error": str(exc)}
    # Ray measures /dev/shm the same way: f_bsize * f_bavail (ray/_private/utils.py).
    return {"path": path, "free_bytes": st.f_bsize * st.f_bavail, "total_bytes": st.f_frsize * st.f_blocks}


def _meminfo() -> dict:
    out = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable"):
                    out[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return {"total_bytes": out.get("MemTotal"), "available_bytes": out.get("MemAvailable")}


def system_facts() -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {
        "shm": _free("/dev/shm"),
        "tmp": _free(tempfile.gettempdir()),
        "nofile": {"soft": soft, "hard": hard},
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory": _meminfo(),
    }
