"""GPUs as NVML sees them, against the CUDA of torch and the NVIDIA wheels, and the libcuda a job loads."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import make
from doctor.rules.config import get
from doctor.rules.registry import rule
from doctor.dists import installed
from doctor.facts import GpuFacts
from doctor.signatures import classify
from doctor.units import human_bytes
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


@rule("an NVIDIA GPU is usable", "gpu", needs=("gpu",), applies=no_gpu_expected, emits=("gpu.none",))
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


def _version(v: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in str(v).split("."))
    except ValueError:
        return ()


def wheel_cudas(facts) -> list[tuple[str, str, tuple[int, int]]]:
    """(what, version, CUDA major.minor) for torch's build and each NVIDIA wheel whose version is
    the CUDA toolkit's (knowledge/system.yaml gpu.cuda_versioned_wheels): the CUDA a job runs."""
    out = []
    torch = (facts["gpu"].get("torch") or {})
    built = _cuda_tuple(torch.get("cuda"))
    if built:
        out.append((f"torch {torch.get('version')} (torch.version.cuda)", str(torch.get("cuda")), built))
    for dist in knowledge.load("system")["gpu"]["cuda_versioned_wheels"]:
        v = installed(facts, dist)
        t = _cuda_tuple(v) if v else None
        if t:
            out.append((f"{dist} {v}", str(v), t))
    return out


def min_driver(cuda: tuple[int, int]) -> str | None:
    """The minimum Linux driver of a CUDA release (its release notes' table), or None if unknown."""
    table = knowledge.load("system")["gpu"]["min_driver_for_cuda"]
    return table.get(f"{cuda[0]}.{cuda[1]}")


@rule("the driver supports the CUDA of torch and of each NVIDIA wheel", "gpu", needs=("gpu",), applies=no_gpu_expected,
    emits=("gpu.driver-older-minor", "gpu.driver-too-old"))
def driver_too_old(facts, ctx):
    _gpus(facts)
    gpu = facts["gpu"]
    drv = _cuda_tuple(gpu.get("cuda_driver_version"))
    if not drv:
        raise cannot_look("gpu", "NVML did not report the driver's CUDA version")
    newer = [(what, v, t) for what, v, t in wheel_cudas(facts) if t > drv]
    head = f"NVML: driver {gpu.get('driver_version')} supports CUDA {drv[0]}.{drv[1]}"
    major = [w for w in newer if w[2][0] > drv[0]]
    if major:  # another CUDA major: the runtime refuses to start ("driver too old")
        need = max(w[2] for w in major)
        yield make("gpu.driver-too-old", [head] + [f"{what}: CUDA {t[0]}.{t[1]}" for what, _, t in major],
                   driver_cuda=f"{drv[0]}.{drv[1]}", torch_cuda=f"{need[0]}.{need[1]}",
                   min_driver=min_driver(need) or "the one its release notes name", python=ctx.python)
    minor = [w for w in newer if w[2][0] == drv[0]]
    if minor:  # same major: minor-version compatibility runs them, PTX from the newer toolchain does not load
        need = max(w[2] for w in minor)
        yield make("gpu.driver-older-minor",
                   [head] + [f"{what}: CUDA {t[0]}.{t[1]}" for what, _, t in minor],
                   driver_cuda=f"{drv[0]}.{drv[1]}", wheel_cuda=f"{need[0]}.{need[1]}",
                   wheels=", ".join(what.split(" (")[0] for what, _, _ in minor),
                   min_driver=min_driver(need) or "the one its release notes name")


def _without(ld_path: str | None, directory: str) -> str:
    keep = [d for d in (ld_path or "").split(":") if d and d.rstrip("/") != directory.rstrip("/")]
    return ":".join(keep)


@rule("a CUDA process loads the kernel driver's own libcuda", "gpu", needs=("gpu",), applies=no_gpu_expected,
    emits=("gpu.libcuda-compat-older", "gpu.libcuda-forward-compat", "gpu.libcuda-missing", "gpu.libcuda-userspace-mismatch"))
