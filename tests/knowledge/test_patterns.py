"""Lazy knowledge patterns (doctor/knowledge/patterns.py): a needle is a necessary condition, so a
lazy pattern answers exactly what the compiled one answers — checked on every knowledge pattern
against every line of the real pastes in tests/data/corpus."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from doctor import knowledge
from doctor.knowledge.patterns import NEEDLES, LazyPattern, compile_knowledge, needle_of

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"


def _corpus_texts() -> list[str]:
    texts = []
    for p in sorted(CORPUS.rglob("*.log")):
        text = p.read_text(encoding="utf-8", errors="replace")
        texts.append(text[:60000])            # whole pastes (the prefilter's size) …
        texts += text.splitlines()[:400]      # … and single lines (a class reads one message)
    return texts


@pytest.fixture(scope="module")
def texts() -> list[str]:
    for name in ("signatures", "triage", "log_metrics", "environment"):
        knowledge.load(name)
    return _corpus_texts()


@pytest.mark.parametrize("flags", [0, re.I])
def test_lazy_patterns_answer_what_compiled_ones_answer(texts, flags):
    patterns = [p for p, n in NEEDLES.items() if n is not None]
    assert len(patterns) > 150, "the knowledge's patterns were not collected with their needles"
    lazy_seen = 0
    for pattern in patterns:
        lazy, plain = compile_knowledge(pattern, flags), re.compile(pattern, flags)
        if not isinstance(lazy, LazyPattern):
            continue
        lazy_seen += 1
        for text in texts:
            got, want = lazy.search(text), plain.search(text)
            assert (got and got.span()) == (want and want.span()), (pattern, text[:200])
    assert lazy_seen > 150


@pytest.mark.parametrize("pattern, needle", [
    (r"CUDA error: (out of memory|an illegal memory access)", (("an illegal memory access", "out of memory"), False)),
    (r"CUDA error: (OOM|bad)", (("CUDA error: ",), False)),      # the longest requirement wins
    (r"No module named '(?P<mod>[\w.]+)'", (("No module named '",), False)),
    (r"foo bar|baz qux", (("baz qux", "foo bar"), False)),
    (r"(?i)Address already in use", (("address already in use",), True)),
    (r"(?:abc)+def\d", (("abc",), False)),                       # a repeat of at least one is required
    (r"(?:xyzzy)?de", None),                                     # an optional group is not required
    (r"ab|cdef", None),                                          # one branch without a needle: none
    (r"(?=lookahead)x", None),                                   # lookarounds are not read
    (r"(?i:MiXeD)case", (("case",), False)),                     # a scoped flag ends the run
    (r"(?i)naïve", None),                                        # non-ASCII text ignoring case: no needle
])
def test_needle_of(pattern, needle):
    assert needle_of(pattern) == needle


def test_a_text_without_the_needle_compiles_nothing():
    NEEDLES[r"only-in-this-test (\d+)"] = needle_of(r"only-in-this-test (\d+)")
    lazy = compile_knowledge(r"only-in-this-test (\d+)")
    assert isinstance(lazy, LazyPattern)
    assert lazy.search("a traceback that does not say it") is None and lazy._rx is None
    assert list(lazy.finditer("nothing here")) == [] and lazy._rx is None
    m = lazy.search("… only-in-this-test 42 …")
    assert m and m.group(1) == "42" and lazy._rx is not None
    assert lazy.groupindex == {} and lazy.sub("N", "only-in-this-test 7") == "N"   # the rest: the compiled pattern's


def test_a_long_text_is_searched_by_the_compiled_pattern():
    NEEDLES[r"needle-long (\d+)"] = needle_of(r"needle-long (\d+)")
    lazy = compile_knowledge(r"needle-long (\d+)")
    assert lazy.search("x" * 70000) is None and lazy._rx is not None   # > MAX_PREFILTER: no check, compiled
