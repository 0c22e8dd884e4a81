"""Config rules: pure functions on a verl config composed by the *installed* verl's own Hydra config
(doctor/recipes/scripts/compose.py), the `recipe_config` fact. They are rules of the one registry,
in scope only when a check has that fact (`doctor check --recipe`, `recipes lint`, the preflight);
each reads the fact through a ConfigContext.

Each finding names the override (or default) that triggers it and the value that fixes it.
Thresholds and key lists are data: doctor/knowledge/config_rules.yaml."""

from __future__ import annotations

import difflib
import math
from typing import Any
import functools
from dataclasses import asdict, dataclass, field, fields
from packaging.version import InvalidVersion, Version

from doctor import knowledge
from doctor.findings import Finding, make
from doctor.results import Check
from doctor.rules.registry import RULES, cannot_look

_MISSING = object()


@dataclass
class ConfigContext:
    verl: str | None                      # installed verl version
    config: dict | None                   # composed config (resolved where possible)
    overrides: list[str] = field(default_factory=list)   # as given (rejected ones included)
    rejected: list[dict] = field(default_factory=list)   # [{override, key, message}] from Hydra
    keys: list[str] = field(default_factory=list)        # flattened key set of the composed config
    readers: dict = field(default_factory=dict)          # key -> verl source lines reading it
    model: dict | None = None             # the model's config.json
    model_source: str | None = None       # where that config.json came from
    source: str = "overrides"             # recipe name or file, for evidence


def config_context(fact: dict) -> ConfigContext:
    """The recipe_config fact as the config rules read it."""
    known = {f.name for f in fields(ConfigContext)}
    return ConfigContext(**{k: v for k, v in fact.items() if k in known and v is not None}
                         | {"verl": fact.get("verl"), "config": fact.get("config")})


def config_rule(check: str, needs_config: bool = True, emits: tuple[str, ...] = ()):
    """Register a config rule `fn(ConfigContext)`; needs_config: it reads the composed config (skipped
    when it did not compose)."""
    def register(fn):
        @functools.wraps(fn)
        def judge(facts, ctx):
            cc = config_context(facts["recipe_config"])
            if needs_config and cc.config is None:
                raise cannot_look("recipe_config", "config did not compose")
            return fn(cc)
        RULES(check, "config", needs=("recipe_config",), only_with="recipe_config", emits=emits)(judge)
        return fn
    return register


def K() -> dict:
    return knowledge.load("config_rules")


# -- helpers -----------------------------------------------------------------------------------


def get(cfg: dict | None, dotted: str, default=None):
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def override_map(overrides: list[str]) -> dict[str, str]:
    """key -> value text of the user's overrides (`+`/`++` stripped; deletions `~` ignored)."""
    out = {}
    for o in overrides:
        if "=" not in o or o.startswith("~"):
            continue
        k, v = o.split("=", 1)
        out[k.lstrip("+")] = v
    return out


def verl_at_least(ctx: ConfigContext, ver: str) -> bool:
    try:
        return ctx.verl is not None and Version(ctx.verl) >= Version(ver)
    except InvalidVersion:
        return False


def _int(v, default=None):
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def world_size(cfg: dict | None) -> int:
    return (_int(get(cfg, "trainer.n_gpus_per_node"), 1) or 1) * (_int(get(cfg, "trainer.nnodes"), 1) or 1)


# -- rules -------------------------------------------------------------------------------------


def unknown_key_replacement(r: dict, ctx: ConfigContext) -> dict:
    """What to write instead of an override Hydra rejected: {override, key, nearest, replacement (None:
    drop it), note, why}. Shared by the rule below and `recipes lint --write-fixed`."""
    plus = {p["key"]: p for p in K()["plus_keys"]}
    key, o = r["key"], r["override"]
    value = o.split("=", 1)[1] if "=" in o else ""
    near = difflib.get_close_matches(key, ctx.keys, n=1, cutoff=0.6)
    nearest = near[0] if near and near[0] != key else None
    p = plus.get(key)
    out = {"override": o, "key": key, "nearest": nearest, "note": None}
    if p and ctx.verl and not verl_at_least(ctx, p["verl_below"]):
        out.update(replacement=f"+{key}={value}", note=p.get("needs"),
                   why=f"verl {ctx.verl} reads {key} with .get() but its YAML does not declare it: append it with '+'")
    elif nearest:
        out.update(replacement=f"{nearest}={value}", why=f"the nearest real key of verl {ctx.verl} is {nearest}")
    else:
        out.update(replacement=None, why=f"verl {ctx.verl} has no such key and no close one")
    return out


