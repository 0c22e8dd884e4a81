"""Every excerpt of the public-record corpus (tests/data/corpus: real failure text from GitHub
threads, copied as the threads show it, with the cause the thread states) is a test case: the
failures name their cause with a fix, the negative controls (scary lines from runs that went on)
are never blamed. Known misses are listed by name in tests/data/corpus/EXPECT.yaml (strict: a miss
that starts to pass fails here until it is taken off the list)."""

from __future__ import annotations

import sys

import pytest
import yaml

from conftest import REPO

sys.path.insert(0, str(REPO))
from benchmarks.triage_corpus import CORPUS, cases, judge  # noqa: E402

CASES = [c for c in cases() if not c.get("out_of_scope")]
MISSES = yaml.safe_load((CORPUS / "EXPECT.yaml").read_text()).get("misses") or {}


def test_the_corpus_is_what_the_issue_asked_for():
    failures = [c for c in CASES if c["expect_id"] is not None]
    families = {c["family"] for c in failures}
    negatives = [c for c in CASES if c["expect_id"] is None]
    assert len(failures) >= 150 and len(families) >= 30 and len(negatives) >= 25, (len(failures), len(families))
    for c in cases():
        assert (CORPUS / c["file"]).stat().st_size > 0 and c["url"].startswith("https://"), c["file"]
    # fresh-*/ batches are first-look measurements (benchmarks/triage_batch.py), not tuned expectations
    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.log")
               if not p.relative_to(CORPUS).parts[0].startswith("fresh-")}
    assert on_disk == {c["file"] for c in cases()}, on_disk ^ {c["file"] for c in cases()}


PARAMS = [pytest.param(c, id=c["file"], marks=[pytest.mark.xfail(strict=True, reason=f"known miss: {MISSES[c['file']]}")]
                       if c["file"] in MISSES else []) for c in CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_corpus_case(case):
    r = judge(case)
    assert r["ok"], f"{case['file']}: expected {case['expect_id']}, named {r['got']} (thread: {case['url']})"


def test_the_miss_list_names_only_corpus_files():
    assert set(MISSES) <= {c["file"] for c in CASES}
