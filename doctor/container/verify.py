"""`doctor container verify`: `doctor check --json` inside the image; findings that are host facts
(findings.yaml scope: host) are not held against the image."""

from __future__ import annotations

import json
import math
import os
import sys

from doctor import knowledge
from doctor.container.base import get_image
from doctor.container.engine import engine, one_line
from doctor.errors import UsageError
from doctor.findings import is_host_fact
from doctor.probes.gpu import nvml_facts


def host_gpus() -> list[dict]:
    facts = nvml_facts()
    return facts.get("gpus", []) if facts.get("available") else []


def shm_size_for_ray() -> str:
    """Ray's object store takes 30 % of memory and falls back to /tmp when /dev/shm is smaller."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 16 << 30
    fraction = knowledge.load("system")["shm"]["object_store_fraction"]
    return f"{max(2, math.ceil(mem * fraction / (1 << 30)))}g"


def run_line(tag: str, gpus: bool) -> str:
    iso = "--gpus all --ipc=host" if gpus else f"--shm-size={shm_size_for_ray()}"
    return f"docker run --rm -it {iso} --ulimit memlock=-1 --ulimit stack=67108864 -v $PWD:/workspace {tag}"


def verify(tag: str, echo=None, timeout: float = 900) -> dict:
    import docker
    from docker.types import DeviceRequest, Ulimit

    echo = echo or (lambda m: print(m, file=sys.stderr, flush=True))
    client = engine()
    if get_image(client, tag) is None:
        raise UsageError(f"no image {tag!r} on this engine (build it with `doctor container build`)")
    gpus = host_gpus()
    kw: dict = {"network_mode": "none"}
    if gpus:
        kw.update(device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])], ipc_mode="host")
    else:
        kw["shm_size"] = shm_size_for_ray()
    notes = []
    cmd = ["doctor", "check", "--json"]
    echo(f"… running `{' '.join(cmd)}` in {tag} ({len(gpus)} host GPU(s))")

    def start(**extra):
        ctr = client.containers.create(tag, cmd, **kw, **extra)
        try:
            ctr.start()
        except Exception:
            ctr.remove(force=True)  # a container that never started is not left behind
            raise
        return ctr

    try:
        ctr = start(ulimits=[Ulimit(name="memlock", soft=-1, hard=-1)])
    except docker.errors.APIError as exc:
        if "rlimit" not in str(exc) and "ulimit" not in str(exc):
            raise UsageError(f"cannot start a container of {tag}: {one_line(exc)}")
        # An engine without CAP_SYS_RESOURCE (this sandbox) cannot raise memlock: check without it.
        notes.append(f"the engine refused --ulimit memlock=-1 ({one_line(exc)[:160]}); checked without it")
        ctr = start()
    try:
        rc = ctr.wait(timeout=timeout).get("StatusCode")
        out = ctr.logs(stdout=True, stderr=False).decode(errors="replace")
        err = ctr.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        try:
            ctr.remove(force=True)
        except Exception:  # noqa: BLE001
            pass
    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        tail = (err.strip().splitlines() or ["(no output)"])[-1]
        return {"image": tag, "passed": False, "check_exit_code": rc, "errors": [], "explained_by_host": [],
                "warnings": [], "notes": notes + [f"doctor check printed no JSON: {tail}"],
                "host_gpus": len(gpus), "run_command": run_line(tag, bool(gpus))}
    findings = report.get("findings", [])
    errors = [f["id"] for f in findings if f.get("severity") == "error"]
    # The image is judged, not the machine that runs it: host facts (findings.yaml scope: host, e.g.
    # gpu.none without GPUs here, /dev/shm) are explained by the host, whether it has GPUs or not.
    host = [i for i in errors if is_host_fact(i)]
    return {
        "image": tag, "passed": not [i for i in errors if i not in host], "check_exit_code": rc,
        "errors": [i for i in errors if i not in host], "explained_by_host": host,
        "warnings": [f["id"] for f in findings if f.get("severity") == "warning"], "notes": notes,
        "host_gpus": len(gpus), "run_command": run_line(tag, bool(gpus)),
    }
