"""pip.conflict decides a requirement of an extra without parsing it (doctor/rules/packages.py
_extra_only): on every requirement of the recorded envs (a CPU venv of the default lock, the H200's
Python 3.12) the shortcut says "not required" only where packaging's own marker evaluation does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from doctor.rules.packages import _extra_only, violated

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("facts_file", ["facts-working.json", "h200-py312-facts.json"])
def test_the_shortcut_agrees_with_packaging(facts_file):
    facts = json.loads((DATA / facts_file).read_text())
    env = dict(facts["markers"], extra="")
    taken = 0
    for d in facts["distributions"].values():
        for text in d["requires"]:
            if _extra_only(text):
                taken += 1
                assert not Requirement(text).marker.evaluate(env), text
    assert taken > 1000   # most requirements of an env are an extra's


@pytest.mark.parametrize("text, extra_only", [
    ('pytest; extra == "test"', True),
    ('x>=1; python_version < "3.9" and extra == "dev"', True),
    ("x; extra == 'a' or extra == 'b'", False),                  # a disjunction: parsed
    ('x; python_version >= "3.8"', False),
    ('x; extra != "cpu"', False),
    ("x>=1", False),
])
def test_which_requirements_take_the_shortcut(text, extra_only):
    assert _extra_only(text) is extra_only


def test_an_unmet_requirement_is_still_reported():
    facts = {"markers": {"python_version": "3.11", "sys_platform": "linux", "platform_machine": "x86_64",
                         "platform_system": "Linux", "implementation_name": "cpython", "os_name": "posix",
                         "python_full_version": "3.11.7", "platform_python_implementation": "CPython",
                         "platform_release": "", "platform_version": "", "implementation_version": "3.11.7"},
             "distributions": {"a": {"name": "a", "version": "1", "requires": ['b>=2', 'c; extra == "x"']},
                               "b": {"name": "b", "version": "1", "requires": []}}}
    assert [w for _, w in violated(facts)] == ["b>=2"]