def libcuda_matches_kernel(facts, ctx):
    lib = facts["gpu"].get("libcuda")
    if not isinstance(lib, dict):
        raise cannot_look("gpu", "no libcuda facts (recorded by an older doctor)")
    kernel = lib.get("kernel_module")
    if not kernel:
        raise cannot_look("gpu", "no NVIDIA kernel module is loaded (/proc/driver/nvidia/version)")
    found = lib.get("candidates") or []
    ev = [f"kernel module: {lib.get('kernel_module_line') or kernel}"]
    ev += [f"libcuda.so.1 via {c['found_by']}: {c['path']} → {c['real']}" + (" (forward-compatibility copy)" if c.get("compat") else "")
           for c in found]
    sel = lib.get("selected")
    if not sel:
        yield make("gpu.libcuda-missing", ev + ["no libcuda.so.1 in LD_LIBRARY_PATH, the loader's cache or /usr/lib*"],
                   kernel=kernel)
        return
    if sel.get("version") == kernel:
        return
    own = next((c for c in found if c.get("version") == kernel), None)
    fixed = _without(lib.get("ld_library_path"), str(sel["path"]).rsplit("/", 1)[0])
    params = dict(version=sel.get("version") or "?", path=sel["path"], kernel=kernel,
                  own=own["path"] if own else f"none (install the user-space driver {kernel})",
                  ld_fix=f"export LD_LIBRARY_PATH={fixed}" if sel.get("found_by") == "LD_LIBRARY_PATH" else
                  f"# {sel['path']} comes from the loader's cache: remove that copy or its ld.so.conf entry")
    if sel.get("compat") and _version(sel.get("version")) > _version(kernel):
        yield make("gpu.libcuda-forward-compat", ev, **params)  # may work: data-center GPUs, supported branches
    elif sel.get("compat"):
        yield make("gpu.libcuda-compat-older", ev, **params)
    else:
        yield make("gpu.libcuda-userspace-mismatch", ev, **params)


@rule("GPUs support bfloat16", "gpu", needs=("gpu",), applies=no_gpu_expected, emits=("gpu.bf16-unsupported",))
def bf16(facts, ctx):
    need = tuple(knowledge.load("system")["gpu"]["min_compute_capability_bf16"])
    for g in _gpus(facts):
        cc = tuple(g.get("compute_capability") or ())
        if cc and cc < need:
            ev = f"GPU {g.get('index')} {g.get('name', '?')}: compute capability {cc[0]}.{cc[1]} < {need[0]}.{need[1]}"
            yield make("gpu.bf16-unsupported", [ev],
                       index=g.get("index"), name=g.get("name", "?"), cc=f"{cc[0]}.{cc[1]}", python=ctx.python)


@rule("no other process holds GPU memory", "gpu", needs=("gpu",), applies=no_gpu_expected, emits=("gpu.memory-held",))
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


# -- the job's view: CUDA_VISIBLE_DEVICES as the CUDA driver applies it -----------------------------

def select_devices(value: str | None, gpus: list[dict]) -> dict:
    """The GPUs a CUDA process gets for CUDA_VISIBLE_DEVICES=value, given NVML's GPUs (PCI order).

    As the driver parses it (recorded on an H200, tests/data/gpu/h200-device-selection.json): unset
    means all; entries are read left to right, each an index or a GPU-/MIG- UUID (prefix); the first
    entry that is not a valid device ends the list (what follows is ignored); a device named twice
    makes cuInit fail (no device at all); '', '-1' and garbage select nothing."""
    if value is None:
        return {"devices": list(gpus), "kind": "all", "ignored": []}
    chosen: list[dict] = []
    tokens = [t.strip() for t in value.split(",")]
    for i, tok in enumerate(tokens):
        dev = None
        if tok.isdigit() and int(tok) < len(gpus):
            dev = gpus[int(tok)]
        elif tok.startswith("GPU-"):
            hits = [g for g in gpus if str(g.get("uuid") or "").startswith(tok)]
            dev = hits[0] if len(hits) == 1 else None
        elif tok.startswith("MIG-"):
            hits = [g for g in gpus if tok in (g.get("mig_uuids") or [])]
            dev = hits[0] if hits else None
        if dev is None:
            ignored = tokens[i:]
            kind = "empty" if not chosen else "truncated"
            return {"devices": chosen, "kind": kind, "ignored": ignored, "stopped_at": tok}
        if any(d is dev for d in chosen):
            return {"devices": [], "kind": "duplicate", "ignored": tokens, "duplicate": tok}
        chosen.append(dev)
    return {"devices": chosen, "kind": "selected", "ignored": []}


