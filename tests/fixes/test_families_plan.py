"""Never across families (issue 26): no fix plan moves verl, vLLM, torch or transformers into another
stack family unless the user named that family's stack with --stack. On recorded facts only (no
uv, no env): tests/data/facts-working.json with a stock verl 0.9.1 env's versions laid over it
(tests/rules/test_families.py says how). Before this stage `doctor fix --dry-run` on it planned one
resolution down to vLLM 0.6.3.post1 and torch 2.4.0 under verl041-vllm063post1's constraints."""

from __future__ import annotations

import pytest

from doctor import findings as F
from doctor import knowledge
from doctor.fixes import build_plan
from doctor.rules import Context, evaluate
from doctor.stacks import FamilyGuard, StackChoice, choose_stack, crosses_family, family_guard

from rules.test_families import OTHER_FAMILIES, modern  # noqa: E402

PY = "/env/bin/python"


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # the printed constraints file goes under the state dir


def plan_text(plan) -> str:
    return "\n".join([c for s in plan.steps for c in s.commands] +
                     [r["requirement"] for s in plan.steps for r in s.reasons])


def test_the_stock_modern_env_plans_nothing_from_another_family():
    facts = modern()
    chosen = choose_stack(facts)
    found, _ = evaluate(facts, Context(python=PY, chosen=chosen))
    plan = build_plan(found, python=PY, stack=chosen.stack, guard=family_guard(chosen, facts))
    assert plan.stack == "verl091-vllm024"
    assert not any(s in plan_text(plan) for s in OTHER_FAMILIES), plan_text(plan)


def test_a_plan_within_another_familys_stack_is_refused_with_the_reason():
    # what the doctor did before: the modern env judged against the closest stack, verl041
    facts = modern()
    old = knowledge.get_stack("verl041-vllm063post1")
    found, _ = evaluate(facts, Context(python=PY, chosen=StackChoice(old, False, 1, 12)))
    assert "version.vllm" in {f.id for f in found}  # the downgrade the old choice asked for
    guard = family_guard(choose_stack(facts), facts)
    assert guard == FamilyGuard("verl-modern", False, {"verl": "0.9.1", "vllm": "0.24.0", "torch": "2.11.0",
                                                       "transformers": "5.9.0"})
    plan = build_plan(found, python=PY, stack=old, guard=guard)
    assert not plan.steps
    refused = {m["id"]: m["why"] for m in plan.manual}
    assert "version.vllm" in refused and "version.torch" in refused
    assert refused["version.torch"].startswith("verl041-vllm063post1 is of the verl-0.4 family and the env is of "
                                               "verl-modern: resolving within it would move the env across families")


def test_a_step_that_moves_a_core_dist_out_of_the_family_becomes_manual():
    facts = modern()
    chosen = choose_stack(facts)
    f = F.make("vllm.tokenizer-incompatible", ["test"], python=PY, transformers="5.9.0")
    plan = build_plan([f], python=PY, stack=chosen.stack, guard=family_guard(chosen, facts))
    if f.fix.automatic:  # its plan installs transformers within the family's stack, never 4.47
        assert "4.47" not in plan_text(plan)
    rejects = F.make("stack.verl-rejects-vllm", ["test"], python=PY, verl="0.9.1", vllm="0.12.0")
    plan = build_plan([rejects], python=PY, stack=chosen.stack, guard=family_guard(chosen, facts))
    assert "verl==0.4.1" not in plan_text(plan)


def test_asking_for_the_family_by_name_allows_the_move():
    facts = modern()
    old = knowledge.get_stack("verl041-vllm063post1")
    chosen = choose_stack(facts, old)  # --stack verl041-vllm063post1
    found, _ = evaluate(facts, Context(python=PY, stack=old, chosen=chosen))
    plan = build_plan(found, python=PY, stack=old, guard=family_guard(chosen, facts))
    (step,) = [s for s in plan.steps if s.kind == "packages"]
    assert "vllm==0.6.3.post1" in step.data["requirements"]


@pytest.mark.parametrize("req,family,asked,crosses", [
    ("vllm==0.6.3.post1", "verl-modern", False, True),
    ("transformers>=4.45.2,<=4.47.1", "verl-modern", False, True),
    ("torch==2.4.0", "verl-modern", False, True),
    ("verl==0.4.1", "verl-modern", False, True),
    ("torch==2.11.0", "verl-modern", False, False),          # installed: nothing moves
    ("transformers>=5.5.3,!=5.6.0,<5.11", "verl-modern", False, False),
    ("vllm==0.29.0", "verl-modern", False, False),           # a newer engine within the family
    ("numpy<2", "verl-modern", False, False),                # not a core distribution
    ("vllm==0.6.3.post1", "verl-modern", True, False),       # --stack: asked for by name
    ("vllm==0.6.3", "verl-0.4", False, False),
    ("torch==2.4.0", None, False, True),                     # no known family: never moved
    ("vllm>=0.18", "verl-modern", False, False),
])
def test_crosses_family(req, family, asked, crosses):
    guard = FamilyGuard(family, asked, {"verl": "0.9.1", "vllm": "0.24.0", "torch": "2.11.0", "transformers": "5.9.0"})
    why = crosses_family(req, guard)
    assert bool(why) is crosses, why
