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


_KERNEL_MODULE = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)*)")
_LIBCUDA_VERSION = re.compile(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)*)$")
_DEFAULT_LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")


def _ldconfig_dirs() -> list[str]:
    """Directories of libcuda.so.1 in the dynamic loader's cache (`ldconfig -p`), in its order."""
    import shutil
    import subprocess

    exe = shutil.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None)
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [os.path.dirname(m.group(1)) for m in re.finditer(r"^\s*libcuda\.so\.1 \([^)]*\) => (\S+)", out, re.M)]


def libcuda_facts(proc_version: str = "/proc/driver/nvidia/version", environ: dict | None = None,
                  default_dirs: tuple[str, ...] = _DEFAULT_LIB_DIRS) -> dict:
    """Which libcuda.so.1 a CUDA process started from this environment loads, the way the dynamic
    loader looks (LD_LIBRARY_PATH, then its cache, then the default directories), with its version
    from the file name, beside the kernel module's version: a libcuda that is not the kernel
    driver's own (a container's forward-compatibility copy, a driver upgraded without a reboot) is
    CUDA error 803 or NVML's 'Driver/library version mismatch'. No GPU call, no dlopen."""
    env = os.environ if environ is None else environ
    out: dict = {"kernel_module": None, "ld_library_path": env.get("LD_LIBRARY_PATH"), "candidates": [], "selected": None}
    try:
        m = _KERNEL_MODULE.search(Path(proc_version).read_text(errors="replace"))
        out["kernel_module"] = m.group(1) if m else None
        out["kernel_module_line"] = Path(proc_version).read_text(errors="replace").splitlines()[0].strip()
    except OSError:
        pass
    seen = set()
    order = [(d, "LD_LIBRARY_PATH") for d in (env.get("LD_LIBRARY_PATH") or "").split(":") if d]
    order += [(d, "ldconfig cache") for d in _ldconfig_dirs()] + [(d, "default directory") for d in default_dirs]
    for d, how in order:
        path = os.path.join(d, "libcuda.so.1")
        real = os.path.realpath(path)
        if real in seen or not os.path.exists(path):
            continue
        seen.add(real)
        v = _LIBCUDA_VERSION.search(os.path.basename(real))
        out["candidates"].append({"path": path, "real": real, "version": v.group(1) if v else None, "found_by": how,
                                  "compat": "/compat" in real or "/compat" in path})
    out["selected"] = out["candidates"][0] if out["candidates"] else None
    return out


def gpu_facts() -> dict:
    """NVML's facts and the libcuda a CUDA process would load (the gpu local probe)."""
    return {**nvml_facts(), "libcuda": libcuda_facts()}
