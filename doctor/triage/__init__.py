"""Triage: name the cause of a failed run from its console log (`doctor triage LOG`).

Signatures, failure markers and line clean-up are data (knowledge/triage.yaml); causes are findings
from knowledge/findings.yaml with the matching log lines (and their line numbers) as evidence.
A run is blamed only when the log shows it failed: a traceback, an error line or a non-zero exit
after the last training step (or anywhere, in a log without training steps), and no completion
marker."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from doctor import knowledge
from doctor.findings import Finding, hold_unrunnable, make

MAX_EVIDENCE = 8
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_LIBRARY = re.compile(r"(?:site|dist)-packages/|/lib/python\d+(?:\.\d+)?/|^<frozen |^<string>|/_bootstrap|\.pyx$"
                      # a source checkout of a stack library (/workspace/vllm/vllm/…): still the library's code
                      r"|/(vllm|torch|ray|transformers|flash_attn|xformers|tensordict|triton|numpy|pyarrow|datasets)"
                      r"/\1/")


@functools.lru_cache(maxsize=None)
def spec() -> dict:
    raw = knowledge.load("triage")
    sigs = [{**s, "fatal": s.get("fatal", True), "rx": re.compile(s["pattern"])}
            for s in knowledge.load("signatures") if "log" in s["contexts"]]
    return {
        "prefixes": [re.compile(p) for p in raw["line_prefixes"]],
        # the same prefixes for a whole text: at each line start, never across a newline
        "leading": re.compile("^(?:" + "|".join("(?:" + p.replace(r"\s", r"[ \t]").lstrip("^") + ")"
                                                  for p in raw["line_prefixes"][1:]) + ")+", re.M),
        "completion": list(raw["completion_markers"]),
        "benign": re.compile("|".join(f"(?:{b['pattern']})" for b in raw.get("benign_lines", [])) or "(?!)"),
        # re.M: the same patterns serve one line and the whole joined text
        "markers": [(m["name"], re.compile(m["pattern"], re.M)) for m in raw["failure_markers"]],
        "signatures": sigs,
        "versions": [(v.get("dist"), re.compile(v["pattern"])) for v in raw.get("log_versions", [])],
    }


@dataclass
class Triage:
    log: str
    lines: int
    status: str                      # failed | completed | no-failure-evidence
    failed: bool
    last_step: int | None = None
    last_step_line: int | None = None
    failure: dict | None = None      # first failure marker: {line, marker, text}
    findings: list[Finding] = field(default_factory=list)
    log_stack: dict = field(default_factory=dict)   # versions the log itself shows (log_context)
    differs: list[str] = field(default_factory=list)  # how they differ from the locked set

    def to_document(self) -> dict:
        return {"schema_version": 1, "log": self.log, "status": self.status, "failed": self.failed,
                "lines": self.lines, "last_step": self.last_step, "last_step_line": self.last_step_line,
                "failure": self.failure, "log_stack": self.log_stack, "differs": self.differs,
                "findings": [f.to_dict() for f in self.findings]}


def log_context(text: str) -> dict[str, str]:
    """The versions a log shows of its own stack (knowledge/triage.yaml log_versions): first match
    per distribution; Python as 3.N."""
    from packaging.utils import canonicalize_name

    found: dict[str, str] = {}
    if len(text) > 2_000_000:  # versions show at the start (banners) or the end (a pasted env): not 10 MB of steps
        text = text[:1_000_000] + "\n" + text[-1_000_000:]
    for dist, rx in spec()["versions"]:
        for m in rx.finditer(text):
            g = {k: v for k, v in m.groupdict().items() if v}
            name = canonicalize_name(dist or g.get("dist", ""))
            version = f"3.{g['minor']}" if "minor" in g else g.get("version") or g.get("version2")
            if name and version and name not in found:
                found[name] = version
            break
    return found


def _mm(version: str | None) -> str | None:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


@functools.lru_cache(maxsize=8)
def _locked_pins(path: str) -> tuple[tuple[str, str], ...]:
    """A shipped lockfile's versions, read once per process (triage of a whole corpus asks each time)."""
    from pathlib import Path

    from doctor.lockfiles import parse_lockfile

    return tuple((n, d["version"]) for n, d in parse_lockfile(Path(path)).items())


