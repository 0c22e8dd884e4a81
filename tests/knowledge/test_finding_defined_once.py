"""A finding is defined once (issue 23): its entry in findings.yaml holds text, scope and fix plan;
a placeholder a rule does not fill is an error in the tests and never printed; rules declare the IDs
they emit, and every entry is reported by someone that `doctor explain` names."""

from __future__ import annotations

import fnmatch
import string

import pytest

from conftest import run_doctor
from doctor import findings as F
from doctor import knowledge
from doctor.results import Check, Status
from doctor.rules import all_rules, reported_by
from doctor.rules.registry import Registry, run_rule, signature_ids


def test_every_entry_is_reported_by_a_rule_a_signature_or_a_named_producer():
    unreported = [fid for fid in knowledge.finding_defs() if not reported_by(fid)]
    assert not unreported, f"no rule declares them in emits=, no signature has them, no produced_by: {unreported}"


def test_every_declared_id_exists():
    ids = list(knowledge.finding_defs())
    for r in all_rules():
        assert r.emits, f"{r.name} declares no emits="
        for p in r.emits:
            if p.startswith("signature:"):
                assert signature_ids(p.split(":", 1)[1]), f"{r.name}: {p} names no signature context"
            elif "*" in p:
                assert any(fnmatch.fnmatchcase(i, p) for i in ids), f"{r.name}: {p} matches no finding"
            else:
                assert F.definition(p) is not None and p in ids, f"{r.name}: emits {p}, which findings.yaml lacks"


def _registry_with(fid: str, emits: tuple[str, ...]):
    reg = Registry(area="test")

    @reg("a rule of the test", emits=emits)
    def emit_one():
        return [F.make(fid, ["e"], module="m", exc_type="E", dist="d", python="py")]

    return next(iter(reg))


def test_an_undeclared_emit_is_an_error_in_tests_and_flagged_otherwise(monkeypatch):
    r = _registry_with("import.failed", emits=("stack.detected",))
    with pytest.raises(F.ContractError, match="import.failed"):
        run_rule(r, r.fn)
    monkeypatch.delenv("VERL_DOCTOR_STRICT")
    got, check = run_rule(r, r.fn)
    assert [f.id for f in got] == ["import.failed"] and "import.failed" in (check.why or "")
    declared = _registry_with("import.failed", emits=("import.*",))
    monkeypatch.setenv("VERL_DOCTOR_STRICT", "1")
    got, check = run_rule(declared, declared.fn)
    assert isinstance(check, Check) and check.status == Status.ERROR and check.why is None


def test_an_unfilled_placeholder_raises_in_tests_and_reads_neutral_for_users(monkeypatch):
    with pytest.raises(F.PlaceholderMissing, match=r"\{transformers\}"):
        F.make("vllm.tokenizer-incompatible", ["e"], python="py")
    monkeypatch.delenv("VERL_DOCTOR_STRICT")
    f = F.make("stack.culprit", ["e"], dist="torch", installed="2.5.1", modules="vllm")
    shown = " ".join([f.title, f.fix.summary, *f.sources])
    assert "{" not in shown and "<locked>" in f.title, shown
    # A command still holding one is not printed as runnable: it is one to adapt, in neutral words
    # ({lockfile} is the evaluate loop's to fill; outside it, it reads <lockfile> too).
    F.hold_unrunnable(f)
    assert "<lockfile>" in f.fix.summary
    assert not f.fix.commands and "{" not in f.fix.summary and "<python>" in f.fix.summary


def test_declared_defaults_fill_what_the_rule_cannot_know():
    f = F.make("flash-attn.missing", ["e"], severity="warning", python="py")
    assert "{" not in f.fix.summary + " ".join(f.fix.commands)
    assert "(the stack's)" in f.fix.summary


def test_automatic_is_derived_from_the_plan():
    for fid, d in knowledge.finding_defs().items():
        assert "automatic" not in d["fix"]
        assert F.is_automatic(d) == ("plan" in d["fix"])
    assert F.is_automatic(F.definition("version.torch")) and not F.is_automatic(F.definition("gpu.none"))


@pytest.mark.parametrize("fid, host", [
    ("gpu.none", True), ("gpu.bf16-unsupported", True), ("gpu.selection-empty", True), ("system.shm-small", True),
    ("gpu.memory-held", True), ("ray.live-session", True),
    # the environment's CUDA libraries and compiled kernels: a change to the env makes or clears them
    ("gpu.driver-too-old", False), ("gpu.no-kernel-image", False), ("gpu.libcuda-compat-older", False),
    ("gpu.forward-compat-803", False), ("ray.stale-session", False), ("version.torch", False),
])
def test_one_function_says_what_is_a_host_fact(fid, host):
    assert F.is_host_fact(fid) is host
    assert F.is_host_fact(F.make(fid, ["e"], severity="error", **_all_params(fid))) is host


def _all_params(fid: str) -> dict:
    d = F.definition(fid)
    texts = [d["title"], d["fix"]["summary"], *d["fix"].get("commands", []), *d["sources"]]
    return {k: "x" for t in texts for k in F.placeholders(t)}


def test_a_fix_recheck_judges_env_gpu_errors_but_never_host_facts():
    from doctor.fixes.session import judge

    def f(fid):
        return F.make(fid, ["e"], severity="error", **_all_params(fid))

    new, unfixed = judge([f("gpu.none")], [f("gpu.none"), f("gpu.bf16-unsupported"), f("gpu.driver-too-old")], set())
    assert new == ["gpu.driver-too-old"] and unfixed == []


def test_explain_names_the_rule_that_reports_an_id():
    out = run_doctor("explain", "gpu.driver-too-old").stdout
    assert "Reported by" in out and "doctor.rules.gpu:driver_too_old" in out
    assert "scope environment" in out
    out = run_doctor("explain", "runtime.unrecognized-failure").stdout
    assert "doctor.triage:_unrecognized" in out


def test_every_placeholder_is_a_plain_name():
    # "{'use_reentrant': False}" in a fix text is read by str.format as a field with a format spec and
    # crashes the report at run time; braces meant literally must be written {{ }}.
    bad = []
    for fid, d in knowledge.finding_defs().items():
        fix = d.get("fix") or {}
        for text in [d["title"], fix.get("summary", ""), *fix.get("commands", [])]:
            for _, name, spec, conv in string.Formatter().parse(text):
                if name is not None and (not name.isidentifier() or spec or conv):
                    bad.append((fid, name, spec))
    assert not bad, bad
