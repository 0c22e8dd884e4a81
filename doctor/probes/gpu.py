"""GPU facts through NVML (nvidia-ml-py) in the doctor's own process, plus torch's CUDA build read
from the target's torch/version.py without importing torch. "No driver / no NVML" is a fact."""

from __future__ import annotations

import os
import re
from pathlib import Path


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _optional(read):
    try:
        return read()
    except Exception:  # noqa: BLE001 - not every driver answers every query
        return None


def nvml_facts() -> dict:
    try:
        import pynvml
    except ImportError as exc:
        return {"available": False, "reason": f"nvidia-ml-py not importable: {exc}"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
        return {"available": False, "reason": f"NVML: {exc}"}
    try:
        out = {
            "available": True,
            "doctor_pid": os.getpid(),  # the doctor's own process is never "another process"
            "driver_version": _s(pynvml.nvmlSystemGetDriverVersion()),
            "cuda_driver_version": pynvml.nvmlSystemGetCudaDriverVersion(),
            "gpus": [],
        }
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            procs = []
            try:
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                    procs.append({"pid": p.pid, "used_memory": p.usedGpuMemory, "name": _process_name(p.pid)})
            except Exception:  # noqa: BLE001 - not supported on every driver
                pass
            out["gpus"].append({
                "index": i,
                "name": _s(pynvml.nvmlDeviceGetName(h)),
                "uuid": _optional(lambda: _s(pynvml.nvmlDeviceGetUUID(h))),
                "pci_bus_id": _optional(lambda: _s(pynvml.nvmlDeviceGetPciInfo(h).busId)),
                "memory_total": mem.total,
                "memory_used": mem.used,
                "compute_capability": list(pynvml.nvmlDeviceGetCudaComputeCapability(h)),
                "compute_processes": procs,
            })
        return out
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _process_name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def torch_cuda_build(distributions: dict) -> dict:
    """torch.version.cuda from the target's torch/version.py (no import: torch takes seconds)."""
    torch = distributions.get("torch")
    if not torch:
        return {"installed": False}
    version_py = Path(torch["path"]).parent / "torch" / "version.py"
    try:
        text = version_py.read_text()
    except OSError:
        return {"installed": True, "version": torch["version"], "cuda": None}
    m = re.search(r"^cuda(?:: Optional\[str\])?\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return {"installed": True, "version": torch["version"], "cuda": m.group(1) if m else None}
