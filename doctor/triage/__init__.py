"""Triage: name the cause of a failed run from its console log (`doctor triage LOG`).

Signatures, failure markers and line clean-up are data (knowledge/triage.yaml); causes are findings
from knowledge/findings.yaml with the matching log lines (and their line numbers) as evidence.
A run is blamed only when the log shows it failed: a traceback, an error line or a non-zero exit
after the last training step (or anywhere, in a log without training steps), and no completion
marker."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
import sys

from doctor.names import canonical_name

from doctor import knowledge
from doctor.findings import Finding, hold_unrunnable, make
from doctor.knowledge.patterns import Matcher, compile_knowledge
from doctor.lockfiles import locked_versions, stack_lockfile
from doctor.logparse import decode, parse_step, read_text
from doctor.signatures import (MAX_EVIDENCE, SafeFormat, clean_lines, evidence, findings_for, match, scan, short,
                               spec)
from doctor.failure import Failure, Frame, classify, model
from doctor.triage.models import model_type_key, module_too_new, support_text, too_new
from doctor.triage.releases import api_change, release_text, removed_name


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
    root: dict | None = None         # the failure model's root exception (doctor/failure.py)
    log_stack: dict = field(default_factory=dict)   # versions the log itself shows (log_context)
    differs: list[str] = field(default_factory=list)  # how they differ from the locked set

    def to_document(self) -> dict:
        return {"schema_version": 1, "log": self.log, "status": self.status, "failed": self.failed,
                "lines": self.lines, "last_step": self.last_step, "last_step_line": self.last_step_line,
                "failure": self.failure, "root": self.root, "log_stack": self.log_stack, "differs": self.differs,
                "findings": [f.to_dict() for f in self.findings]}


# The words before a version that make it a fix or a requirement, not the run's own ("upgrade to vllm 0.8.5")
_NOT_THE_RUNS = re.compile(r"(?i)(?:\b(?:upgrad|updat|requir|need|least|instead|recommend|than|switch|downgrad|pin|"
                           r"try)\w*)\s*(?:(?:it|to|with|the)\s*)*\W?$")
_DIST_ALIAS = {"pytorch": "torch", "flashinfer-python": "flashinfer"}


def log_context(text: str) -> dict[str, str]:
    """The versions a log shows of its own stack (knowledge/triage.yaml log_versions): the first
    match per distribution, banners and paths before prose; Python as 3.N."""
    found: dict[str, str] = {}
    if len(text) > 512_000:  # versions show at the start (banners) or the end (a pasted env): not 10 MB of steps
        text = text[:256_000] + "\n" + text[-256_000:]   # (thousands of lines each way; each pattern scans it)
    for dist, rx, prose in spec()["versions"]:
        for m in rx.finditer(text):
            g = {k: v for k, v in m.groupdict().items() if v}
            canonical = canonical_name(dist or g.get("dist", ""))
            name = _DIST_ALIAS.get(canonical, canonical)
            version = f"3.{g['minor']}" if "minor" in g else g.get("version") or g.get("version2")
            if prose and _NOT_THE_RUNS.search(text[max(0, m.start() - 30):m.start()]):
                continue
            if name and version and name not in found:
                found[name] = version
            if dist:       # a pattern of one distribution: its first match is its banner
                break
    return found


def _mm(version: str | None) -> str | None:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


@functools.lru_cache(maxsize=8)
def _locked_pins(path: str) -> tuple[tuple[str, str], ...]:
    """A shipped lockfile's versions, read once per process (triage of a whole corpus asks each time)."""
    return locked_versions(Path(path))


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


# a line its logger printed at WARNING level: the level word after nothing but a timestamp, brackets or a pid
_WARNING_LEVEL = re.compile(r"^[^a-z\n]{0,40}?\b(?:WARNING|WARN)\b")
# an issue's title as a paste's first line: a Markdown heading, or an issue template's tag ("[Bug]: …")
_TITLE = re.compile(r"\s*(?:#{1,2}[ \t]+\S|\[(?:Bug|BUG|bug|Usage|Installation|Question|Misc|Performance|Help)\]:?[ \t]+\S)")
_LOG_LINE = re.compile(r"\b(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\b|\(\w+ pid=\d+|^\s*File \"|"
                       r"^\[\d{4}-\d\d-\d\d|^\s*\[rank\d+\]|Traceback|step:\d+|\bexit(?:ed)? (?:with )?code\b")