@config_rule("Hydra accepts every override (struct mode, installed verl's ppo_trainer.yaml)", needs_config=False,
    emits=("config.unknown-key",))
def unknown_keys(ctx: ConfigContext):
    for r in ctx.rejected:
        fix = unknown_key_replacement(r, ctx)
        if fix["replacement"] is None:
            suggestion = f"drop {fix['override']}"
        else:
            suggestion = fix["replacement"] + (f"  (and {fix['note']})" if fix["note"] else "")
        ev = [f"{ctx.source}: {fix['override']}", f"Hydra: {r['message']}", fix["why"]]
        yield make("config.unknown-key", ev, key=fix["key"], verl=ctx.verl or "?", override=fix["override"],
                   nearest=fix["nearest"] or "none", suggestion=suggestion)


@config_rule("target_kl only acts with an adaptive KL controller", emits=("config.target-kl-inert",))
def target_kl_inert(ctx: ConfigContext):
    ov = override_map(ctx.overrides)
    if "algorithm.kl_ctrl.target_kl" not in ov:
        return
    typ = get(ctx.config, "algorithm.kl_ctrl.type", "fixed")
    if typ == "adaptive":
        return
    yield make("config.target-kl-inert",
               [f"{ctx.source}: algorithm.kl_ctrl.target_kl={ov['algorithm.kl_ctrl.target_kl']}",
                f"composed: algorithm.kl_ctrl.type={typ}",
                "get_kl_controller(): type 'fixed' builds FixedKLController(kl_coef) and never reads target_kl"],
               target_kl=ov["algorithm.kl_ctrl.target_kl"], type=typ)


@config_rule("on verl >= 0.4 KL settings need algorithm.use_kl_in_reward or actor.use_kl_loss", emits=("config.kl-inert",))
def kl_inert(ctx: ConfigContext):
    k = K()
    if not verl_at_least(ctx, k["kl_in_reward_since"]):
        return
    if get(ctx.config, "algorithm.use_kl_in_reward") or get(ctx.config, "actor_rollout_ref.actor.use_kl_loss"):
        return
    ov = override_map(ctx.overrides)
    inert = [f"{key}={v}" for key, v in ov.items() if any(key.startswith(p) for p in k["kl_inert_prefixes"])]
    if not inert:
        return
    yield make("config.kl-inert",
               [f"{ctx.source}: {', '.join(inert)}",
                f"composed: algorithm.use_kl_in_reward={get(ctx.config, 'algorithm.use_kl_in_reward')}, "
                f"actor_rollout_ref.actor.use_kl_loss={get(ctx.config, 'actor_rollout_ref.actor.use_kl_loss')}",
                f"verl {ctx.verl}: no KL controller, no KL penalty in the reward and no reference model are built"],
               verl=ctx.verl, keys=", ".join(i.split("=", 1)[0] for i in inert))