def fix_params(log: dict[str, str], python_version: str | None) -> tuple[dict, list[str]]:
    """Parameters for the fixes from what the log shows, and how its stack differs from the locked
    set. A fix pins the locked set only where the log's stack is that set (or shows no versions):
    a log from vllm 0.2.4 is not told to install vllm 0.6.3.post1 as if that were the same fix."""
    from doctor.lockfiles import stack_lockfile

    stack = knowledge.default_stack()
    pyver = log.get("python") or python_version
    lock_path = stack_lockfile(stack["name"], pyver) if pyver and pyver in stack["python"] else None
    pins = dict(_locked_pins(str(lock_path))) if lock_path and lock_path.is_file() else {}
    if not pins:
        pins = knowledge.stack_pins(stack)
    # torch, transformers, ray, flash-attn: a minor release is the same ABI/API family; vllm and verl
    # change what they accept within one (verl 0.3 rejects vllm 0.6.3.post1, accepts 0.6.3)
    def release(v: str) -> str:
        return v.split("+")[0]
    same = {"torch": _mm, "transformers": _mm, "ray": _mm, "flash-attn": _mm, "xformers": release,
            "vllm": release, "verl": release}
    differs = [f"{d} {v} (the locked set: {pins[d]})" for d, v in log.items()
               if d in pins and d in same and same[d](v) != same[d](pins[d])]
    torch = (log.get("torch") or pins.get("torch", "")).split("+")[0]
    params = {"torch": torch, "torch_mm": _mm(torch) or "?", "vllm": log.get("vllm") or pins.get("vllm"),
              "py": pyver or "your Python"}
    if lock_path is not None and lock_path.is_file() and not differs:
        params["lockfile"] = str(lock_path)
    wheel = ((stack.get("flash_attn") or {}).get("wheels") or {}).get(pyver or "")
    if wheel and _mm(torch) == _mm(pins.get("torch")):
        params["wheel_url"] = wheel["url"]
    return {k: v for k, v in params.items() if v}, differs


def clean_lines(text: str, sp: dict) -> list[str]:
    """The log's lines without ANSI codes and the prefixes Ray, docker compose and torch.distributed
    put before them — done on the whole text at once (C speed), the same as line by line."""
    text = text.replace("\r\n", "\n")
    ansi, *_ = sp["prefixes"]
    if "[" in text:
        text = ansi.sub("", text)
    text = sp["leading"].sub("", text)  # one pass: `(?:p1|p2|p3)+` also takes a Ray prefix after a compose one
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


def _short(text: str, n: int = 240) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 1] + "…"


_LOG_LINE = re.compile(r"\b(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\b|\(\w+ pid=\d+|^\s*File \"|"
                       r"^\[\d{4}-\d\d-\d\d|^\s*\[rank\d+\]|Traceback|step:\d+|\bexit(?:ed)? (?:with )?code\b")


def looks_like_a_log(lines: list[str], sp: dict) -> bool:
    """A console log has log structure somewhere: a traceback, an exception or error line, a log
    level, a Ray or torch.distributed prefix, a training step. A README or a config file has none."""
    return any(_LOG_LINE.search(ln) or any(rx.search(ln) for _, rx in sp["markers"]) for ln in lines)


