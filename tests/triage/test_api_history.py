"""The generated API history (knowledge/api_history/<dist>.json, built by benchmarks/build_api_history.py
from the released archives) answers a name a failure asks for with the release that added or removed
it; its files are checked on load; a log showing a release that has the name rules the answer out."""

from __future__ import annotations

import json

import pytest

from doctor import knowledge
from doctor.knowledge import KnowledgeError
from doctor.triage import triage_text
from doctor.triage.releases import api_change

DISTS = knowledge.api_history_dists()


@pytest.mark.parametrize("dist", DISTS)
def test_each_shipped_history_loads_with_its_shape_checked(dist):
    h = knowledge.api_history(dist)
    assert h["dist"] == dist and len(h["releases"]) >= 5 and h["source"]
    # every class with attributes and every callable with keyword arguments has its own lifetime
    assert set(h.get("attrs", {})) <= set(h.get("classes", {}))
    assert set(h.get("kwargs", {})) <= set(h.get("callables", {}))


def test_a_malformed_history_is_one_knowledge_error(tmp_path, monkeypatch):
    bad = {"dist": "accelerate", "source": "test", "releases": ["1.0.0", "1.1.0"],
           "names": {"accelerate": {"X": [[0, 5]]}}}        # a range past the releases
    (tmp_path / "accelerate.json").write_text(json.dumps(bad))
    monkeypatch.setattr(knowledge, "API_HISTORY_DIR", tmp_path)
    knowledge.api_history.cache_clear()
    try:
        with pytest.raises(KnowledgeError, match="names"):
            knowledge.api_history("accelerate")
    finally:
        knowledge.api_history.cache_clear()


# https://github.com/uclaml/SPPO/issues/7: accelerate 0.23.0 (the repo's pin) under a Trainer that passes
# use_seedable_sampler, which accelerate added in a later release (the reporter: upgrading to 0.31.0 fixed it)
SPPO = "`Accelerator.__init__() got an unexpected keyword argument use_seedable_sampler`"


@pytest.mark.skipif("accelerate" not in DISTS, reason="no accelerate history shipped")
def test_a_keyword_the_installed_release_predates_is_answered_with_the_release_that_added_it():
    got = api_change(SPPO, {"accelerate": "0.23.0"})
    assert got is not None and got["dist"] == "accelerate" and "added_in" in got, got
    assert got["added_in"].startswith("0.2") and f"accelerate>={got['added_in']}" in got["text"], got
    # the release it names has it; 0.23.0 (the log's) does not
    h = knowledge.api_history("accelerate")
    assert h["releases"].index(got["added_in"]) > h["releases"].index("0.23.0")


@pytest.mark.skipif("accelerate" not in DISTS, reason="no accelerate history shipped")
def test_a_log_showing_a_release_that_has_the_name_rules_the_answer_out():
    assert api_change(SPPO, {"accelerate": "0.30.0"}) is None


@pytest.mark.skipif("accelerate" not in DISTS, reason="no accelerate history shipped")
def test_triage_puts_the_release_into_the_api_finding():
    t = triage_text("it got the following error:\n" + SPPO + "\naccelerate==0.23.0\n", "sppo-7.log")
    f = t.findings[0]
    assert f.id == "runtime.api-mismatch", [x.id for x in t.findings]
    assert "pip install 'accelerate>=" in f.fix.summary and "accelerate" in f.title


def test_a_name_no_history_holds_is_not_answered():
    assert api_change("ImportError: cannot import name 'NoSuchThing' from 'accelerate'", {}) is None


# https://github.com/4AI/LS-LLaMA/issues/11: code copied from an older transformers builds the decoder layer
# without the layer_idx that a later release made required (maintainer: downgrade transformers to 4.32.1)
@pytest.mark.skipif("transformers" not in DISTS, reason="no transformers history shipped")
def test_a_required_parameter_the_call_lacks_names_the_release_that_added_it():
    msg = "TypeError: LlamaDecoderLayer.__init__() missing 1 required positional argument: 'layer_idx'"
    got = api_change(msg, {"transformers": "4.38.2"})
    assert got is not None and got["dist"] == "transformers", got
    assert got["added_in"].startswith("4.3") and f"transformers<={got['last_with']}" in got["text"], got
    # a release without the parameter: not this cause (and vllm's class of the same name is not the log's)
    assert api_change(msg, {"transformers": "4.30.2"}) is None


@pytest.mark.skipif("transformers" not in DISTS, reason="no transformers history shipped")
def test_a_bare_key_error_naming_a_model_type_is_the_transformers_release_that_added_it():
    from doctor.triage.models import model_type_key, support_text

    # https://github.com/arcee-ai/mergekit/issues/17 ("KeyError: 'mistral'"; maintainer: pip install -U transformers)
    assert model_type_key("'mistral'") == "mistral"
    assert "transformers 4.34 or later" in support_text("mistral")
    assert model_type_key("'prompt'") is None and model_type_key("'mistral' and more") is None
    t = triage_text("KeyError: 'mistral'\n", "mergekit-17.log")
    assert t.findings[0].id == "runtime.model-type-unknown" and "4.34" in t.findings[0].fix.summary
