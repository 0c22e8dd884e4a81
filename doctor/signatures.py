"""The signature table (knowledge/signatures.yaml) and the one matcher that serves its three
contexts: an import's error (the imports probe), a console log (triage), and an error text a probe
or a dry-run step captured (vLLM's registry child, the Ray smoke). A hit is a finding from
knowledge/findings.yaml with the matching lines as evidence."""

from __future__ import annotations

import bisect
import functools
import re

from doctor import knowledge
from doctor.findings import Finding, make
from doctor.knowledge.patterns import Matcher, compile_knowledge

MAX_EVIDENCE = 8
_ANSI_ESC = re.compile(r"\x1b\[[0-9;]*m")   # a colour code (knowledge/triage.yaml's first line prefix, ESC kept)
# a full-width colon after a Latin name ("AssertionError： Torch not compiled …" in a Chinese paste): the
# exception's own colon, typed with a CJK input method
_FULLWIDTH_COLON = re.compile(r"(?<=[A-Za-z0-9_])：[ \t]*")
# (a literal first, not a lookbehind: the engine then skips to each ".init" at C speed; 10 MB in 0.01 s, not 0.2)
_MARKDOWN_INIT = re.compile(r"\.init(?:\(\))? (got an unexpected keyword argument '(?P<arg>[^'\n]{1,60})'|"
                            r"got multiple values|missing \d+ required|takes \d)")


def _dunder_init(m: re.Match) -> str:
    if m.start() == 0 or not (m.string[m.start() - 1].isalnum() or m.string[m.start() - 1] == "_"):
        return m.group(0)   # not a method of a name ("….init got" after a space)
    rest = m.group(1)
    if m["arg"] and " " in m["arg"]:   # an identifier has no spaces: Markdown's emphasis took the underscores
        rest = rest.replace(m["arg"], m["arg"].replace(" ", "_"))
    return ".__init__() " + rest


_CURLY_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"'})
_ANSI_BARE = re.compile(r"\[[0-9;]*m")       # what every match of that prefix contains (ESC or not)


@functools.lru_cache(maxsize=None)
def spec() -> dict:
    raw = knowledge.load("triage")
    sigs = [{**s, "fatal": s.get("fatal", True), "rx": compile_knowledge(s["pattern"])}
            for s in knowledge.load("signatures") if "log" in s["contexts"]]
    return {
        "prefixes": [re.compile(p) for p in raw["line_prefixes"]],
        # the same prefixes for a whole text: at each line start, never across a newline
        "leading": re.compile("^(?:" + "|".join("(?:" + p.replace(r"\s", r"[ \t]").lstrip("^") + ")"
                                                  for p in raw["line_prefixes"][1:]) + ")+", re.M),
        "completion": list(raw["completion_markers"]),
        "benign": re.compile("|".join(f"(?:{b['pattern']})" for b in raw.get("benign_lines", [])) or "(?!)"),
        # re.M: the same patterns serve one line and the whole joined text
        "markers": [(m["name"], compile_knowledge(m["pattern"], re.M)) for m in raw["failure_markers"]],
        "wait": [(compile_knowledge(w["pattern"], re.I), w["repeats"]) for w in raw.get("wait_lines", [])],
        "signatures": sigs,
        "versions": [(v.get("dist"), compile_knowledge(v["pattern"]), bool(v.get("prose"))) for v in raw.get("log_versions", [])],
    }