def job_selection(facts) -> dict:
    env = facts.get("environment") or {}
    return select_devices(env.get("CUDA_VISIBLE_DEVICES"), facts["gpu"].get("gpus") or [])


def _name_of(g: dict) -> str:
    return f"GPU {g.get('index')} {g.get('name', '?')}"


@rule("CUDA_VISIBLE_DEVICES selects the GPUs meant", "gpu", needs=("gpu",), applies=no_gpu_expected,
    emits=("gpu.device-order", "gpu.selection-duplicate", "gpu.selection-empty", "gpu.selection-truncated"))
def device_selection(facts, ctx):
    gpus = _gpus(facts)
    env = facts.get("environment") or {}
    value = env.get("CUDA_VISIBLE_DEVICES")
    sel = select_devices(value, gpus)
    if sel["kind"] in ("all", "selected"):
        if len(gpus) > 1 and len({g.get("name") for g in gpus}) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            yield make("gpu.device-order", [f"NVML (nvidia-smi) order: {', '.join(_name_of(g) for g in gpus)}",
                                            f"CUDA_DEVICE_ORDER={env.get('CUDA_DEVICE_ORDER') or '(unset: FASTEST_FIRST)'}"],
                       python=ctx.python)
        return
    shown = f"CUDA_VISIBLE_DEVICES={value!r}"
    nvml = f"NVML sees {len(gpus)} GPU(s): " + ", ".join(f"{g.get('index')} ({g.get('uuid') or '?'})" for g in gpus)
    if sel["kind"] == "duplicate":
        yield make("gpu.selection-duplicate", [shown, f"{sel['duplicate']!r} names a GPU already selected", nvml],
                   value=value, python=ctx.python)
    elif sel["kind"] == "empty":
        yield make("gpu.selection-empty", [shown, f"{sel['stopped_at']!r} is not a GPU index or UUID here", nvml],
                   value=value, entry=sel["stopped_at"], count=len(gpus), python=ctx.python)
    else:
        yield make("gpu.selection-truncated",
                   [shown, f"the job gets {', '.join(_name_of(g) for g in sel['devices'])}",
                    f"{sel['stopped_at']!r} is not a GPU index or UUID here: {', '.join(sel['ignored'])} ignored", nvml],
                   value=value, entry=sel["stopped_at"], got=len(sel["devices"]), python=ctx.python)


def _cc(g: dict) -> tuple[int, int] | None:
    cc = g.get("compute_capability")
    return (int(cc[0]), int(cc[1])) if cc and len(cc) == 2 else None


def kernel_support(lib: dict, cc: tuple[int, int]) -> str:
    """'cubin' (native code runs), 'ptx' (the driver must JIT-compile PTX), or 'none' — CUDA's
    compatibility rules: a cubin for sm_XY runs on X.Z with Z >= Y; sm_XYa only on X.Y; sm_XYf on
    the X family from X.Y; PTX for compute_XY is JIT-compiled for any newer GPU."""
    sm = cc[0] * 10 + cc[1]
    exact_only = {int(v[3:-1]) for v in lib.get("variants", []) if v.startswith("sm_") and v.endswith("a")}
    for arch in lib.get("sm", []):
        major, minor = divmod(arch, 10)
        if arch == sm or (major == cc[0] and minor <= cc[1] and arch not in exact_only):
            return "cubin"
    if any(p <= sm for p in lib.get("ptx", [])):
        return "ptx"
    return "none"


def _arch_list(lib: dict) -> str:
    sm = " ".join(f"sm_{a}" for a in lib.get("sm", [])) or "no cubins"
    ptx = " ".join(f"compute_{a}" for a in lib.get("ptx", []))
    return sm + (f", PTX {ptx}" if ptx else ", no PTX")


@rule("the compiled kernels cover the job's GPUs", "gpu", needs=("gpu", "kernels"), applies=no_gpu_expected,
    emits=("gpu.kernels-jit", "gpu.no-kernel-image"))