# An exception named mid-line ("跑的时候报错 RuntimeError: …", "**ValueError: …**"): only in a paste that has
# no log structure at all, where no line-start marker can see it.
_MIDLINE_EXC = re.compile(r"(?<=\S)[ \t*`>:：，,]*(?<![A-Za-z0-9_.])((?:[A-Za-z_]\w*\.)*[A-Za-z]\w*(?:Error|Exception)\b:"
                          r"|(?:[a-z_]\w*\.){2,}[A-Z]\w+:(?=\s))")
# "valueerror: bfloat16 is only supported…": a paste lower-cased by a forum or a chat tool
_LOWER_EXC = re.compile(r"(?m)^(\s*)([a-z]+)(error|exception)(?=:)")


# code quoted in prose ("except ModuleNotFoundError:", "raise ValueError(…)"): an exception named, none raised
_CODE_BEFORE = re.compile(r"\b(?:except|raise|import|isinstance|catch(?:es|ing)?)\s*\(?\s*$")


def _split_midline(m: re.Match) -> str:
    """An exception named mid-line starts a line of its own, unless the line is code naming it."""
    before = m.string[m.string.rfind("\n", 0, m.start()) + 1:m.end() - len(m[1])]
    return m[0] if _CODE_BEFORE.search(before) else "\n" + m[1]