def clean_lines(text: str, sp: dict) -> list[str]:
    """The log's lines without ANSI codes and the prefixes Ray, docker compose and torch.distributed
    put before them — done on the whole text at once (C speed), the same as line by line."""
    text = text.replace("\r\n", "\n")
    ansi, *_ = sp["prefixes"]
    if "[" in text:
        # the colour codes with their ESC first: a search for a literal, 3× faster on 10 MB of colour codes
        # than the knowledge's pattern, whose ESC is optional (every "[" is a start); that pattern then runs
        # only where a code without its ESC is left (a paste that lost it: "[36m(main_task …")
        if "\x1b" in text:
            text = _ANSI_ESC.sub("", text)
        if _ANSI_BARE.search(text):
            text = ansi.sub("", text)
    if "：" in text:
        text = _FULLWIDTH_COLON.sub(": ", text)
    if "‘" in text or "“" in text:
        # typographic quotes a word processor or issue editor put in place of Python's ('‘name’' → "'name'")
        text = text.translate(_CURLY_QUOTES)
    if ".init" in text:
        # Markdown ate the dunder of a call-signature TypeError ("Seq2SeqTrainingArguments.init() got an …"),
        # and with it the underscores of the argument ("Accelerator.init got … argument 'dispatch batches'")
        text = _MARKDOWN_INIT.sub(_dunder_init, text)
    text = sp["leading"].sub("", text)  # one pass: `(?:p1|p2|p3)+` also takes a Ray prefix after a compose one
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


def short(text: str, n: int = 240) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 1] + "…"


class Text:
    """The cleaned lines joined once, with each line's offset: one C-speed scan per pattern."""

    def __init__(self, lines: list[str]):
        self._bisect = bisect.bisect_right
        self.text = "\n".join(lines)
        self.offsets = [0]
        pos = self.text.find("\n")
        while pos != -1:
            self.offsets.append(pos + 1)
            pos = self.text.find("\n", pos + 1)

    def matching(self, rx: re.Pattern, start: int = 0):
        """(line index, match) for the first match of rx on each line from `start` on."""
        last = -1
        for m in rx.finditer(self.text, self.offsets[start] if start < len(self.offsets) else len(self.text)):
            i = self._bisect(self.offsets, m.start()) - 1
            if i != last:
                last = i
                yield i, m


_LAST_SCAN: list = [None, None]   # (the lines, their Text): one log is triaged at a time


def scan(lines: list[str]) -> Text:
    if _LAST_SCAN[0] is not lines:
        _LAST_SCAN[:] = [lines, Text(lines)]
    return _LAST_SCAN[1]


def match(lines: list[str], region, sigs: list[dict]) -> list[dict]:
    """One hit per finding ID (in signature order), with every matching line. A line belongs to the
    first signature that matches it (the table's order: specific before generic)."""
    allowed = set(region)
    start = min(allowed) if allowed else len(lines)
    text = scan(lines)
    owner: dict[int, tuple[int, dict, re.Match]] = {}
    for order, sig in enumerate(sigs):
        for i, m in text.matching(sig["rx"], start):
            if i in allowed and i not in owner:
                owner[i] = (order, sig, m)
    hits: dict[str, dict] = {}
    for i in sorted(owner):
        order, sig, m = owner[i]
        h = hits.setdefault(sig["id"], {"sig": sig, "lines": [], "groups": {}, "order": order})
        h["lines"].append(i)
        for k, v in m.groupdict().items():
            if v is not None:
                h["groups"].setdefault(k, v)
    return sorted(hits.values(), key=lambda h: h["order"])


def evidence(lines: list[str], idx: list[int], prefix: str = "") -> list[str]:
    ev = [f"{prefix}line {i + 1}: {short(lines[i])}" for i in idx[:MAX_EVIDENCE]]
    if len(idx) > MAX_EVIDENCE:
        ev.append(f"{prefix}… {len(idx) - MAX_EVIDENCE} more matching lines")
    return ev


class SafeFormat(dict):
    def __missing__(self, key):
        return "{" + key + "}"


def findings_for(hits: list[dict], lines: list[str], then: list[dict] | None = None,
              severity: str | None = None, python: str = "python", known: dict | None = None) -> list[Finding]:
    out = []
    for n, h in enumerate(hits):
        sig = h["sig"]
        groups = SafeFormat(h["groups"])
        defaults = {k: v.format_map(groups) if isinstance(v, str) and "{" in v else v
                    for k, v in (sig.get("params") or {}).items()}
        params = {**defaults, **(known or {}), "python": python, "message": short(lines[h["lines"][0]], 160),
                  **h["groups"]}
        ev = evidence(lines, h["lines"])
        if n == 0 and then:
            for s in then:
                ev += evidence(lines, s["lines"], prefix=f"then ({s['sig']['id']}) ")
        ev.append(f"signature: {sig['source']}")
        out.append(make(sig["id"], ev, severity=severity, **params))
    return out