def _batch_facts(cfg: dict | None, verl_ge_04: bool) -> dict:
    world = world_size(cfg)
    n = _int(get(cfg, "actor_rollout_ref.rollout.n"), 1) or 1
    sp = _int(get(cfg, "actor_rollout_ref.actor.ulysses_sequence_parallel_size"), 1) or 1
    csp = _int(get(cfg, "critic.ulysses_sequence_parallel_size"), 1) or 1
    out: dict[str, Any] = {"world": world, "n": n, "roles": []}
    out["train"] = _int(get(cfg, "data.train_batch_size"))
    for role, mini_key, micro_key, spv, times_n in [
        ("actor", "actor_rollout_ref.actor.ppo_mini_batch_size", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", sp, True),
        ("critic", "critic.ppo_mini_batch_size", "critic.ppo_micro_batch_size_per_gpu", csp, verl_ge_04),
    ]:
        mini, micro = _int(get(cfg, mini_key)), _int(get(cfg, micro_key))
        if mini is None:
            continue
        dp = max(world // spv, 1)
        total = mini * (n if times_n else 1)
        out["roles"].append({"role": role, "mini_key": mini_key, "micro_key": micro_key, "mini": mini, "micro": micro,
                             "dp": dp, "total": total, "per_gpu": total // dp, "remainder": total % dp, "times_n": times_n})
    return out


@config_rule("batch sizes divide evenly after verl's normalisation", emits=("config.batch-divisibility",))
def batch_divisibility(ctx: ConfigContext):
    cfg = ctx.config
    b = _batch_facts(cfg, verl_at_least(ctx, "0.4"))
    world, n = b["world"], b["n"]
    if b["train"] is not None and (b["train"] * n) % world:
        good = next(t for t in range(b["train"], b["train"] + world + 1) if (t * n) % world == 0)
        yield make("config.batch-divisibility",
                   [f"data.train_batch_size={b['train']} × rollout.n={n} = {b['train'] * n}, world size "
                    f"{world} (trainer.n_gpus_per_node × nnodes): remainder {(b['train'] * n) % world}",
                    f"verl asserts: real_train_batch_size ({b['train'] * n}) must be divisible by minimal possible batch size ({world})"],
                   what="data.train_batch_size", fixed=f"data.train_batch_size={good}")
    for r in b["roles"]:
        arith = (f"{r['mini_key']}={r['mini']}" + (f" × n={n}" if r["times_n"] else "") +
                 f" ÷ (world {world} ÷ sp) = {r['total']} ÷ {r['dp']}")
        if r["remainder"] or r["per_gpu"] == 0:
            good = r["dp"] // math.gcd(r["dp"], n if r["times_n"] else 1)
            fixed_mini = max(good, (r["mini"] // good) * good or good)
            yield make("config.batch-divisibility",
                       [f"{arith} = {r['total'] / r['dp']:g} per GPU (verl floors it to {r['per_gpu']})",
                        "ppo_mini_batch_size is normalised per GPU: mini × n //= world ÷ sp" if r["times_n"]
                        else "critic mini batch is normalised per GPU: mini //= world ÷ sp (verl < 0.4: not × n)"],
                       what=r["mini_key"], fixed=f"{r['mini_key']}={fixed_mini}")
            continue
        if r["micro"] and r["micro"] <= r["per_gpu"] and r["per_gpu"] % r["micro"]:
            divisors = [d for d in range(r["micro"], 0, -1) if r["per_gpu"] % d == 0]
            yield make("config.batch-divisibility",
                       [f"{arith} = {r['per_gpu']} per GPU, not divisible by {r['micro_key']}={r['micro']}",
                        f"verl asserts: normalized ppo_mini_batch_size {r['per_gpu']} should be divisible by "
                        f"ppo_micro_batch_size_per_gpu {r['micro']}"],
                       what=r["micro_key"], fixed=f"{r['micro_key']}={divisors[0]}")


@config_rule("micro batch per GPU is not larger than the normalised mini batch per GPU", emits=("config.micro-gt-mini",))
def micro_gt_mini(ctx: ConfigContext):
    b = _batch_facts(ctx.config, verl_at_least(ctx, "0.4"))
    for r in b["roles"]:
        if r["micro"] and r["per_gpu"] and not r["remainder"] and r["micro"] > r["per_gpu"]:
            yield make("config.micro-gt-mini",
                       [f"{r['mini_key']}={r['mini']}" + (f" × n={b['n']}" if r["times_n"] else "") +
                        f" ÷ {r['dp']} GPUs = {r['per_gpu']} per GPU < {r['micro_key']}={r['micro']}",
                        f"verl asserts: normalized ppo_mini_batch_size {r['per_gpu']} should be larger than "
                        f"ppo_micro_batch_size_per_gpu {r['micro']}"],
                       role=r["role"], micro=r["micro"], per_gpu=r["per_gpu"],
                       fixed=f"{r['micro_key']}={r['per_gpu']}")


@config_rule("rollout lengths follow data lengths", emits=("config.response-length-mismatch",))
def response_length_mismatch(ctx: ConfigContext):
    cfg = ctx.config
    for roll, data in [("actor_rollout_ref.rollout.response_length", "data.max_response_length"),
                       ("actor_rollout_ref.rollout.prompt_length", "data.max_prompt_length")]:
        rv, dv = get(cfg, roll), get(cfg, data)
        if rv is None or dv is None or str(rv) == str(dv):
            continue
        yield make("config.response-length-mismatch",
                   [f"composed: {roll}={rv}, {data}={dv}",
                    f"{roll} defaults to ${{{data}}}; an override of one without the other breaks the link"],
                   rollout_key=roll, rollout_value=rv, data_key=data, data_value=dv,
                   fixed=f"drop the {roll} override (or set {data}={rv})")


def _tp(cfg) -> int:
    return _int(get(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size"), 1) or 1


@config_rule("tensor parallel size fits the model's attention heads", emits=("config.tp-heads",))
def tp_heads(ctx: ConfigContext):
    m = ctx.model
    if not m:
        return
    tp = _tp(ctx.config)
    heads, kv, inter = m.get("num_attention_heads"), m.get("num_key_value_heads"), m.get("intermediate_size")
    problems = []
    if heads and heads % tp:
        problems.append(f"num_attention_heads {heads} % tp {tp} = {heads % tp} (vLLM: Total number of attention heads "
                        f"({heads}) must be divisible by tensor parallel size ({tp}).)")
    if kv and ((kv >= tp and kv % tp) or (kv < tp and tp % kv)):
        problems.append(f"num_key_value_heads {kv} and tp {tp}: vLLM's Qwen2 needs kv % tp == 0 (kv ≥ tp) or tp % kv == 0")
    if inter and inter % tp:
        problems.append(f"intermediate_size {inter} % tp {tp} != 0 (MLP shards)")
    if not problems:
        return
    valid = [t for t in range(1, (heads or 1) + 1) if heads and heads % t == 0
             and (not kv or (kv % t == 0 if kv >= t else t % kv == 0)) and (not inter or inter % t == 0)]
    valid = [t for t in valid if t <= max(world_size(ctx.config), 1)] or valid
    yield make("config.tp-heads", [*problems, f"model config: {ctx.model_source}"],
               tp=tp, heads=heads, valid=", ".join(map(str, valid)),
               fixed=f"actor_rollout_ref.rollout.tensor_model_parallel_size={max(valid) if valid else 1}")


@config_rule("tensor parallel size divides the GPUs", emits=("config.tp-gpus",))
def tp_gpus(ctx: ConfigContext):
    tp, world = _tp(ctx.config), world_size(ctx.config)
    if tp <= world and world % tp == 0:
        return
    good = max(t for t in range(1, world + 1) if world % t == 0 and t <= tp)
    yield make("config.tp-gpus",
               [f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp}, world size {world} "
                f"(trainer.n_gpus_per_node={get(ctx.config, 'trainer.n_gpus_per_node')} × nnodes={get(ctx.config, 'trainer.nnodes')})",
                f"verl asserts: rollout world_size: {world} is not divisible by infer_tp: {tp}" if tp <= world
                else "vLLM/verl: tensor parallel size should be less than or equal to the world size"],
               tp=tp, world=world, fixed=f"actor_rollout_ref.rollout.tensor_model_parallel_size={good}")


@config_rule("vLLM's max_num_batched_tokens covers prompt + response", emits=("config.batched-tokens-lt-model-len",))
def batched_tokens(ctx: ConfigContext):
    cfg = ctx.config
    tokens = _int(get(cfg, "actor_rollout_ref.rollout.max_num_batched_tokens"))
    prompt = _int(get(cfg, "actor_rollout_ref.rollout.prompt_length", get(cfg, "data.max_prompt_length")))
    resp = _int(get(cfg, "actor_rollout_ref.rollout.response_length", get(cfg, "data.max_response_length")))
    if tokens is None or prompt is None or resp is None:
        return
    max_len = _int(get(cfg, "actor_rollout_ref.rollout.max_model_len")) or prompt + resp
    if tokens >= max_len:
        return
    chunked = bool(get(cfg, "actor_rollout_ref.rollout.enable_chunked_prefill", True))
    if chunked and not verl_at_least(ctx, "0.3"):
        return  # verl 0.2 + chunked prefill: vLLM splits the prefill, no error
    msg = (f"vLLM: max_num_batched_tokens ({tokens}) is smaller than max_model_len ({max_len})" if not chunked else
           "verl: Enable chunked prefill, max_num_batched_tokens is smaller than max_model_len, please increase "
           "max_num_batched_tokens or disable chunked prefill")
    yield make("config.batched-tokens-lt-model-len",
               [f"actor_rollout_ref.rollout.max_num_batched_tokens={tokens} < max_model_len {max_len} "
                f"(prompt {prompt} + response {resp})", f"enable_chunked_prefill={chunked}", msg],
               tokens=tokens, max_len=max_len,
               fixed=f"actor_rollout_ref.rollout.max_num_batched_tokens={max_len}")


@config_rule("free_cache_engine needs enforce_eager", emits=("config.cache-flags",))
def cache_flags(ctx: ConfigContext):
    cfg = ctx.config
    if verl_at_least(ctx, "0.6"):
        return  # the assert is in verl 0.2-0.5's rollouts; 0.6+ sleeps vLLM instead (checked in the wheels)
    if get(cfg, "actor_rollout_ref.rollout.free_cache_engine") and get(cfg, "actor_rollout_ref.rollout.enforce_eager") is False:
        yield make("config.cache-flags",
                   ["composed: actor_rollout_ref.rollout.free_cache_engine=True, enforce_eager=False",
                    "verl asserts: disable CUDA graph (enforce_eager = False) if free cache engine"],
                   fixed="actor_rollout_ref.rollout.enforce_eager=True")


@config_rule("gpu_memory_utilization within (0, 1] and below the OOM line", emits=("config.gpu-memory-utilization",))
def gpu_memory_utilization(ctx: ConfigContext):
    k = K()["gpu_memory_utilization"]
    v = get(ctx.config, "actor_rollout_ref.rollout.gpu_memory_utilization")
    try:
        v = float(v)
    except (TypeError, ValueError):
        return
    if v <= 0 or v > 1:
        yield make("config.gpu-memory-utilization",
                   [f"actor_rollout_ref.rollout.gpu_memory_utilization={v}",
                    "vLLM: GPU memory utilization must be less than 1.0" if v > 1 else "no KV cache can be allocated"],
                   severity="error", value=v, fixed=f"actor_rollout_ref.rollout.gpu_memory_utilization={k['oom_line'] - 0.05:g}")
    elif v > k["oom_line"]:
        yield make("config.gpu-memory-utilization",
                   [f"actor_rollout_ref.rollout.gpu_memory_utilization={v} > {k['oom_line']} (the seed article's OOM line)",
                    "with vLLM 0.6.3 verl's adapter takes this fraction of the memory left after the FSDP models load"],
                   severity="warning", value=v, fixed=f"actor_rollout_ref.rollout.gpu_memory_utilization={k['oom_line'] - 0.05:g}")


@config_rule("log-prob micro batches per GPU stay small", emits=("config.log-prob-micro-large",))
def log_prob_micro_large(ctx: ConfigContext):
    k = K()["log_prob_micro"]
    for key in k["keys"]:
        v = _int(get(ctx.config, key))
        if v is not None and v > k["threshold"]:
            yield make("config.log-prob-micro-large",
                       [f"{key}={v} > {k['threshold']}",
                        "these micro batches are FSDP forward passes (compute_log_prob / compute_ref_log_prob), "
                        "not vLLM: each pads to its longest sequence and holds logits of micro × length × vocab"],
                       key=key, value=v, threshold=k["threshold"], fixed=f"{key}={k['threshold'] - 4}")


@config_rule("overridden keys are read by the installed verl", emits=("config.ignored-key",))
def ignored_key(ctx: ConfigContext):
    ov = override_map(ctx.overrides)
    for entry in K()["ignored_keys"]:
        key = entry["key"]
        if key not in ov or key not in ctx.readers:
            continue  # not overridden, or the installed verl was not searched
        if ctx.readers[key]:
            continue  # something in this verl reads it
        yield make("config.ignored-key",
                   [f"{ctx.source}: {key}={ov[key]}",
                    f"no code of the installed verl {ctx.verl} reads it (searched outside trainer/config, third_party, tests)",
                    entry["effect"]],
                   key=key, verl=ctx.verl or "?", fixed=f"drop {key}={ov[key]}")


def evaluate_config(ctx: ConfigContext) -> tuple[list[Finding], list[Check]]:
    """The config rules alone on one composed config (`recipes lint`), through the one evaluate loop."""
    from doctor.rules import Context, evaluate  # the package imports this module to register its rules

    return evaluate({"recipe_config": asdict(ctx)}, Context(python="python"), select=lambda r: r.area == "config")