def kernels_for_gpus(facts, ctx):
    sel = job_selection(facts)
    gpus = [g for g in sel["devices"] if _cc(g)] if _gpus(facts) else []
    if not gpus:
        raise cannot_look("gpu", "the job selects no GPU (see CUDA_VISIBLE_DEVICES)")
    libs = {k: v for k, v in (facts["kernels"].get("libraries") or {}).items() if v.get("entries")}
    missing, jit = [], []
    for g in gpus:
        cc = _cc(g)
        assert cc is not None
        for rel, lib in sorted(libs.items()):
            how = kernel_support(lib, cc)
            line = f"{rel} ({lib.get('dist')} {lib.get('version')}): {_arch_list(lib)}; {_name_of(g)} is sm_{cc[0]}{cc[1]}"
            if how == "none":
                missing.append((rel, lib, cc, line))
            elif how == "ptx":
                jit.append(line)
    if missing:
        rel, lib, cc, _ = missing[0]
        yield make("gpu.no-kernel-image", [m[3] for m in missing],
                   library=f"{rel} ({lib.get('dist')} {lib.get('version')})", arch=f"sm_{cc[0]}{cc[1]}",
                   python=ctx.python)
    elif jit:
        yield make("gpu.kernels-jit", jit, python=ctx.python)


@rule("FlashAttention-2 supports the job's GPUs", "attention", needs=("gpu",), requires=("flash-attn",),
      applies=no_gpu_expected, emits=("gpu.flash-attn-unsupported-arch",))
def flash_attn_arch(facts, ctx):
    need = tuple(knowledge.load("system")["gpu"]["min_compute_capability_flash_attn"])
    _gpus(facts)
    for g in job_selection(facts)["devices"]:
        cc = _cc(g)
        if cc and cc < need:
            yield make("gpu.flash-attn-unsupported-arch",
                       [f"{_name_of(g)}: compute capability {cc[0]}.{cc[1]} < {need[0]}.{need[1]}"],
                       name=g.get("name", "?"), cc=f"{cc[0]}.{cc[1]}", python=ctx.python)


GIB = 1024 ** 3


def job_world(config: dict | None, hw: dict) -> tuple[int, str]:
    """How many GPUs the run asks for: trainer.n_gpus_per_node × trainer.nnodes of the composed
    config (what verl's ResourcePoolManager requests from Ray), else the recipe's hardware."""
    n, nodes = get(config, "trainer.n_gpus_per_node"), get(config, "trainer.nnodes")
    if isinstance(n, int) and isinstance(nodes, int):
        return n * nodes, f"trainer.n_gpus_per_node={n} × trainer.nnodes={nodes}"
    return hw["gpus"], "the recipe's hardware.gpus"


def recipe_gpus(gpu: GpuFacts | dict, environ: dict, hw: dict, recipe: str, config: dict | None) -> tuple[list, str]:
    """Whether the GPUs the job will see (CUDA_VISIBLE_DEVICES applied) are enough for the recipe:
    ([gpu.too-few-for-recipe] or [], what the job sees). One mechanism for `recipes run`'s preflight
    and `doctor check --recipe`."""
    need, how = job_world(config, hw)
    min_gib = hw.get("min_memory_gib", 0)
    alt = " (or a recipe for fewer GPUs: recipes list)" if need > 1 else ""
    params = dict(recipe=recipe, need=need, how=how, min_gib=min_gib, alt=alt)
    if not gpu or not gpu.get("available"):
        why = (gpu or {}).get("reason") or "NVML unavailable"
        return [make("gpu.too-few-for-recipe", [f"NVML: {why}"], found=f"this machine has no usable NVIDIA GPU ({why})",
                     **params)], "no GPU"
    sel = select_devices(environ.get("CUDA_VISIBLE_DEVICES"), gpu.get("gpus") or [])
    gpus = sel["devices"]
    leaves = "" if sel["kind"] in ("all", "selected") else \
        f"CUDA_VISIBLE_DEVICES={environ.get('CUDA_VISIBLE_DEVICES')!r} leaves the job {len(gpus)}; "
    big = [g for g in gpus if g.get("memory_total", 0) >= min_gib * GIB]
    have = ", ".join(f"{g.get('index')}: {g.get('name')} {g.get('memory_total', 0) / GIB:.0f} GiB" for g in gpus)
    if len(big) < need:
        ev = [f"the job's GPUs: {have or 'none'}"] + ([f"CUDA_VISIBLE_DEVICES={environ.get('CUDA_VISIBLE_DEVICES')!r}"]
                                                      if "CUDA_VISIBLE_DEVICES" in environ else [])
        return [make("gpu.too-few-for-recipe", ev, found=f"{leaves}found {len(gpus)} ({have or 'none'}), "
                     f"{len(big)} large enough", **params)], have
    busy = [g for g in big if g.get("compute_processes")]
    note = f"; {len(busy)} already run compute processes" if busy else ""
    return [], f"{len(big)} GPU(s) ≥ {min_gib} GiB ({have}){note}"