def _join_open_spans(lines: list[str], most: int = 3) -> list[str]:
    """A quote or a `code span` opened on one line and closed on one of the next few is one message
    a paste (or a terminal) wrapped: `…so: undefined` / `symbol: _ZN3c10…` becomes one line again."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        quote = next((q for q in ("`", '"') if line.count(q) % 2 == 1 and "```" not in line), None)
        end = None
        if quote is not None:
            for j in range(i + 1, min(len(lines), i + 1 + most)):
                if not lines[j].strip():
                    break          # a paragraph ends: the quote was never closed here
                if lines[j].count(quote) % 2 == 1:
                    end = j
                    break
        if end is None:
            out.append(line)
            i += 1
        else:
            out.append(" ".join([line.rstrip(), *(ln.strip() for ln in lines[i + 1:end + 1])]))
            i = end + 1
    return out


def looks_like_a_log(lines: list[str], sp: dict) -> bool:
    """A console log has log structure somewhere: a traceback, an exception or error line, a log
    level, a Ray or torch.distributed prefix, a training step. A README or a config file has none."""
    # a title or a person's "I have this error" is prose about a failure, not log structure
    structural = [rx for name, rx in sp["markers"] if name not in ("title", "statement", "quoted")]
    return any(_LOG_LINE.search(ln) or any(rx.search(ln) for rx in structural) for ln in lines)


def triage_text(text: str, path: str, python: str = "python", python_version: str | None = None,
                target_first: bool = False) -> Triage:
    """The triage of one log; `python` is the interpreter the fix commands name (its version, when
    known, picks the lockfile and wheel the fixes name if the log shows no Python of its own)."""
    sp = spec()
    lines = _join_open_spans(clean_lines(text, sp))
    if not looks_like_a_log(lines, sp):  # a paste of prose: an exception quoted mid-sentence is its own line
        prose = _LOWER_EXC.sub(lambda m: m[1] + m[2].capitalize() + m[3].capitalize(), "\n".join(lines))
        lines = clean_lines(_MIDLINE_EXC.sub(_split_midline, prose), sp)
    joined = "\n".join(lines)   # read whole by log_context and too_new
    log_stack = log_context(joined)
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
    # an issue's title as the paste's first line — a Markdown heading or a template's "[Bug]:", or a short
    # first line with no log structure of its own ("nvcc fatal unsupported gpu architecture 'compute_86'"):
    # a failure statement where it says one (triage.yaml `title`)
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is not None and not (_TITLE.match(text) or (len(lines[first]) <= 160 and not _LOG_LINE.search(lines[first]))):
        first = None
    # the title marker reads the first line only: not a scan of a 10 MB log
    markers = [(i, name) for name, rx in sp["markers"] if name != "title"
               for i, _ in scan(lines).matching(rx, start) if i in in_region]
    title = dict(sp["markers"]).get("title")
    if title is not None and first is not None and first in in_region and title.search(lines[first]):
        markers.append((first, "title"))
    markers.sort()
    fatal_hits = match(lines, region, [s for s in sp["signatures"] if s.get("fatal")])
    # a symptom its logger printed at WARNING level (Ray: "A worker died …" while it retries the task)
    # does not end the run by itself: without a traceback or an error line after it, the run went on
    alarming = [h for h in fatal_hits if not h["sig"].get("symptom")
                or any(not _WARNING_LEVEL.match(lines[i]) for i in h["lines"])]
    failed = not completed and bool(markers or (last_step_idx is None and alarming))
    if not failed and not completed:
        waiting = _waiting_at_end(lines, sp)
        if waiting:
            failed, markers = True, [(i, "waiting") for i in waiting]
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
    failure = model(lines, region)
    t.root = _root_document(failure, log_stack)
    r = failure.root
    importer = r.owner if r is not None and "Import" in (r.type or "") else None
    if importer in (None, "stdlib", "__main__"):
        importer = _importer_named(lines, region)
    if r is not None and r.owner and log_stack.get(canonical_name(r.owner)):
        known = {**known, "owner_version": log_stack[canonical_name(r.owner)]}   # the raising package's release
    if importer:
        # the package whose frame ran the failing import: the one of the pair written for another release
        known = {**known, "importer": importer + (f" {log_stack[canonical_name(importer)]}"
                                                  if log_stack.get(canonical_name(importer)) else "")}
    # An errno or a signal is the decisive detail of a failure: its class goes before the signature
    # families that only name where it surfaced (NCCL's posix_fallocate ENOSPC is a small /dev/shm).
    decisive = _by_class(failure, lines, region, python, known, decisive_only=True)
    if decisive is not None:
        t.findings.append(decisive)
        t.findings += [f for f in findings_for(causes, lines, severity="error", python=python, known=known)
                       if f.id != decisive.id]
    elif causes:
        t.findings += findings_for(causes, lines, then=symptoms, severity="error", python=python, known=known)
    else:
        by_class = _by_class(failure, lines, region, python, known)
        if by_class is not None:
            t.findings.append(by_class)
        elif symptoms:
            t.findings += findings_for(symptoms, lines, severity="error", python=python, known=known)
        else:
            t.findings.append(_by_class(failure, lines, region, python, known, last=True)
                              or _unrecognized(lines, start, markers, failure, log_stack, path, python, last_step))
    _name_removed_in_a_release(t, failure, lines, region, log_stack, python)
    r = failure.root
    model_type = model_type_key(r.message) if r is not None and r.type == "KeyError" and \
        r.owner in (None, "transformers") and (not t.findings or t.findings[0].id in GENERIC_ANSWERS) else None
    if model_type and r is not None:
        # a bare KeyError naming a model type a transformers release added: the config lookup of an older one
        _lead_with(t, make("runtime.model-type-unknown", evidence(lines, [r.line]) + failure.describe(),
                           severity="error", model_type=model_type, support=support_text(model_type),
                           message=short(r.text, 160), python=python))
    newer = module_too_new(joined, log_stack) or (too_new(joined, log_stack)
                                                  if (not t.findings or t.findings[0].id in _WEAK) else None)
    if newer is not None:
        # the model is newer than the engine release the log shows: what the generic answer could not see
        where = [i for i, ln in enumerate(lines) if newer["family"].split("-")[0].lower() in ln.lower()][:2]
        t.findings.insert(0, make("runtime.model-too-new", evidence(lines, where) + [
            f"{newer['lib']} {newer['have']} (the version the log shows); {newer['family']} first in {newer['lib']} "
            f"{newer['first']}, documented to work from {newer['need']} (knowledge/model_support.yaml)"],
            severity="error", **newer))
    t.findings += findings_for(warn_hits, lines, severity="warning", python=python, known=known)
    for f in t.findings:
        hold_unrunnable(f)
    return t


# the answers that only describe a failure whose cause is not known
GENERIC_ANSWERS = {"runtime.unrecognized-failure", "runtime.app-error"}
# answers that a name removed by a known release explains better: generic, or a symptom of the mismatch
_RELEASE_EXPLAINS = {"runtime.unrecognized-failure", "runtime.app-error", "trainer.step-failed", "runtime.library-bug",
                     "config.setting-rejected", "runtime.library-advice", "runtime.module-missing"}


def _name_removed_in_a_release(t: Triage, failure: Failure, lines: list[str], region: list[int],
                               log_stack: dict, python: str) -> None:
    """Where the failure asks for a name a known release removed (knowledge/release_changes.yaml, checked
    by hand) or added or removed (knowledge/api_history, generated from the released archives), its
    import/API finding says which release and what to pin: added to the finding that already names the
    mismatch, or put first where only a generic answer was given."""
    asked = [r.text for r in [failure.root, *(r for r in failure.raised if r is not failure.root)] if r and r.text]
    text = "\n".join(asked) or "\n".join(lines[i] for i in region[-400:])
    removed = removed_name(text, log_stack)
    if removed is not None:
        ev = [f"{removed['dist']} {removed['removed_in']} removed what the failure asks for ({removed['asked']}): "
              f"knowledge/release_changes.yaml, {removed['source'][:160]}"]
    else:
        # the code that asked (the raising frame's package, of whichever copy of the exception shows frames):
        # the other half of the pair
        readers = [r.owner for r in [failure.root, *failure.raised] if r is not None and r.frames
                   and r.owner not in (None, "stdlib", "generated")]
        removed = api_change(text, log_stack, readers[0] if readers else None)
        if removed is None:
            return
        ev = [f"{removed['evidence']} — what the failure asks for ({removed['asked']}): {removed['source']}"]
    fid = "runtime.api-mismatch" if removed["kind"].startswith("kwarg") or removed["kind"] == "attr" \
        else "import.name-missing"
    release = release_text(removed)
    first = t.findings[0] if t.findings else None
    if first is not None and first.id == fid:
        params = {"python": python, **first.params, "release": release}
        if fid == "runtime.api-mismatch" and not first.params.get("callee"):
            params["callee"] = removed["dist"]   # the message named no callee ("__init__() got …"): the table does
        t.findings[0] = make(fid, first.evidence + ev, severity="error", **params)
    elif first is None or first.id in _RELEASE_EXPLAINS:
        params = ({"callee": removed["dist"], "arg": removed["name"],
                   **({"caller": removed["reader"]} if removed.get("reader") else {})}
                  if fid == "runtime.api-mismatch" else
                  {"module": removed["module"], "name": removed["name"], "package": removed["dist"]})
        _lead_with(t, make(fid, ev, severity="error", release=release, message=short(removed["asked"], 160),
                           python=python, **params))


def _lead_with(t: Triage, finding: Finding) -> None:
    """Put a specific answer first; a "cause not known" answer in first place said only what it explains."""
    if t.findings and t.findings[0].id in GENERIC_ANSWERS:
        t.findings.pop(0)
    t.findings.insert(0, finding)


# answers a model newer than the engine explains better: generic, or the symptom of an unknown model
_WEAK = {"runtime.unrecognized-failure", "runtime.app-error", "trainer.step-failed", "config.setting-rejected",
         "runtime.library-advice", "runtime.model-type-unknown", "runtime.ray-worker-crashed", "runtime.api-mismatch",
         # "architectures … not supported": also what a vLLM older than the model says
         "vllm.qwen2-not-inspectable", "runtime.architecture-unsupported"}

_PY_PATH = re.compile(r"[\w./~-]+\.py\b")


def _importer_named(lines: list[str], region: list[int]) -> str | None:
    """Where no traceback shows who imported: the package of a file a person names beside the failed
    import ("cannot import X from vllm.sequence in verl/workers/rollout/vllm_rollout.py")."""
    for i in region:
        if re.search(r"(?i)can ?not import|no module named|importerro", lines[i]):
            # Python names the module's own file after it ("… from 'transformers.models.x' (…/x/__init__.py)"):
            # the package that lacks the name, not the one that asked for it
            asked = re.search(r"from '([\w]+)", lines[i])
            for path in _PY_PATH.findall(lines[i]):
                owner = Frame(path, 0, "").owner
                if owner not in (None, "stdlib", "generated") and not (asked and owner == asked[1]):
                    return owner
    return None


_TRACEBACK_M = re.compile(r"^[ \t]*Traceback \(most recent call last\):", re.M)
_EXC_LINE = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b")


def _waiting_at_end(lines: list[str], sp: dict) -> list[int]:
    """The retry lines a log ends in (knowledge/triage.yaml wait_lines): at least `repeats` of the
    same line (numbers aside) with nothing after them but prose or blank lines; else []."""
    for rx, repeats in sp["wait"]:
        found: list[int] = []
        for i in range(len(lines) - 1, max(-1, len(lines) - 60), -1):
            ln = lines[i]
            if rx.search(ln):
                found.append(i)
            elif ln.strip() and not _looks_like_prose(ln):
                break
        same = {re.sub(r"\d+(?:\.\d+)?", "N", lines[i]).strip() for i in found}
        if found and len(found) >= repeats and len(same) == 1:
            return sorted(found)
    return []


def _looks_like_prose(line: str) -> bool:
    """What a person writes under a paste (a fence, a question, a heading or quote), not a log line:
    anything else after the retry lines (say "Server is up") means the wait ended."""
    s = line.strip()
    return s.startswith(("```", "#", ">")) or s.endswith(("?", "？"))


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


def _root_document(failure: Failure, log_stack: dict) -> dict | None:
    """The root exception as JSON: what failed, where, in whose code, wrapped by what."""
    r = failure.root
    if r is None and not failure.signal:
        return None
    doc: dict = {"signal": failure.signal, "wrappers": failure.wrappers}
    if r is not None:
        f = r.raising_frame
        owner = r.owner
        doc.update({"type": r.type or None, "message": short(r.message, 400), "line": r.line + 1,
                    "errno": r.errno, "raised_at": f"{f.path}:{f.line} in {f.func}" if f else None,
                    "owner": owner, "owner_version": log_stack.get(canonical_name(owner)) if owner else None})
    return doc


def _by_class(failure: Failure, lines: list[str], region: list[int], python: str, known: dict,
              decisive_only: bool = False, last: bool = False) -> Finding | None:
    """The finding of the first failure class (knowledge/triage.yaml) the failure belongs to; with
    `decisive_only`, only a class keyed by an errno or a signal, or marked decisive."""
    hit = classify(failure, lines, region, decisive_only, last)
    if hit is None:
        return None
    cls, raised, groups = hit
    line = groups.pop("_line", None)  # the line a text-only class read, where no exception matched
    # alternatives of one pattern name their groups dist/dist2, need/need2
    for k in [k for k in groups if k[-1].isdigit()]:
        groups.setdefault(k.rstrip("0123456789"), groups.pop(k))
    idx = sorted({raised.start, raised.line} if raised is not None else {line} if line is not None else set())
    if failure.signal and not idx:
        idx = [i for i in region if failure.signal in lines[i] or "exitcode" in lines[i] or "signal" in lines[i].lower()][-3:]
    message = (short(raised.text, 160) if raised is not None else short(lines[line], 160) if line is not None
               else f"died of {failure.signal}")
    ev = evidence(lines, idx) + failure.describe() + [f"failure class: {cls['source']}"]
    if groups.get("heads", "").isdigit() and groups.get("tp", "").isdigit():
        # the TP size that fits: divides the heads and the GPUs the configured size was set for
        groups["tp_fit"] = str(math.gcd(int(groups["heads"]), int(groups["tp"])))
        heads = int(groups["heads"])
        groups["valid"] = ", ".join(str(d) for d in range(1, min(heads, 64) + 1) if heads % d == 0)
    if all(groups.get(k, "").isdigit() for k in ("micro", "acc", "world")):
        # DeepSpeed's equation: train = micro × accumulation × world; a valid train batch is a multiple of micro × world
        groups["product"] = str(int(groups["micro"]) * int(groups["acc"]) * int(groups["world"]))
        groups["micro_world"] = str(int(groups["micro"]) * int(groups["world"]))
    support = support_text(groups.get("model_type"), groups.get("tokenizer_class"), groups.get("rope_type"))
    if support:
        groups["support"] = support
    if raised is not None and "settings" not in groups:
        # the values a check's message names: snake_case settings, --flags, quoted names
        names = list(dict.fromkeys(re.findall(r"--[a-z][\w-]+|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|'[^'\s]{2,40}'", raised.message)))
        if names:
            groups["settings"] = ", ".join(names[:5])
    fmt = SafeFormat(groups)
    defaults = {k: v.format_map(fmt) if isinstance(v, str) else v for k, v in (cls.get("params") or {}).items()}
    params = {**defaults, **known, "python": python, "message": message, **groups}
    caller, callee = raised.boundary if raised is not None else (None, None)
    named_cls = groups.get("cls")   # a class the matched text names, even on a line that raised nothing
    if raised is not None and not named_cls:
        init = re.match(r"(\w+)\.__init__\(\)", raised.message or "")
        named_cls = init[1] if init else None
    if named_cls and callee in (None, "your code", caller):
        callee = class_owner(named_cls) or callee   # the library that defines the class the message names
    src = raised if raised is not None else failure.root  # a text class read a line: the root raised it
    owner = src.owner if src is not None and src.owner not in ("stdlib", "__main__") else None
    params.update({k: v for k, v in (("caller", caller), ("callee", callee), ("owner", owner)) if v and k not in params})
    # a class's params may name the finding's other placeholders ({callee} in `direction`): filled once
    # the boundary is known, else from the finding's own defaults
    base = {**_finding_defaults(cls["id"]), **params}
    for k in (cls.get("params") or {}):   # only the class's own texts: what came from the log is not a template
        if k not in groups and isinstance(params.get(k), str) and "{" in params[k]:
            params[k] = params[k].format_map(SafeFormat(base))
            if re.fullmatch(r"\{\w+\}", params[k]):  # nothing to fill it with ({owner} of a cut traceback)
                del params[k]                          # the finding's own default says it instead
    if "data_file" not in params:  # the data file the log names, for the finding's command
        data_file = re.search(r"[\w./~-]+\.parquet\b", "\n".join(lines[i] for i in region[-400:]))
        if data_file:
            params["data_file"] = data_file.group(0)
    return make(cls["id"], ev, severity="error", **params)


@functools.lru_cache(maxsize=None)
def _class_owners() -> list[tuple[Matcher, str]]:
    return [(compile_knowledge(c["pattern"]), c["dist"]) for c in knowledge.load("triage").get("class_owners", [])]


def class_owner(name: str) -> str | None:
    """The distribution that defines a class (or whose class a subclass's name ends in), by knowledge/triage.yaml."""
    return next((dist for rx, dist in _class_owners() if rx.search(name)), None)


def _finding_defaults(fid: str) -> dict:
    return next((dict(d.get("defaults") or {}) for d in knowledge.load("findings") if d["id"] == fid), {})


def _unrecognized(lines: list[str], start: int, markers: list[tuple[int, str]], failure: Failure,
                  log_stack: dict, path: str, python: str, last_step: int | None) -> Finding:
    """No signature and no failure class: describe the root exception honestly — what, where, whose
    code — and say what to run next. In the user's own code it is a bug there, not the environment."""
    r = failure.root
    params = {"python": python} if python != "python" else {}
    if path not in ("-", "<stdin>") and Path(path).is_file():
        params["log"] = str(Path(path).resolve())
    when = (f"when: after training step {last_step}" if last_step is not None
            else "when: before the first training step (start-up)")
    if r is not None and (r.type or r.message):
        message = short(r.text, 160)
        f = r.raising_frame
        idx = sorted({i for i in (r.start, r.line) if i is not None})
        ev = evidence(lines, idx) + failure.describe() + [when]
        if r.owner and r.owner != "stdlib" and log_stack.get(canonical_name(r.owner)):
            ev.append(f"{r.owner} {log_stack[canonical_name(r.owner)]} (the version the log shows)")
        if f is not None and r.owner is None and r.message:  # a cut traceback: its last frame raised nothing we saw
            return make("runtime.app-error", ev, message=message, where=f"{f.path}:{f.line} in {f.func}")
        return make("runtime.unrecognized-failure", ev, message=message, **params)
    if failure.signal:
        i = markers[-1][0] if markers else start
        return make("runtime.unrecognized-failure", evidence(lines, [i]) + failure.describe() + [when],
                    message=f"a process died of {failure.signal}", **params)
    i = markers[-1][0] if markers else start
    return make("runtime.unrecognized-failure", evidence(lines, [m[0] for m in markers][-MAX_EVIDENCE:] or [i]) + [when],
                message=short(lines[i], 160) if i < len(lines) else "no failure line", **params)


def read_log(path: str) -> str:
    """The log's text (`-`: stdin), decoded the way `recipes report` decodes logs."""
    if path == "-":
        return decode(sys.stdin.buffer.read(), "stdin")
    return read_text(path)
