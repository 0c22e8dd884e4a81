"""Config rules (doctor/rules/config.py) on composed configs: verl 0.4.1's defaults for the keys the
rules read, one change at a time."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import DATA
from doctor.rules.config import ConfigContext, evaluate_config

QWEN = json.loads((DATA / "fixtures" / "qwen2.5-0.5b-instruct" / "config.json").read_text())


BASE = {
    "data": {"train_batch_size": 512, "max_prompt_length": 512, "max_response_length": 256},
    "actor_rollout_ref": {
        "actor": {"ppo_mini_batch_size": 128, "ppo_micro_batch_size_per_gpu": 8, "ulysses_sequence_parallel_size": 1,
                  "use_kl_loss": False},
        "ref": {"log_prob_micro_batch_size_per_gpu": 16},
        "rollout": {"n": 1, "tensor_model_parallel_size": 2, "gpu_memory_utilization": 0.65, "max_num_seqs": 1024,
                    "max_num_batched_tokens": 16384, "enable_chunked_prefill": True, "free_cache_engine": True,
                    "enforce_eager": True, "prompt_length": 512, "response_length": 256,
                    "log_prob_micro_batch_size_per_gpu": 16, "max_model_len": None},
    },
    "critic": {"ppo_mini_batch_size": 128, "ppo_micro_batch_size_per_gpu": 8, "ulysses_sequence_parallel_size": 1},
    "algorithm": {"use_kl_in_reward": True, "kl_ctrl": {"type": "fixed", "kl_coef": 0.0005, "target_kl": 0.1}},
    "trainer": {"n_gpus_per_node": 2, "nnodes": 1},
}



def ids_for(changes: dict, overrides=(), verl="0.4.1", readers=None, rejected=(), model=QWEN) -> dict:
    cfg = copy.deepcopy(BASE)
    for dotted, v in changes.items():
        node = cfg
        *head, last = dotted.split(".")
        for h in head:
            node = node[h]
        node[last] = v
    ov = list(overrides) or [f"{k}={v}" for k, v in changes.items()]
    ctx = ConfigContext(verl=verl, config=cfg, overrides=ov, rejected=list(rejected), keys=["algorithm.kl_ctrl.kl_coef"],
                        readers=readers or {}, model=model, model_source="fixture")
    findings, _ = evaluate_config(ctx)
    return {f.id: f for f in findings}


def test_the_base_config_is_clean():
    assert ids_for({}) == {}


@pytest.mark.parametrize("changes, overrides, verl, fid, fixed", [
    ({"algorithm.kl_ctrl.target_kl": 0.05}, (), "0.4.1", "config.target-kl-inert", "type=adaptive"),
    ({"algorithm.use_kl_in_reward": False}, ["algorithm.kl_ctrl.kl_coef=0.0005"], "0.4.1", "config.kl-inert",
     "algorithm.use_kl_in_reward=True"),
    ({"data.train_batch_size": 511}, (), "0.4.1", "config.batch-divisibility", "data.train_batch_size=512"),
    ({"actor_rollout_ref.actor.ppo_mini_batch_size": 120, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 16}, (), "0.4.1", "config.batch-divisibility",
     "ppo_micro_batch_size_per_gpu=15"),
    ({"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 128}, (), "0.4.1", "config.micro-gt-mini",
     "ppo_micro_batch_size_per_gpu=64"),
    ({"actor_rollout_ref.rollout.response_length": 200}, (), "0.4.1", "config.response-length-mismatch",
     "data.max_response_length=200"),
    ({"actor_rollout_ref.rollout.tensor_model_parallel_size": 4, "trainer.n_gpus_per_node": 4}, (), "0.4.1",
     "config.tp-heads", "tensor_model_parallel_size=2"),
    ({"actor_rollout_ref.rollout.tensor_model_parallel_size": 2, "trainer.n_gpus_per_node": 1,
      "data.train_batch_size": 512}, (), "0.4.1", "config.tp-gpus", "tensor_model_parallel_size=1"),
    ({"actor_rollout_ref.rollout.max_num_batched_tokens": 512, "actor_rollout_ref.rollout.enable_chunked_prefill": False},
     (), "0.2.0.post1", "config.batched-tokens-lt-model-len", "max_num_batched_tokens=768"),
    ({"actor_rollout_ref.rollout.enforce_eager": False}, (), "0.4.1", "config.cache-flags", "enforce_eager=True"),
    ({"actor_rollout_ref.rollout.gpu_memory_utilization": 0.85}, (), "0.4.1", "config.gpu-memory-utilization", "=0.65"),
    ({"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 32}, (), "0.4.1", "config.log-prob-micro-large", "=16"),
    ({"actor_rollout_ref.rollout.max_num_seqs": 1896}, (), "0.4.1", "config.ignored-key", "drop"),
])
def test_each_config_rule_fires_with_evidence_and_fixed_value(changes, overrides, verl, fid, fixed):
    readers = {"actor_rollout_ref.rollout.max_num_seqs": []}
    got = ids_for(changes, overrides, verl, readers)
    assert fid in got, got.keys()
    f = got[fid]
    assert f.area == "config" and f.evidence
    assert any(fixed in c for c in [f.fix.summary, *f.fix.commands]), f.fix


def test_rules_stay_quiet_where_verl_does_not_fail():
    # verl 0.2 with chunked prefill: vLLM splits the prefill; verl >= 0.3 refuses it itself.
    small = {"actor_rollout_ref.rollout.max_num_batched_tokens": 512}
    assert "config.batched-tokens-lt-model-len" not in ids_for(small, verl="0.2.0.post1")
    assert "config.batched-tokens-lt-model-len" in ids_for(small, verl="0.4.1")
    # kl-inert is a verl >= 0.4 rule; adaptive makes target_kl act; a reader found means not ignored.
    assert "config.kl-inert" not in ids_for({"algorithm.use_kl_in_reward": False}, ["algorithm.kl_ctrl.kl_coef=1"], "0.2.0.post1")
    assert "config.target-kl-inert" not in ids_for({"algorithm.kl_ctrl.type": "adaptive"},
                                                   ["algorithm.kl_ctrl.target_kl=0.05", "algorithm.kl_ctrl.type=adaptive"])
    assert "config.ignored-key" not in ids_for({"actor_rollout_ref.rollout.max_num_seqs": 1896},
                                               readers={"actor_rollout_ref.rollout.max_num_seqs": ["x.py:1: config.max_num_seqs"]})
    # the free_cache_engine/enforce_eager assert is in verl 0.2-0.5's rollouts, gone from 0.6 on (checked in the wheels)
    eager_off = {"actor_rollout_ref.rollout.enforce_eager": False}
    assert "config.cache-flags" in ids_for(eager_off, verl="0.5.0")
    assert "config.cache-flags" not in ids_for(eager_off, verl="0.9.1")
    # gpu_memory_utilization above 1 is an error, not a warning.
    assert ids_for({"actor_rollout_ref.rollout.gpu_memory_utilization": 1.2})["config.gpu-memory-utilization"].severity == "error"


def test_unknown_key_names_nearest_key_or_plus_prefix():
    rej = [{"override": "algorithm.kl_ctrl.kl_cof=0.1", "key": "algorithm.kl_ctrl.kl_cof", "message": "Could not override"},
           {"override": "trainer.val_before_train=False", "key": "trainer.val_before_train", "message": "Could not override"}]
    ctx = ConfigContext(verl="0.2.0.post1", config=None, overrides=[r["override"] for r in rej], rejected=rej,
                        keys=["algorithm.kl_ctrl.kl_coef", "algorithm.kl_ctrl.type"])
    fs, checks = evaluate_config(ctx)
    assert [f.id for f in fs] == ["config.unknown-key"] * 2
    assert "algorithm.kl_ctrl.kl_coef=0.1" in fs[0].fix.summary
    assert "+trainer.val_before_train=False" in fs[1].fix.summary
    assert any(c.status == "skipped" for c in checks)


def test_config_rules_do_not_run_in_plain_doctor_check():
    """Config rules are rules of the one registry, in scope only with a recipe's composed config:
    a check without --recipe has no config check line at all."""
    import json

    from doctor.rules import RULES, Context, evaluate

    from conftest import DATA

    assert any(r.fn.__module__ == "doctor.rules.config" and r.only_with == "recipe_config" for r in RULES)
    facts = json.loads((DATA / "facts-working.json").read_text())
    _, checks = evaluate(facts, Context(python="python"))
    assert checks and not [c for c in checks if c.area in ("config", "trainer")]