def triage_text(text: str, path: str, python: str = "python", python_version: str | None = None) -> Triage:
    """The triage of one log; `python` is the interpreter the fix commands name (its version, when
    known, picks the lockfile and wheel the fixes name if the log shows no Python of its own)."""
    sp = spec()
    lines = clean_lines(text, sp)
    log_stack = log_context("\n".join(lines))
    known, differs = fix_params(log_stack, python_version)
    last_step = last_step_idx = None
    from doctor.recipes.logparse import parse_step

    for i in range(len(lines) - 1, -1, -1):
        if "step:" in lines[i]:
            rec = parse_step(lines[i])
            if rec:
                last_step_idx, last_step = i, rec[0]
                break
    completed = any(mk in ln for ln in lines for mk in sp["completion"] if "validation metrics" in ln)
    start = last_step_idx + 1 if last_step_idx is not None else 0
    benign = _benign_lines(lines, start) | {i for i, _ in _scan(lines).matching(sp["benign"], start)}
    region = [i for i in range(start, len(lines)) if i not in benign]
    in_region = set(region)
    markers = sorted((i, name) for name, rx in sp["markers"] for i, _ in _scan(lines).matching(rx, start)
                     if i in in_region)
    fatal_hits = _match(lines, region, [s for s in sp["signatures"] if s.get("fatal")])
    failed = not completed and bool(markers or (last_step_idx is None and fatal_hits))
    t = Triage(log=path, lines=len(lines), failed=failed,
               status="failed" if failed else "completed" if completed else "no-failure-evidence",
               last_step=last_step, last_step_line=None if last_step_idx is None else last_step_idx + 1,
               log_stack=log_stack, differs=differs)
    if markers:
        i, name = markers[0]
        t.failure = {"line": i + 1, "marker": name, "text": _short(lines[i])}
    if not failed:
        return t
    causes = [h for h in fatal_hits if not h["sig"].get("symptom")]
    symptoms = [h for h in fatal_hits if h["sig"].get("symptom")]
    warn_hits = _match(lines, range(len(lines)), [s for s in sp["signatures"] if not s.get("fatal")])
    if causes:
        t.findings += _findings(causes, lines, then=symptoms, severity="error", python=python, known=known)
    elif symptoms:
        t.findings += _findings(symptoms, lines, severity="error", python=python, known=known)
    else:
        t.findings.append(_unrecognized(lines, start, markers))
    t.findings += _findings(warn_hits, lines, severity="warning", python=python, known=known)
    for f in t.findings:
        hold_unrunnable(f)
    return t


def causes_in_text(text: str, python: str = "python", **known) -> list[Finding]:
    """The causes the signature table names in one error text (an exception, a traceback from a
    step of the dry run): its fatal root causes, else its symptoms; nothing when none is known.
    `known` are facts the caller has (verl's version) in place of a signature's placeholders."""
    sp = spec()
    lines = clean_lines(text, sp)
    hits = _match(lines, range(len(lines)), [s for s in sp["signatures"] if s.get("fatal")])
    causes = [h for h in hits if not h["sig"].get("symptom")]
    return _findings(causes or hits, lines, then=[h for h in hits if h["sig"].get("symptom")] if causes else None,
                     severity="error", python=python, known=known)


_TRACEBACK_M = re.compile(r"^[ \t]*Traceback \(most recent call last\):", re.M)
_EXC_LINE = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b")


def _benign_lines(lines: list[str], start: int) -> set[int]:
    """Lines of tracebacks that are no failure by their structure: an exception Python reports as
    ignored (`Exception ignored in:` — raised in a destructor or at shutdown), a `SystemExit: 0`
    (a clean exit logged as a traceback), and a traceback a library caught and logged as a WARNING
    (the line before it is that warning: an optional dependency probe, say)."""
    out: set[int] = set()
    last_benign = False
    tracebacks = [i for i, _ in _scan(lines).matching(_TRACEBACK_M, start)]
    done = -1
    for i in tracebacks:
        if i <= done:
            continue
        j = i + 1
        while j < len(lines) and j < i + 400 and not _EXC_LINE.match(lines[j]):
            j += 1
        exc = lines[j].strip() if j < len(lines) else ""
        before = next((lines[k] for k in range(i - 1, max(start, i - 3) - 1, -1) if lines[k].strip()), "")
        chained = "During handling of the above exception" in before
        benign = ("Exception ignored in" in before or bool(re.match(r"SystemExit: 0\b", exc))
                  or (bool(re.search(r"\bWARNING\b", before)) and "Error" not in before)
                  or (chained and last_benign and (not exc or exc.startswith("SystemExit"))))
        if benign:
            out.update(range(i, min(j + 1, len(lines))))
        last_benign = benign
        done = j
    return out


