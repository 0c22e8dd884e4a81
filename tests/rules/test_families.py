"""Stack families (issue 26, first stage): the family of a target is decided once from its installed
verl, with its evidence; a target is judged only by its own family's reference stack (or, of no known
family, by its own declared requirements and the probes); no printed command leaves the family.

The modern facts are tests/data/facts-working.json (a real recording of the verl 0.4.1 env) with the
versions of a stock `verl[vllm]==0.9.1` env laid over it (verl 0.9.1, vllm 0.24.0, torch 2.11.0,
transformers 5.9.0, ray 2.60.0, numpy 2.3.5: tests/data/families-sources.md, field-modern.md §1.2),
their old Requires-Dist dropped and xformers removed (vLLM 0.24 does not use it). Before this stage
the doctor judged exactly this against verl041-vllm063post1 and planned a downgrade to vLLM 0.6.3.post1."""

from __future__ import annotations

import copy
import json

import pytest

from doctor import knowledge
from doctor.rules import Context, evaluate
from doctor.stacks import choose_stack, detect_family, stack_lockfile_for

from conftest import DATA  # noqa: E402

WORKING = json.loads((DATA / "facts-working.json").read_text())
H200_PY312 = json.loads((DATA / "h200-py312-facts.json").read_text())
STOCK_091 = {"verl": "0.9.1", "vllm": "0.24.0", "torch": "2.11.0", "transformers": "5.9.0", "ray": "2.60.0",
             "numpy": "2.3.5"}
OTHER_FAMILIES = ("0.6.3", "torch==2.4.0", "4.47.1", "verl==0.4.1", "verl041", "verl030")


def versions(facts, **pins):
    f = copy.deepcopy(facts)
    for name, v in pins.items():
        f["distributions"][name]["version"] = v
        f["distributions"][name]["requires"] = []
    return f


def modern(**pins):
    f = versions(WORKING, **{**STOCK_091, **pins})
    del f["distributions"]["xformers"]
    return f


def run(facts, **ctx):
    findings, checks = evaluate(facts, Context(python="/env/bin/python", **ctx))
    return {f.id: f for f in findings}, checks


def commands(found) -> str:
    return "\n".join(c for f in found.values() for c in f.fix.commands)


def test_every_stack_names_a_family_and_every_family_its_verl_line():
    fams = knowledge.families()
    assert {"verl-paper", "verl-0.4", "verl-0.5-0.6", "verl-modern"} <= set(fams)
    assert {s["name"]: s["family"] for s in knowledge.stacks().values()} == {
        "verl030-vllm063": "verl-paper", "verl041-vllm063post1": "verl-0.4", "verl091-vllm024": "verl-modern"}
    releases = {r["verl"]: r["family"] for r in knowledge.load("families")["releases"]}
    assert {v: releases[v] for v in ("0.5.0", "0.6.1", "0.7.0", "0.8.0", "0.9.1")} == {
        "0.5.0": "verl-0.5-0.6", "0.6.1": "verl-0.5-0.6", "0.7.0": "verl-modern", "0.8.0": "verl-modern",
        "0.9.1": "verl-modern"}


@pytest.mark.parametrize("verl,family,stack", [
    ("0.1", "verl-paper", "verl030-vllm063"),
    ("0.2.0.post2", "verl-paper", "verl030-vllm063"),
    ("0.3.0.post1", "verl-paper", "verl030-vllm063"),
    ("0.4.1", "verl-0.4", "verl041-vllm063post1"),
    ("0.5.0", "verl-0.5-0.6", None),
    ("0.6.1", "verl-0.5-0.6", None),
    ("0.7.1", "verl-modern", "verl091-vllm024"),
    ("0.8.0.dev", "verl-modern", "verl091-vllm024"),   # the version string at tag v0.8.0
    ("0.9.1", "verl-modern", "verl091-vllm024"),
    ("0.10.0.dev0", None, None),                      # verl main: no release, no known family
])
def test_the_family_is_decided_from_the_installed_verl(verl, family, stack):
    choice = choose_stack(versions(WORKING, verl=verl))
    assert (choice.family, choice.stack["name"] if choice.stack else None) == (family, stack)
    assert choice.evidence and f"verl {verl}" in choice.evidence[0] and not choice.by_flag


def test_a_release_of_the_family_without_a_stack_is_recognised_with_its_pins():
    found, checks = run(versions(WORKING, verl="0.6.1", vllm="0.11.0"))
    f = found["stack.detected"]
    assert f.title.startswith("stack family verl-0.5-0.6: no reference stack of verl-0.5-0.6 yet")
    assert any("verl 0.6.1 (2025-11-14) was built and tested with vllm 0.11.0" in e for e in f.evidence)
    assert not [i for i in found if i.startswith("version.")]
    why = {c.check: c.why for c in checks}["versions within the stack's known-good ranges"]
    assert why == "no reference stack of the verl-0.5-0.6 family"


def test_stock_verl_091_is_judged_by_its_own_family_never_by_verl041():
    found, _ = run(modern())
    f = found["stack.detected"]
    assert f.title == "stack family verl-modern: judged against verl091-vllm024, 6/6 constraints met"
    assert f.evidence[0].startswith("verl 0.9.1 installed: family verl-modern")
    assert any("vllm 0.24.0 (vllm extra ==0.24.0; gate >=0.18.0), torch 2.11.0" in e for e in f.evidence)
    assert not any("no lockfile" in e for e in f.evidence)   # Python 3.11: lockfiles/verl091-vllm024-py3.11.txt
    assert not [i for i in found if i.startswith("version.")]
    assert {i for i, x in found.items() if x.severity == "error"} == {"gpu.none"}
    assert not any(s in commands(found) for s in OTHER_FAMILIES), commands(found)
    # the flash-attn advice names the installed torch, not the torch 2.4 wheel
    assert "torch 2.11" in found["flash-attn.missing"].fix.summary
    assert "cu12torch2.4" not in found["flash-attn.missing"].fix.summary + commands(found)