@rule("enough GPUs for the recipe", "gpu", needs=("recipe", "gpu"), applies=no_gpu_expected, only_with="recipe",
      emits=("gpu.too-few-for-recipe",))
def recipe_gpu_count(facts, ctx):
    """`doctor check --recipe`: the GPUs the job will see against what the recipe's composed config
    asks for (trainer.n_gpus_per_node × nnodes), else its hardware."""
    gpu = facts["gpu"]
    if not gpu.get("available"):  # gpu.none says it once
        raise cannot_look("gpu", f"no GPU to look at ({gpu.get('reason')})")
    recipe = facts["recipe"]
    config = (dict.get(facts, "recipe_config") or {}).get("config")  # a config that did not compose: the hardware
    findings, _ = recipe_gpus(gpu, facts.get("environment") or {}, recipe["hardware"], recipe["name"], config)
    return findings


@rule("the GPU memory the rollout will claim is free", "gpu", needs=("recipe", "gpu", "recipe_config"),
      applies=no_gpu_expected, only_with="recipe", emits=("gpu.memory-short-for-rollout",))
def recipe_gpu_memory(facts, ctx):
    """vLLM sizes its KV cache as gpu_memory_utilization × the card's *total* memory minus what its own
    worker allocated (vllm 0.6.3 worker.py determine_num_available_blocks: init free − free now):
    memory another process held before the worker started is not subtracted, so the cache cannot fit
    when free < utilization × total (CUDA OOM, or "No available memory for the cache blocks")."""
    gpu = facts["gpu"]
    if not gpu.get("available"):  # gpu.none says it once
        raise cannot_look("gpu", f"no GPU to look at ({gpu.get('reason')})")
    config = facts["recipe_config"].get("config")
    util = get(config, "actor_rollout_ref.rollout.gpu_memory_utilization")
    if not isinstance(util, (int, float)) or not 0 < util <= 1:
        raise cannot_look("recipe_config", "no usable actor_rollout_ref.rollout.gpu_memory_utilization in the composed "
                                           "config (config.gpu-memory-utilization says why)")
    need, _ = job_world(config, facts["recipe"]["hardware"])
    for g in job_selection(facts)["devices"][:need]:
        total, used = g.get("memory_total") or 0, g.get("memory_used") or 0
        if not total:
            continue
        claim, free = util * total, total - used
        if claim <= free:
            continue
        procs = sorted(g.get("compute_processes") or [], key=lambda p: -(p.get("used_memory") or 0))
        holders = ", ".join(f"pid {p.get('pid')} {p.get('name') or '?'} {(p.get('used_memory') or 0) / GIB:.1f} GiB"
                            for p in procs) or "no compute process NVML can name (another container's, or the driver's)"
        fits = max(0.0, (free / total) - 0.05)  # what would fit now, with 5 % of the card as margin
        yield make("gpu.memory-short-for-rollout",
                   [f"{_name_of(g)}: {total / GIB:.1f} GiB, {used / GIB:.1f} GiB in use, {free / GIB:.1f} GiB free",
                    f"vLLM will claim gpu_memory_utilization={util} × {total / GIB:.1f} GiB = {claim / GIB:.1f} GiB for its "
                    "weights and KV cache (vllm/worker/worker.py: total × utilization − its own peak)",
                    f"held by: {holders}"],
                   index=g.get("index"), claim=f"{claim / GIB:.1f} GiB", free=f"{free / GIB:.1f} GiB", util=util,
                   fits=f"{fits:.2f}")
