"""GPUs as NVML sees them, against torch's CUDA build."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import make
from doctor.rules import rule
from doctor.rules.common import classify, human_bytes
from doctor.rules.registry import cannot_look


def no_gpu_expected(ctx) -> str | None:
    return "turned off by --no-gpu (no GPU expected here)" if getattr(ctx, "no_gpu", False) else None


def _gpus(facts) -> list[dict]:
    """The GPUs NVML reports; a rule that needs them cannot look without them."""
    gpu = facts["gpu"]
    if not (gpu.get("available") and gpu.get("gpus")):
        raise cannot_look("gpu", f"no GPU to look at ({gpu.get('reason') or 'NVML found 0 GPUs'})")
    return gpu["gpus"]


def _ext_driver_evidence(facts) -> list[str]:
    out = []
    for name, ext in (facts.get("extensions") or {}).items():
        if isinstance(ext, dict) and not ext.get("ok") and classify(ext.get("message", "")) == "gpu.required-at-import":
            out.append(f"{name}: {ext.get('message')}")
    return out


@rule("an NVIDIA GPU is usable", "gpu", needs=("gpu",), applies=no_gpu_expected)
def none(facts, ctx):
    gpu = facts["gpu"]
    if gpu.get("available") and gpu.get("gpus"):
        return
    reason = gpu.get("reason") or "NVML found 0 GPUs"
    yield make("gpu.none", [reason] + _ext_driver_evidence(facts), reason=reason, python=ctx.python)


def _cuda_tuple(v) -> tuple[int, int] | None:
    try:
        if isinstance(v, int):  # NVML: major*1000 + minor*10
            return v // 1000, (v % 1000) // 10
        major, minor = str(v).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, TypeError):
        return None


@rule("the driver supports torch's CUDA", "gpu", needs=("gpu",), applies=no_gpu_expected)
def driver_too_old(facts, ctx):
    _gpus(facts)
    gpu = facts["gpu"]
    drv = _cuda_tuple(gpu.get("cuda_driver_version"))
    built = _cuda_tuple((gpu.get("torch") or {}).get("cuda"))
    if drv and built and drv < built:
        yield make("gpu.driver-too-old",
                   [f"NVML: driver {gpu.get('driver_version')} supports CUDA {drv[0]}.{drv[1]}",
                    f"torch {gpu['torch'].get('version')}: torch.version.cuda = {gpu['torch'].get('cuda')}"],
                   driver_cuda=f"{drv[0]}.{drv[1]}", torch_cuda=gpu["torch"].get("cuda"), python=ctx.python)


@rule("GPUs support bfloat16", "gpu", needs=("gpu",), applies=no_gpu_expected)
def bf16(facts, ctx):
    need = tuple(knowledge.load("system")["gpu"]["min_compute_capability_bf16"])
    for g in _gpus(facts):
        cc = tuple(g.get("compute_capability") or ())
        if cc and cc < need:
            ev = f"GPU {g.get('index')} {g.get('name', '?')}: compute capability {cc[0]}.{cc[1]} < {need[0]}.{need[1]}"
            yield make("gpu.bf16-unsupported", [ev],
                       index=g.get("index"), name=g.get("name", "?"), cc=f"{cc[0]}.{cc[1]}", python=ctx.python)


@rule("no other process holds GPU memory", "gpu", needs=("gpu",), applies=no_gpu_expected)
def memory_held(facts, ctx):
    # Processes, not memory_used: NVML counts ~600 MB of driver-reserved memory as used even on an
    # idle GPU (fixtures/h200).
    me = facts["gpu"].get("doctor_pid")
    for g in _gpus(facts):
        procs = [p for p in g.get("compute_processes") or [] if p.get("pid") != me]
        if procs:
            held = sum(p.get("used_memory") or 0 for p in procs)
            yield make("gpu.memory-held",
                       [f"GPU {g['index']}: pid {p['pid']} ({p.get('name') or '?'}) holds {human_bytes(p.get('used_memory') or 0)}" for p in procs],  # noqa: E501
                       held=human_bytes(held), index=g["index"], python=ctx.python)