def test_the_modern_stack_names_its_lockfile_only_for_the_pythons_it_has_one_for():
    stack = knowledge.get_stack("verl091-vllm024")
    assert stack["python"] == ["3.10", "3.11", "3.12"] and "3.11 and 3.12" in stack["lock_note"]
    facts = modern()
    assert str(stack_lockfile_for(facts, stack)).endswith("verl091-vllm024-py3.11.txt")
    py310 = modern()
    py310["markers"]["python_version"] = "3.10"
    assert stack_lockfile_for(py310, stack) is None
    found, checks = run(py310)
    assert "verl091-vllm024-py" not in commands(found)
    why = {c.check: c.why for c in checks}["the env matches the known-good set (the stack's lockfile)"]
    assert why.startswith("no lockfile of verl091-vllm024"), why


def test_a_modern_env_outside_its_ranges_is_told_within_the_family():
    found, _ = run(modern(transformers="4.57.1", vllm="0.12.0"))
    assert found["version.transformers"].severity == "warning"
    assert "verl091-vllm024 needs transformers>=5.5.3" in found["version.transformers"].evidence[0]
    # verl 0.9's own gate refuses vLLM 0.12: an error, and no printed fix leaves the family
    f = found["stack.verl-rejects-vllm"]
    assert f.severity == "error" and any("0.18.0+" in e for e in f.evidence)
    assert not any(s in commands(found) for s in OTHER_FAMILIES), commands(found)
    assert "Not printed as a command to run: verl==0.4.1 is outside the verl-modern family" in f.fix.summary


def test_an_env_of_no_known_family_is_judged_on_its_own_requirements_only():
    found, checks = run(versions(WORKING, verl="0.10.0.dev0"))
    f = found["stack.detected"]
    assert f.title.startswith("stack family no known family: verl 0.10.0.dev0 is of no known family")
    assert "of no known family" in f.evidence[0]
    assert not [i for i in found if i.startswith("version.")]
    assert "stack.differs" not in found and "python.version-unverified" not in found
    assert not f.fix.commands  # no lockfile to sync to


def test_a_paper_fork_checkout_is_of_the_paper_family_by_its_own_version():
    facts = versions(WORKING, verl="0.1", vllm="0.6.3")
    facts["distributions"]["verl"].update(editable=True, path="/home/u/TinyZero")
    family, evidence = detect_family(facts)
    assert family == "verl-paper" and "from your checkout /home/u/TinyZero (its own code)" in evidence[0]
    assert choose_stack(facts).stack["name"] == "verl030-vllm063"


def test_stack_flag_overrides_the_family_and_says_so():
    choice = choose_stack(modern(), knowledge.get_stack("verl041-vllm063post1"))
    assert choice.by_flag and choice.family == "verl-0.4"
    assert choice.evidence == ("--stack verl041-vllm063post1: family verl-0.4",
                               "installed: verl 0.9.1 installed: family verl-modern (verl >=0.7.0.dev0,<0.10.0.dev0)")
    found, _ = run(modern(), stack=knowledge.get_stack("verl041-vllm063post1"))
    assert found["version.torch"].severity == "error"  # asked for by name: judged by that family's pins
    assert "vllm==0.6.3.post1" in commands(found) or found["version.vllm"].fix.commands


def test_h200_py312_without_verl_is_of_no_known_family():
    found, checks = run(H200_PY312)
    f = found["stack.detected"]
    assert f.title.startswith("stack family no known family: verl is not installed")
    assert not [i for i in found if i.startswith("version.")] and "python.version-unverified" not in found
    missing = found["stack.dists-missing"]
    assert missing.title.endswith("not installed: verl, vllm, tensordict, ray, xformers, datasets")
    assert "no stack family without verl" in missing.evidence[0] and not missing.fix.commands
    assert "lockfiles/" not in commands(found)  # no lockfile claimed for an env of no family


@pytest.mark.parametrize("tf,td,flagged", [
    ("4.47.1", "0.14.3", set()),                                  # what the paper repos ran (s3's env): no error
    ("4.46.3", "0.5.0", set()),                                   # the lock's own versions
    ("4.48.0", "0.6.2", {"version.transformers", "version.tensordict"}),  # tensordict 0.6 needs torch>=2.5
])
def test_the_paper_family_s_own_truth_is_not_an_error(tf, td, flagged):
    """Issue 26: on TinyZero-lineage envs (verl 0.3 / vllm==0.6.3) the doctor flagged transformers
    4.47.1 and tensordict 0.14.3, which work (checked here on the verl 0.3 lock); the lock itself still
    resolves within the narrower range (`also_good` never feeds the lockfile)."""
    facts = versions(WORKING, verl="0.3.0.post1", vllm="0.6.3", transformers=tf, tensordict=td)
    found, _ = run(facts)
    assert {i for i in ("version.transformers", "version.tensordict") if i in found} == flagged
    from doctor.lockfiles.compile import stack_inputs

    assert "tensordict<0.6" in stack_inputs(knowledge.stacks()["verl030-vllm063"])[1]
