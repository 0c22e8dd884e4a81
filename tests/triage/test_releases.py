"""The release that removed a name (knowledge/release_changes.yaml, doctor/triage/releases.py): every
entry is found from the message Python prints for it, a log showing a release that still had the
name rules the entry out, and the finding names the release and the pin."""

from __future__ import annotations

import pytest

from doctor import knowledge
from doctor.triage import triage_text
from doctor.triage.releases import release_text, removed_name

ENTRIES = knowledge.load("release_changes")


def _message(e: dict) -> str:
    """What Python prints when code asks for the entry's name."""
    if e["kind"] == "module-removed":
        return f"ModuleNotFoundError: No module named '{e['module']}.{e['name']}'"
    if e["kind"].startswith("kwarg"):
        callee = e["module"].rsplit(".", 1)[-1]
        return f"TypeError: {callee}.__init__() got an unexpected keyword argument '{e['name']}'"
    return f"ImportError: cannot import name '{e['name']}' from '{e['module']}'"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: f"{e['dist']}-{e['name']}")
def test_each_entry_is_found_from_its_message(entry):
    got = removed_name(_message(entry), {})
    assert got is not None, _message(entry)
    # another entry of the same name and place may come first (a name removed from two modules): same release family
    assert (got["name"], got["dist"]) == (entry["name"], entry["dist"]), (got, entry)


def test_a_log_showing_a_release_that_still_had_the_name_rules_it_out():
    msg = "ImportError: cannot import name 'cached_download' from 'huggingface_hub'"
    assert removed_name(msg, {"huggingface-hub": "0.25.2"}) is None
    assert removed_name(msg, {"huggingface-hub": "0.26.1"})["removed_in"] == "0.26.0"


def test_a_name_nobody_removed_is_not_answered():
    assert removed_name("ImportError: cannot import name 'no_such_thing' from 'transformers'", {}) is None
    assert removed_name("AttributeError: module 'numpy' has no attribute 'float64x'", {}) is None


def test_the_triage_names_the_release_and_the_pin():
    t = triage_text("Traceback (most recent call last):\n  File \"/w/run.py\", line 2, in <module>\n"
                    "    import numpy as np; x = np.float(3)\n"
                    "AttributeError: module 'numpy' has no attribute 'float'.\n", "x.log")
    f = t.findings[0]
    assert f.id == "import.name-missing" and "numpy<1.24.0" in f.fix.summary and "1.23.5" in f.fix.summary, f.fix.summary
    kw = triage_text("TypeError: SFTConfig.__init__() got an unexpected keyword argument 'max_seq_length'\n", "x.log")
    assert kw.findings[0].id == "runtime.api-mismatch" and "trl 0.20.0" in kw.findings[0].fix.summary


def test_release_text_says_what_replaces_it():
    e = next(e for e in ENTRIES if e["name"] == "cached_download")
    assert "hf_hub_download" in release_text(e) and "huggingface-hub<0.26.0" in release_text(e)
