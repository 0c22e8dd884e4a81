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