def causes_in_text(text: str, python: str = "python", **known) -> list[Finding]:
    """The causes the signature table names in one error text (an exception, a traceback from a
    step of the dry run): its fatal root causes, else its symptoms; nothing when none is known.
    `known` are facts the caller has (verl's version) in place of a signature's placeholders."""
    sp = spec()
    lines = clean_lines(text, sp)
    hits = match(lines, range(len(lines)), [s for s in sp["signatures"] if s.get("fatal")])
    causes = [h for h in hits if not h["sig"].get("symptom")]
    return findings_for(causes or hits, lines, then=[h for h in hits if h["sig"].get("symptom")] if causes else None,
                     severity="error", python=python, known=known)


@functools.lru_cache(maxsize=None)
def _import_signatures() -> list[tuple[str, Matcher, str]]:
    return [(s["id"], compile_knowledge(s["pattern"]), s["source"]) for s in knowledge.load("signatures")
            if "import" in s["contexts"]]


def default_params(finding_id: str, context: str = "import") -> dict:
    """The placeholders a signature of that context gives its finding (signatures.yaml `params`):
    what a rule that only knows the ID fills in where it has nothing better."""
    sigs = [s for s in knowledge.load("signatures") if s["id"] == finding_id and s.get("params")]
    sigs.sort(key=lambda s: context not in s["contexts"])  # that context's own first, then any other's
    return dict(sigs[0]["params"]) if sigs else {}


@functools.lru_cache(maxsize=1024)
def classify(message: str) -> str | None:
    """The finding ID an import's error message proves; None if unknown. Cached: every rule that reads
    the failed imports asks for the same texts (rules/failures.import_failures), once each here."""
    for fid, rx, _ in _import_signatures():
        if rx.search(message):
            return fid
    return None


def cause_of(text: str, python: str, facts: dict | None = None, **known) -> Finding | None:
    """The root cause the signature table (its log entries) names in an error text that a probe
    captured — vLLM's registry child's stderr, the Ray smoke's error and logs, a dry-run step's
    exception — or None. The caller lists its own finding under it (caused_by). The installed
    versions (facts) fill the finding's {protobuf}, {ray}, … instead of the table's defaults."""
    if facts and facts.get("distributions"):
        known = {**{n.replace("-", "_"): d["version"] for n, d in facts["distributions"].items()}, **known}
    causes = causes_in_text(text, python, **known) if text.strip() else []
    return causes[0] if causes else None


_VERSIONISH = re.compile(r"\d+\.\d+")
_QUOTED = re.compile(r"'[^']+'|\"[^\"]+\"|`[^`]+`")
_ADVICE = re.compile(r"\b(?:please|upgrade|install|requires?|required|must|need|should|not supported|"
                     r"not found|no such|cannot|can't|could not|couldn't|too (?:old|new|many|large|long)|"
                     r"out of|invalid|unsupported|denied|gated|missing|not configured)\b", re.I)
_GENERIC = re.compile(r"see (?:the )?(?:root cause|above|error) |see root cause above|check the (?:logs|"
                      r"error)|for more details|^\s*$", re.I)
_ERRNO_MARK = re.compile(r"\[Errno \d+\]|\berrno\b", re.I)


def specificity(exc_type: str, message: str) -> int:
    """How much an exception's message says about its cause: an errno, a version, a quoted name,
    advice ("please upgrade X"), minus what only points elsewhere ("see root cause above"). Used to
    quote the most specific exception of a chain — in a log (triage) and in a probe's import."""
    score = 3 if _ERRNO_MARK.search(message) else 0
    score += 2 if _ADVICE.search(message) else 0
    score += 1 if _VERSIONISH.search(message) else 0
    score += 1 if _QUOTED.search(message) else 0
    score += 1 if exc_type else -1       # a typed exception over a bare error line
    score -= 4 if _GENERIC.search(message) else 0
    short_type = exc_type.rsplit(".", 1)[-1]
    score -= 2 if short_type in ("SystemExit", "KeyboardInterrupt", "CalledProcessError") else 0
    return score
