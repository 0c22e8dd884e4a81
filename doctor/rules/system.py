"""Machine limits that break Ray and NCCL."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import make
from doctor.rules.registry import rule
from doctor.units import human_bytes


@rule("/dev/shm is large enough for Ray", "system", needs=("system",), emits=("system.shm-small",))
def shm_small(facts, ctx):
    t = knowledge.load("system")["shm"]
    shm = facts["system"].get("shm") or {}
    avail = (facts["system"].get("memory") or {}).get("available_bytes")
    free = shm.get("free_bytes")
    if free is None or not avail:
        return
    store = min(avail * t["object_store_fraction"], t["object_store_max_bytes"])
    want = max(store * t["headroom"], t["min_bytes"])
    if free < want:
        yield make("system.shm-small",
                   [f"/dev/shm free: {free} bytes ({human_bytes(free)})",
                    f"Ray's default object store: {t['object_store_fraction']} x {human_bytes(avail)} available = {human_bytes(store)}"],
                   free=human_bytes(free), want=human_bytes(want), want_docker=f"{want / 2**30:.2f}gb", python=ctx.python)