class _Text:
    """The cleaned lines joined once, with each line's offset: one C-speed scan per pattern."""

    def __init__(self, lines: list[str]):
        import bisect

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


_LAST_SCAN: list = [None, None]   # (the lines, their _Text): one log is triaged at a time


def _scan(lines: list[str]) -> _Text:
    if _LAST_SCAN[0] is not lines:
        _LAST_SCAN[:] = [lines, _Text(lines)]
    return _LAST_SCAN[1]


def _match(lines: list[str], region, sigs: list[dict]) -> list[dict]:
    """One hit per finding ID (in signature order), with every matching line. A line belongs to the
    first signature that matches it (the table's order: specific before generic)."""
    allowed = set(region)
    start = min(allowed) if allowed else len(lines)
    scan = _scan(lines)
    owner: dict[int, tuple[int, dict, re.Match]] = {}
    for order, sig in enumerate(sigs):
        for i, m in scan.matching(sig["rx"], start):
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


def _evidence(lines: list[str], idx: list[int], prefix: str = "") -> list[str]:
    ev = [f"{prefix}line {i + 1}: {_short(lines[i])}" for i in idx[:MAX_EVIDENCE]]
    if len(idx) > MAX_EVIDENCE:
        ev.append(f"{prefix}… {len(idx) - MAX_EVIDENCE} more matching lines")
    return ev


class _Safe(dict):
    def __missing__(self, key):
        return "{" + key + "}"


def _findings(hits: list[dict], lines: list[str], then: list[dict] | None = None,
              severity: str | None = None, python: str = "python", known: dict | None = None) -> list[Finding]:
    out = []
    for n, h in enumerate(hits):
        sig = h["sig"]
        groups = _Safe(h["groups"])
        defaults = {k: v.format_map(groups) if isinstance(v, str) and "{" in v else v
                    for k, v in (sig.get("params") or {}).items()}
        params = {**defaults, **(known or {}), "python": python, "message": _short(lines[h["lines"][0]], 160),
                  **h["groups"]}
        ev = _evidence(lines, h["lines"])
        if n == 0 and then:
            for s in then:
                ev += _evidence(lines, s["lines"], prefix=f"then ({s['sig']['id']}) ")
        ev.append(f"signature: {sig['source']}")
        out.append(make(sig["id"], ev, severity=severity, **params))
    return out


def _unrecognized(lines: list[str], start: int, markers: list[tuple[int, str]]) -> Finding:
    """No signature matched: an error in the user's own code, or an unknown failure."""
    tb = [i for i, name in markers if name == "traceback"]
    if tb:
        first = tb[-1]
        frames, exc_idx = [], None
        for j in range(first + 1, min(len(lines), first + 400)):
            fm = _FRAME.match(lines[j])
            if fm:
                frames.append((j, fm))
                continue
            if frames and _EXC_LINE.match(lines[j]):
                exc_idx = j
                break
        message = _short(lines[exc_idx], 160) if exc_idx is not None else "traceback without an exception line"
        if frames:
            j, fm = frames[-1]
            where = f"{fm['path']}:{fm['line']} in {fm['func']}"
            evidence = _evidence(lines, [first, j] + ([exc_idx] if exc_idx is not None else []))
            if not _LIBRARY.search(fm["path"]):
                return make("runtime.app-error", evidence, message=message, where=where)
            return make("runtime.unrecognized-failure", evidence + [f"innermost frame: {where} (library code)"],
                        message=message)
    i = markers[-1][0] if markers else start
    return make("runtime.unrecognized-failure", _evidence(lines, [m[0] for m in markers][-MAX_EVIDENCE:] or [i]),
                message=_short(lines[i], 160) if i < len(lines) else "no failure line")


def read_log(path: str) -> str:
    """The log's text (`-`: stdin), decoded the way `recipes report` decodes logs."""
    import sys

    from doctor.recipes.logparse import decode, read_text

    if path == "-":
        return decode(sys.stdin.buffer.read(), "stdin")
    return read_text(path)
