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
from pathlib import Path
import sys

from packaging.utils import canonicalize_name

from doctor import knowledge
from doctor.findings import Finding, hold_unrunnable, make
from doctor.lockfiles import parse_lockfile, stack_lockfile
from doctor.logparse import decode, parse_step, read_text
from doctor.signatures import (MAX_EVIDENCE, clean_lines, evidence, findings_for, match, scan, short,
                               spec)
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_LIBRARY = re.compile(r"(?:site|dist)-packages/|/lib/python\d+(?:\.\d+)?/|^<frozen |^<string>|/_bootstrap|\.pyx$"
                      # a source checkout of a stack library (/workspace/vllm/vllm/…): still the library's code
                      r"|/(vllm|torch|ray|transformers|flash_attn|xformers|tensordict|triton|numpy|pyarrow|datasets)"
                      r"/\1/")


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
    return tuple((n, d["version"]) for n, d in parse_lockfile(Path(path)).items())


def fix_params(log: dict[str, str], python_version: str | None, target_first: bool = False) -> tuple[dict, list[str]]:
    """Parameters for the fixes from what the log shows, and how its stack differs from the locked
    set. A fix pins the locked set only where the log's stack is that set (or shows no versions):
    a log from vllm 0.2.4 is not told to install vllm 0.6.3.post1 as if that were the same fix."""
    stack = knowledge.default_stack()
    # The fixes are for the env they name: an explicit --python (or a bundle's recorded env) decides the
    # Python of the wheel and lockfile they name; else the log's own Python, then the default interpreter's.
    pyver = (python_version or log.get("python")) if target_first else (log.get("python") or python_version)
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


_LOG_LINE = re.compile(r"\b(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\b|\(\w+ pid=\d+|^\s*File \"|"
                       r"^\[\d{4}-\d\d-\d\d|^\s*\[rank\d+\]|Traceback|step:\d+|\bexit(?:ed)? (?:with )?code\b")


# An exception named mid-line ("跑的时候报错 RuntimeError: …", "**ValueError: …**"): only in a paste that has
# no log structure at all, where no line-start marker can see it.
_MIDLINE_EXC = re.compile(r"(?<=\S)[ \t*`>:：，,]*\b((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b:)")


def looks_like_a_log(lines: list[str], sp: dict) -> bool:
    """A console log has log structure somewhere: a traceback, an exception or error line, a log
    level, a Ray or torch.distributed prefix, a training step. A README or a config file has none."""
    return any(_LOG_LINE.search(ln) or any(rx.search(ln) for _, rx in sp["markers"]) for ln in lines)


def triage_text(text: str, path: str, python: str = "python", python_version: str | None = None,
                target_first: bool = False) -> Triage:
    """The triage of one log; `python` is the interpreter the fix commands name (its version, when
    known, picks the lockfile and wheel the fixes name if the log shows no Python of its own)."""
    sp = spec()
    lines = clean_lines(text, sp)
    if not looks_like_a_log(lines, sp):  # a paste of prose: an exception quoted mid-sentence is its own line
        lines = clean_lines(_MIDLINE_EXC.sub(r"\n\1", "\n".join(lines)), sp)
    log_stack = log_context("\n".join(lines))
    known, differs = fix_params(log_stack, python_version, target_first)
    last_step = last_step_idx = None
    for i in range(len(lines) - 1, -1, -1):
        if "step:" in lines[i]:
            rec = parse_step(lines[i])
            if rec:
                last_step_idx, last_step = i, rec[0]
                break
    completed = any(mk in ln for ln in lines for mk in sp["completion"] if "validation metrics" in ln)
    start = last_step_idx + 1 if last_step_idx is not None else 0
    benign = _benign_lines(lines, start) | {i for i, _ in scan(lines).matching(sp["benign"], start)}
    region = [i for i in range(start, len(lines)) if i not in benign]
    in_region = set(region)
    markers = sorted((i, name) for name, rx in sp["markers"] for i, _ in scan(lines).matching(rx, start)
                     if i in in_region)
    fatal_hits = match(lines, region, [s for s in sp["signatures"] if s.get("fatal")])
    failed = not completed and bool(markers or (last_step_idx is None and fatal_hits))
    t = Triage(log=path, lines=len(lines), failed=failed,
               status="failed" if failed else "completed" if completed else "no-failure-evidence",
               last_step=last_step, last_step_line=None if last_step_idx is None else last_step_idx + 1,
               log_stack=log_stack, differs=differs)
    if markers:
        i, name = markers[0]
        t.failure = {"line": i + 1, "marker": name, "text": short(lines[i])}
    if not failed:
        return t
    causes = [h for h in fatal_hits if not h["sig"].get("symptom")]
    symptoms = [h for h in fatal_hits if h["sig"].get("symptom")]
    warn_hits = match(lines, range(len(lines)), [s for s in sp["signatures"] if not s.get("fatal")])
    if causes:
        t.findings += findings_for(causes, lines, then=symptoms, severity="error", python=python, known=known)
    elif symptoms:
        t.findings += findings_for(symptoms, lines, severity="error", python=python, known=known)
    else:
        t.findings.append(_unrecognized(lines, start, markers))
    t.findings += findings_for(warn_hits, lines, severity="warning", python=python, known=known)
    for f in t.findings:
        hold_unrunnable(f)
    return t


_TRACEBACK_M = re.compile(r"^[ \t]*Traceback \(most recent call last\):", re.M)
_EXC_LINE = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b")


def _benign_lines(lines: list[str], start: int) -> set[int]:
    """Lines of tracebacks that are no failure by their structure: an exception Python reports as
    ignored (`Exception ignored in:` — raised in a destructor or at shutdown), a `SystemExit: 0`
    (a clean exit logged as a traceback), and a traceback a library caught and logged as a WARNING
    (the line before it is that warning: an optional dependency probe, say)."""
    out: set[int] = set()
    last_benign = False
    tracebacks = [i for i, _ in scan(lines).matching(_TRACEBACK_M, start)]
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
        message = short(lines[exc_idx], 160) if exc_idx is not None else "traceback without an exception line"
        if frames:
            j, fm = frames[-1]
            where = f"{fm['path']}:{fm['line']} in {fm['func']}"
            lines_ev = evidence(lines, [first, j] + ([exc_idx] if exc_idx is not None else []))
            if not _LIBRARY.search(fm["path"]):
                return make("runtime.app-error", lines_ev, message=message, where=where)
            return make("runtime.unrecognized-failure", lines_ev + [f"innermost frame: {where} (library code)"],
                        message=message)
    i = markers[-1][0] if markers else start
    return make("runtime.unrecognized-failure", evidence(lines, [m[0] for m in markers][-MAX_EVIDENCE:] or [i]),
                message=short(lines[i], 160) if i < len(lines) else "no failure line")


def read_log(path: str) -> str:
    """The log's text (`-`: stdin), decoded the way `recipes report` decodes logs."""
    if path == "-":
        return decode(sys.stdin.buffer.read(), "stdin")
    return read_text(path)
