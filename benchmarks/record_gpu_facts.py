"""Record what a real machine says about its GPUs under each device selection, as JSON.

For every selection below (CUDA_VISIBLE_DEVICES unset, "0", a real UUID, a UUID prefix, "0,0",
out of range, "-1", "", garbage, CUDA_DEVICE_ORDER, NVIDIA_/ROCR_/HIP_VISIBLE_DEVICES, ...) two
fresh subprocesses run with that environment:

  driver  ctypes on libcuda.so.1: cuInit, cuDriverGetVersion, cuDeviceGetCount, and per device
          cuDeviceGet, cuDeviceGetName, cuDeviceGetUuid_v2 (or cuDeviceGetUuid), cuDeviceGetAttribute
          75/76 (compute capability), cuDeviceTotalMem_v2, cuDeviceGetPCIBusId; plus NVML's device
          count in that same environment (NVML ignores CUDA_VISIBLE_DEVICES).
  torch   torch.cuda.device_count(), is_available(), get_arch_list(), the raw arch flags, the
          NVML-based count, and get_device_properties() of each visible device.

NVML's own view (devices, UUIDs, memory, driver and CUDA driver version, MIG mode, processes) is
recorded once idle, and once more while a background child holds --hold-gib GiB through torch, with
the driver's and torch's free/total memory of that moment.

Standard library, plus pynvml (nvidia-ml-py) and torch when present: each missing piece is
recorded as a fact, never a crash.

    python benchmarks/record_gpu_facts.py --out gpu-selection-facts.json [--hold-gib 20]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import time

SELECTION_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
                  "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")
UNSET = None

# ---------------------------------------------------------------------------------------------
# Run in a child: the driver API through ctypes. argv[1] == "mem": also free/total in a context.
DRIVER_CHILD = r'''
import ctypes, json, os, sys, time
t0 = time.perf_counter()
out = {"env": {k: os.environ.get(k) for k in %(vars)r}}
def name_of(lib, rc):
    s = ctypes.c_char_p()
    try:
        if lib.cuGetErrorName(rc, ctypes.byref(s)) == 0 and s.value:
            return s.value.decode()
    except Exception:
        pass
    return None
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out["libcuda"] = "not loadable: %%s" %% exc
    print(json.dumps(out)); sys.exit(0)
out["libcuda"] = "libcuda.so.1"
v = ctypes.c_int()
rc = cu.cuDriverGetVersion(ctypes.byref(v))
out["cuDriverGetVersion"] = {"rc": rc, "version": v.value if rc == 0 else None}
rc = cu.cuInit(0)
out["cuInit"] = {"rc": rc, "name": name_of(cu, rc)}
n = ctypes.c_int(-1)
rc = cu.cuDeviceGetCount(ctypes.byref(n))
out["cuDeviceGetCount"] = {"rc": rc, "name": name_of(cu, rc), "count": n.value if rc == 0 else None}
devs = []
for i in range(n.value if rc == 0 else 0):
    d = {"ordinal": i}
    dev = ctypes.c_int()
    r = cu.cuDeviceGet(ctypes.byref(dev), i)
    d["cuDeviceGet"] = r
    if r != 0:
        devs.append(d); continue
    buf = ctypes.create_string_buffer(256)
    d["name"] = buf.value.decode() if cu.cuDeviceGetName(buf, 256, dev) == 0 else None
    uu = (ctypes.c_ubyte * 16)()
    fn = getattr(cu, "cuDeviceGetUuid_v2", None)
    d["uuid_api"] = "cuDeviceGetUuid_v2" if fn is not None else "cuDeviceGetUuid"
    r = (fn or cu.cuDeviceGetUuid)(uu, dev)
    if r == 0:
        h = bytes(uu).hex()
        d["uuid"] = "GPU-%%s-%%s-%%s-%%s-%%s" %% (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
    else:
        d["uuid"] = None
    cc = []
    for attr in (75, 76):  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
        a = ctypes.c_int()
        cc.append(a.value if cu.cuDeviceGetAttribute(ctypes.byref(a), attr, dev) == 0 else None)
    d["compute_capability"] = cc
    mem = ctypes.c_size_t()
    d["total_mem"] = mem.value if cu.cuDeviceTotalMem_v2(ctypes.byref(mem), dev) == 0 else None
    bus = ctypes.create_string_buffer(64)
    d["pci_bus_id"] = bus.value.decode() if cu.cuDeviceGetPCIBusId(bus, 64, dev) == 0 else None
    if len(sys.argv) > 1 and sys.argv[1] == "mem":
        ctx = ctypes.c_void_p()
        r = cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
        if r == 0 and cu.cuCtxSetCurrent(ctx) == 0:
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            r = cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
            d["cuMemGetInfo_v2"] = {"rc": r, "free": free.value, "total": total.value}
            cu.cuDevicePrimaryCtxRelease_v2(dev)
        else:
            d["cuMemGetInfo_v2"] = {"rc": r, "name": name_of(cu, r)}
    devs.append(d)
out["devices"] = devs
try:
    import pynvml
    pynvml.nvmlInit()
    out["nvml_device_count"] = pynvml.nvmlDeviceGetCount()
    pynvml.nvmlShutdown()
except Exception as exc:
    out["nvml_device_count"] = "%%s: %%s" %% (type(exc).__name__, exc)
out["seconds"] = round(time.perf_counter() - t0, 3)
print(json.dumps(out))
''' % {"vars": SELECTION_VARS}

# Run in a child: torch's view. argv[1] == "mem": also torch.cuda.mem_get_info() per device.
TORCH_CHILD = r'''
import json, os, sys, time
t0 = time.perf_counter()
out = {}
def call(key, fn):
    try:
        out[key] = fn()
    except Exception as exc:
        out[key] = {"error": "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")}
try:
    import torch
except Exception as exc:
    print(json.dumps({"import": "%s: %s" % (type(exc).__name__, exc)})); sys.exit(0)
out["version"] = torch.__version__
out["cuda"] = torch.version.cuda
out["import_seconds"] = round(time.perf_counter() - t0, 3)
call("device_count", torch.cuda.device_count)
call("nvml_based_device_count", lambda: torch.cuda._device_count_nvml())
call("is_available", torch.cuda.is_available)
call("get_arch_list", torch.cuda.get_arch_list)
call("arch_flags_raw", lambda: torch._C._cuda_getArchFlags())
devs = []
n = out["device_count"] if isinstance(out["device_count"], int) else 0
for i in range(n):
    d = {}
    try:
        p = torch.cuda.get_device_properties(i)
        d = {"name": p.name, "uuid": "GPU-" + str(p.uuid) if getattr(p, "uuid", None) is not None else None,
             "compute_capability": [p.major, p.minor], "total_memory": p.total_memory}
    except Exception as exc:
        d = {"error": "%s: %s" % (type(exc).__name__, exc)}
    if len(sys.argv) > 1 and sys.argv[1] == "mem":
        try:
            d["mem_get_info"] = list(torch.cuda.mem_get_info(i))
        except Exception as exc:
            d["mem_get_info"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    devs.append(d)
out["devices"] = devs
out["seconds"] = round(time.perf_counter() - t0, 3)
print(json.dumps(out))
'''

HOLDER_CHILD = r'''
import sys, torch
x = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
'''


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _try(fn, *a):
    try:
        return fn(*a)
    except Exception as exc:  # noqa: BLE001 - NVMLError_NotSupported and friends are facts
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def nvml_view() -> dict:
    try:
        import pynvml
    except ImportError as exc:
        return {"available": False, "reason": "nvidia-ml-py not importable: %s" % exc}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "reason": "NVML: %s" % exc}
    try:
        out = {"available": True,
               "driver_version": _s(pynvml.nvmlSystemGetDriverVersion()),
               "cuda_driver_version": pynvml.nvmlSystemGetCudaDriverVersion(),
               "nvml_version": _try(lambda: _s(pynvml.nvmlSystemGetNVMLVersion())),
               "device_count": pynvml.nvmlDeviceGetCount(), "gpus": []}
        for i in range(out["device_count"]):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            g = {"index": i, "name": _s(pynvml.nvmlDeviceGetName(h)),
                 "uuid": _s(pynvml.nvmlDeviceGetUUID(h)),
                 "pci_bus_id": _try(lambda: _s(pynvml.nvmlDeviceGetPciInfo(h).busId)),
                 "compute_capability": _try(lambda: list(pynvml.nvmlDeviceGetCudaComputeCapability(h))),
                 "memory_total": mem.total, "memory_used": mem.used, "memory_free": mem.free}
            try:  # v2 adds "reserved" (driver-reserved memory) on newer drivers
                m2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
                g["memory_v2"] = {"total": m2.total, "reserved": m2.reserved, "used": m2.used, "free": m2.free}
            except Exception as exc:  # noqa: BLE001
                g["memory_v2"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
            mig = _try(pynvml.nvmlDeviceGetMigMode, h)
            g["mig_mode"] = list(mig) if isinstance(mig, (list, tuple)) else mig  # [current, pending]
            g["compute_mode"] = _try(pynvml.nvmlDeviceGetComputeMode, h)
            g["persistence_mode"] = _try(pynvml.nvmlDeviceGetPersistenceMode, h)
            for key, fn in (("compute_processes", pynvml.nvmlDeviceGetComputeRunningProcesses),
                            ("graphics_processes", pynvml.nvmlDeviceGetGraphicsRunningProcesses)):
                procs = _try(fn, h)
                if isinstance(procs, list):
                    procs = [{"pid": p.pid, "used_memory": p.usedGpuMemory, "name": _comm(p.pid)} for p in procs]
                g[key] = procs
            out["gpus"].append(g)
        return out
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def _child(code: str, env_changes: dict, *args: str, timeout: float = 120) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SELECTION_VARS or k == "NVIDIA_VISIBLE_DEVICES"}
    for k, v in env_changes.items():
        if v is UNSET:
            env.pop(k, None)
        else:
            env[k] = v
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %s s" % timeout}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    try:
        out = json.loads(lines[-1]) if lines else {}
    except ValueError:
        out = {}
    out["exit_code"] = p.returncode
    out["wall_seconds"] = round(time.perf_counter() - t, 3)
    if p.returncode != 0 or not lines:
        out["stderr_tail"] = p.stderr[-1500:]
    return out


def selections(uuid: str | None) -> list[tuple[str, dict]]:
    sel = [("CUDA_VISIBLE_DEVICES unset", {"CUDA_VISIBLE_DEVICES": UNSET}),
           ("CUDA_VISIBLE_DEVICES=0", {"CUDA_VISIBLE_DEVICES": "0"})]
    if uuid:
        sel += [("CUDA_VISIBLE_DEVICES=<full uuid>", {"CUDA_VISIBLE_DEVICES": uuid}),
                ("CUDA_VISIBLE_DEVICES=<uuid prefix GPU-xxxxxxxx>", {"CUDA_VISIBLE_DEVICES": uuid[:12]}),
                ("CUDA_VISIBLE_DEVICES=<uuid without GPU->", {"CUDA_VISIBLE_DEVICES": uuid[4:]})]
    sel += [("CUDA_VISIBLE_DEVICES=GPU-ffffffff (no such uuid)", {"CUDA_VISIBLE_DEVICES": "GPU-ffffffff"}),
            ("CUDA_VISIBLE_DEVICES=0,0", {"CUDA_VISIBLE_DEVICES": "0,0"}),
            ("CUDA_VISIBLE_DEVICES=1 (out of range)", {"CUDA_VISIBLE_DEVICES": "1"}),
            ("CUDA_VISIBLE_DEVICES=0,1", {"CUDA_VISIBLE_DEVICES": "0,1"}),
            ("CUDA_VISIBLE_DEVICES=1,0", {"CUDA_VISIBLE_DEVICES": "1,0"}),
            ("CUDA_VISIBLE_DEVICES=-1", {"CUDA_VISIBLE_DEVICES": "-1"}),
            ("CUDA_VISIBLE_DEVICES= (empty)", {"CUDA_VISIBLE_DEVICES": ""}),
            ("CUDA_VISIBLE_DEVICES=abc", {"CUDA_VISIBLE_DEVICES": "abc"}),
            ("CUDA_VISIBLE_DEVICES=0,abc,1", {"CUDA_VISIBLE_DEVICES": "0,abc,1"}),
            ("CUDA_VISIBLE_DEVICES=' 0 ' (spaces)", {"CUDA_VISIBLE_DEVICES": " 0 "}),
            ("CUDA_DEVICE_ORDER=PCI_BUS_ID", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}),
            ("NVIDIA_VISIBLE_DEVICES=none", {"NVIDIA_VISIBLE_DEVICES": "none"}),
            ("ROCR_VISIBLE_DEVICES=1", {"ROCR_VISIBLE_DEVICES": "1"}),
            ("HIP_VISIBLE_DEVICES=1", {"HIP_VISIBLE_DEVICES": "1"}),
            ("HIP_VISIBLE_DEVICES=1 + CUDA_VISIBLE_DEVICES=0", {"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0"})]
    return sel


def record_selection(label: str, changes: dict, with_torch: bool) -> dict:
    out = {"label": label, "env": {k: v for k, v in changes.items()}, "driver": _child(DRIVER_CHILD, changes)}
    if with_torch:
        out["torch"] = _child(TORCH_CHILD, changes)
    return out


def record_held(gib: float, with_torch: bool) -> dict:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER_CHILD, str(gib)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"})
    try:
        line = holder.stdout.readline().strip()
        out = {"hold_gib": gib, "holder_pid": holder.pid, "holder_ready": line == "ready"}
        if line != "ready":
            holder.kill()
            out["holder_stderr"] = holder.stderr.read()[-1500:]
            return out
        out["nvml"] = nvml_view()
        out["driver"] = _child(DRIVER_CHILD, {"CUDA_VISIBLE_DEVICES": UNSET}, "mem")
        if with_torch:
            out["torch"] = _child(TORCH_CHILD, {"CUDA_VISIBLE_DEVICES": UNSET}, "mem")
        out["nvml_after_children"] = nvml_view()
        return out
    finally:
        if holder.poll() is None:
            holder.stdin.close()
            try:
                holder.wait(timeout=30)
            except subprocess.TimeoutExpired:
                holder.kill()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--hold-gib", type=float, default=20.0, help="GiB a background child holds (0: skip)")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch subprocesses")
    ap.add_argument("--jobs", type=int, default=8, help="selections recorded in parallel")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    with_torch = not a.no_torch
    doc = {"recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
           "host": {"hostname": socket.gethostname(), "platform": platform.platform(),
                    "python": sys.version.split()[0], "cpu_count": os.cpu_count()},
           "inherited_env": {k: os.environ.get(k) for k in SELECTION_VARS},
           "nvml": nvml_view()}
    uuid = None
    gpus = doc["nvml"].get("gpus") or []
    if gpus:
        uuid = gpus[0]["uuid"]
    else:
        base = _child(DRIVER_CHILD, {"CUDA_VISIBLE_DEVICES": UNSET})
        uuid = ((base.get("devices") or [{}])[0]).get("uuid")
    doc["uuid_used"] = uuid
    sels = selections(uuid)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        futs = [ex.submit(record_selection, label, ch, with_torch) for label, ch in sels]
        doc["selections"] = [f.result() for f in futs]
    if a.hold_gib > 0:
        doc["held"] = record_held(a.hold_gib, with_torch)
    doc["nvml_end"] = nvml_view()
    doc["seconds"] = round(time.perf_counter() - t0, 2)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    print(summary(doc))
    return 0


def summary(doc: dict) -> str:
    rows = ["%-52s %-10s %-6s %-14s %-8s %-6s %s" % ("selection", "cuInit", "count", "devices (cc)", "torch", "nvml", "torch arch list")]
    for s in doc["selections"]:
        d, t = s["driver"], s.get("torch") or {}
        devs = ",".join("%s(%s)" % ((x.get("uuid") or "?")[:12], ".".join(map(str, x.get("compute_capability") or [])))
                        for x in d.get("devices") or [])
        arch = t.get("get_arch_list")
        rows.append("%-52s %-10s %-6s %-14s %-8s %-6s %s" % (
            s["label"][:52], (d.get("cuInit") or {}).get("name"), (d.get("cuDeviceGetCount") or {}).get("count"),
            devs or "-", t.get("device_count"), d.get("nvml_device_count"),
            (",".join(arch) if isinstance(arch, list) else arch)))
    rows.append("total %.1f s" % doc["seconds"])
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
