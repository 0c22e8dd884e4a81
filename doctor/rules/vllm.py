"""vLLM's own machinery: its tokenizer wrapper, its model registry child, its compiled kernels."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import make
from doctor.rules.registry import rule
from doctor.rules.registry import cannot_look
from doctor.dists import installed
from doctor.failure import model
from doctor.signatures import cause_of, classify


@rule("vLLM's tokenizer wrapper works with transformers", "vllm", needs=("imports",), requires=("vllm", "transformers"),
    emits=("vllm.tokenizer-incompatible",))
def tokenizer(facts, ctx):
    check = (facts["imports"].get("checks") or {}).get("vllm_tokenizer")
    if check is None:  # the probe exercises it only after vllm and transformers imported
        raise cannot_look("imports", "vllm or transformers did not import, so vLLM's tokenizer wrapper never ran")
    if check.get("skipped"):
        raise cannot_look("imports", check["skipped"])
    if not check.get("ok"):
        chain = check.get("chain") or []
        yield make("vllm.tokenizer-incompatible",
                   [f"vllm.transformers_utils.tokenizer.get_cached_tokenizer(): {check.get('message')}"]
                   + ([f"raised at {chain[-1]}"] if chain else []),
                   transformers=installed(facts, "transformers") or "?", python=ctx.python)


@rule("vLLM can inspect Qwen2ForCausalLM", "vllm", needs=("registry",), requires=("vllm",),
      emits=("vllm.qwen2-not-inspectable", "signature:log"))
def qwen2(facts, ctx):
    reg = facts["registry"]
    if not reg.get("ran"):
        raise cannot_look("registry", f"vLLM's registry child did not run ({reg.get('reason') or 'see the registry facts'})")
    if reg.get("ok"):
        return
    tail = reg.get("stderr_tail") or []
    evidence = [f"`{' '.join(reg.get('command', []))}` exited {reg.get('returncode')}"]
    # the child's traceback read by the same failure model as a log's: root exception, raising frame, owner
    evidence += model(tail, list(range(len(tail)))).describe() or ["  " + line for line in tail[-4:]]
    surfaced = make("vllm.qwen2-not-inspectable", evidence, python=ctx.python)
    cause = cause_of("\n".join(tail), ctx.python, facts)
    if cause is not None:  # the same signature table as the imports and the logs
        surfaced.caused_by = cause.id
        yield cause
    yield surfaced


@rule("vllm._C loads", "vllm", needs=("extensions",), requires=("vllm",), emits=("vllm.c-extension-broken",))
def c_extension(facts, ctx):
    ext = facts["extensions"].get("vllm._C") or {}
    if not ext.get("present") or ext.get("ok"):
        return
    msg = ext.get("message", "")
    if classify(msg) == "gpu.required-at-import":  # no driver here: it could not load, so not judged
        raise cannot_look("extensions", f"vllm._C needs the NVIDIA driver to load ({msg})")
    stack = ctx.chosen.stack
    torch = (knowledge.stack_pins(stack).get("torch") if stack else None) or installed(facts, "torch") or "?"
    yield make("vllm.c-extension-broken", [f"{ext.get('path')}: {msg}"], message=msg,
               vllm=installed(facts, "vllm") or "?", torch=torch, python=ctx.python)
