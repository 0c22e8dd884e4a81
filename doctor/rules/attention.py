"""Attention kernels: flash-attn (needed by verl on GPU) and xformers (pinned by vLLM)."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import make
from doctor.rules.registry import rule
from doctor.dists import installed
from doctor.signatures import classify
from doctor.rules.registry import cannot_look
from doctor.findings import definition


def _wheel_url(facts, ctx) -> str:
    """The stack's flash-attn wheel for the target's Python, only when it is built for the installed
    torch (a torch 2.4 wheel is no advice for torch 2.11); else the bare name."""
    stack = ctx.chosen.stack or {}
    wheels = (stack.get("flash_attn") or {}).get("wheels", {})
    have, pinned = installed(facts, "torch"), knowledge.stack_pins(stack).get("torch") if stack else None
    if have and pinned and have.split("+")[0].split(".")[:2] != pinned.split(".")[:2]:
        return "flash-attn"
    return (wheels.get(facts["markers"]["python_version"]) or {}).get("url", "flash-attn")


def _wheel_params(facts, ctx) -> dict:
    """The wheel the stack names for the target's Python, and the torch it must match (the installed one)."""
    stack = ctx.chosen.stack
    torch = (installed(facts, "torch") or (knowledge.stack_pins(stack).get("torch") if stack else None) or "?")
    return {"wheel_url": _wheel_url(facts, ctx), "torch_mm": ".".join(torch.split("+")[0].split(".")[:2]),
            "py": facts["markers"]["python_version"]}


def _has_gpu(facts, ctx) -> bool:
    gpu = facts["gpu"]
    return bool(gpu.get("available") and gpu.get("gpus")) and not getattr(ctx, "no_gpu", False)


@rule("flash-attn is installed", "attention", needs=("distributions",), emits=("flash-attn.missing",))
def flash_attn_missing(facts, ctx):
    if installed(facts, "flash-attn"):
        return
    spec = definition("flash-attn.missing")
    assert spec is not None, "flash-attn.missing has no entry in knowledge/findings.yaml"
    severity = spec["severity"] if _has_gpu(facts, ctx) else spec.get("severity_without_gpu", spec["severity"])
    evidence = ["no flash-attn distribution installed"]
    if not _has_gpu(facts, ctx):
        evidence.append("no GPU here: reported as a warning; on a GPU node verl needs it")
    yield make("flash-attn.missing", evidence, severity=severity, python=ctx.python, **_wheel_params(facts, ctx))


def _abi_rule(ext_name: str, finding_id: str):
    def check(facts, ctx):
        ext = facts["extensions"].get(ext_name) or {}
        if not ext.get("present") or ext.get("ok"):
            return
        msg = ext.get("message", "")
        if "undefined symbol" in msg:
            yield make(finding_id, [f"{ext.get('path')}: {msg}"], message=msg, python=ctx.python,
                       **_wheel_params(facts, ctx))
        elif classify(msg) == "gpu.required-at-import":  # no driver here: it could not load, so not judged
            raise cannot_look("extensions", f"{ext_name} needs the NVIDIA driver to load ({msg})")
        else:
            yield make("import.failed", [f"load {ext_name}: {msg}"], module=ext_name, exc_type=ext.get("type"),
                       dist=ext_name.split(".")[0].replace("_2_cuda", ""), python=ctx.python)
    return check


rule("flash_attn_2_cuda loads against this torch", "attention", needs=("extensions",), requires=("flash-attn",),
     emits=("flash-attn.abi-mismatch", "import.failed"))(
    _abi_rule("flash_attn_2_cuda", "flash-attn.abi-mismatch"))
rule("xformers._C loads against this torch", "attention", needs=("extensions",), requires=("xformers",),
     emits=("xformers.abi-mismatch", "import.failed"))(
    _abi_rule("xformers._C", "xformers.abi-mismatch"))
