"""The knowledge's regular expressions, compiled when first needed. A short `doctor triage` compiled
~250 of them at start-up (a fifth of its time, issue 25) to search one paste that most of them cannot
match. Each pattern's *needle* — literal text any match must contain, e.g. "CUDA error" for
`CUDA error: (out of memory|…)` — is read once from the parsed pattern when the knowledge file is
validated and kept with it (doctor/derived.py); a search of a text that does not contain the needle
returns no match without compiling. A needle is only ever a necessary condition, so a search
answers exactly what the compiled pattern would."""

from __future__ import annotations

import re
from typing import Iterator, Union

try:  # the parser behind re.compile: re._parser from 3.11, sre_parse before
    from re import _constants as _c, _parser as _p  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

# (alternatives: any one of them is in every match, lower-cased when the pattern ignores case; ignores case)
Needle = tuple[tuple[str, ...], bool]
MIN_NEEDLE = 3          # a shorter literal is in most texts: not worth the check
MAX_PREFILTER = 65536   # a longer text (a whole log) is searched by most patterns anyway: compile
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)}

NEEDLES: dict[str, Needle | None] = {}  # pattern -> its needle, filled as knowledge files load


def needle_of(pattern: str) -> Needle | None:
    """The literal text every match of `pattern` contains (one of several, for an alternation whose
    branches each have one), or None when there is none worth checking."""
    try:
        parsed = _p.parse(pattern)
    except re.error:
        return None
    ci = bool(parsed.state.flags & _c.SRE_FLAG_IGNORECASE)
    best = _best(_required(list(parsed)))
    if best is None:
        return None
    if ci:
        if not all(a.isascii() for a in best):
            return None  # a non-ASCII letter's case partners are not what str.lower() gives
        best = tuple(a.lower() for a in best)
    return best, ci


def _required(seq: list) -> list[tuple[str, ...]]:
    """Every requirement of a sequence of parsed items: each a tuple of literals one of which is in
    every match. Anything but a plain literal, a plain group, an alternation or a repeat of at least
    one ends a literal run (a conservative reading: a needle may be shorter than it could be)."""
    out: list[tuple[str, ...]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            out.append(("".join(run),))
            run.clear()

    for op, av in seq:
        if op is _c.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is _c.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if not add_flags and not del_flags:
                out += _required(list(sub))
        elif op is _c.BRANCH:
            alts = [_best(_required(list(branch))) for branch in av[1]]
            if alts and all(alts):
                out.append(tuple(sorted({a for alt in alts for a in alt})))  # type: ignore[union-attr]
        elif op in _REPEATS and av[0] >= 1:
            out += _required(list(av[2]))
    flush()
    return out


def _best(reqs: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    good = [r for r in reqs if min(map(len, r)) >= MIN_NEEDLE]
    return max(good, key=lambda r: (min(map(len, r)), -len(r))) if good else None


class LazyPattern:
    """re.Pattern's search/match/finditer, compiled on the first text that contains the needle."""

    __slots__ = ("pattern", "flags", "_needle", "_rx")

    def __init__(self, pattern: str, flags: int, needle: Needle):
        self.pattern, self.flags, self._needle = pattern, flags, needle
        self._rx: re.Pattern | None = None

    @property
    def compiled(self) -> re.Pattern:
        if self._rx is None:
            self._rx = re.compile(self.pattern, self.flags)
        return self._rx

    def _cannot_match(self, text: str) -> bool:
        if self._rx is not None or len(text) > MAX_PREFILTER:
            return False
        alts, ci = self._needle
        if ci:
            if not text.isascii():
                return False
            text = text.lower()
        return not any(a in text for a in alts)

    def search(self, text: str, *args) -> re.Match | None:
        return None if self._cannot_match(text) else self.compiled.search(text, *args)

    def match(self, text: str, *args) -> re.Match | None:
        return None if self._cannot_match(text) else self.compiled.match(text, *args)

    def finditer(self, text: str, *args) -> Iterator[re.Match]:
        return iter(()) if self._cannot_match(text) else self.compiled.finditer(text, *args)

    def __getattr__(self, name: str):  # anything else (sub, groupindex, …): the compiled pattern's
        return getattr(self.compiled, name)


Matcher = Union[re.Pattern, LazyPattern]  # what compile_knowledge gives: either searches the same way


def compile_knowledge(pattern: str, flags: int = 0) -> Matcher:
    """A knowledge file's pattern: lazy when its needle is known, else compiled now. A flag given
    here that ignores case makes the needle's check ignore case too."""
    needle = NEEDLES.get(pattern)
    if needle is None:
        return re.compile(pattern, flags)
    alts, ci = needle
    if flags & re.IGNORECASE and not ci:
        if not all(a.isascii() for a in alts):
            return re.compile(pattern, flags)
        needle = (tuple(a.lower() for a in alts), True)
    return LazyPattern(pattern, flags, needle)
