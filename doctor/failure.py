"""The failure model of a console log: which exceptions it shows, how they chain, which ones only wrap
another, and the root one described by its structure — exception type, errno, signal, message, the
frame that raised it and the package that owns that frame, the step it happened after.

A signature names one literal message; this names the kind of failure, so that a cause learnt from
one thread reaches the next one: `[Errno 24]` and "Too many open files" are the same errno whoever
raised them, a KeyError raised inside transformers' auto-config is a model type the installed
transformers does not know, whatever the model. Which structures are wrappers and which classes of
failure have a known cause is data (knowledge/triage.yaml: `wrappers`, `failure_classes`)."""

from __future__ import annotations

import errno as _errno
import functools
import os
import re
import signal as _signal
from dataclasses import dataclass, field

from doctor import knowledge
from doctor.knowledge.patterns import Matcher, compile_knowledge
from doctor.signatures import specificity as message_specificity

_TRACEBACK = re.compile(r"^\s*(?:\S+\s+)?Traceback \(most recent call last\)")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
# IPython / Jupyter frames: "[/usr/local/lib/python3.11/dist-packages/datasets/builder.py](…) in as_dataset(…)"
# a frame line whose head a paste cut off ('Monet/RL/verl/utils/dataset.py", line 227, in _build_messages')
_CUT_FRAME = re.compile(r'^\s*(?P<path>[^\s"]+\.pyx?)", line (?P<line>\d+), in (?P<func>\S+)')
# IPython 8's frame line: 'File ~/pkg/mod.py:670, in find_diff_features(cistopic_obj, …)'
_IPY_FRAME = re.compile(r"^\s*File (?P<path>[~/]\S+?\.pyx?):(?P<line>\d+), in (?P<func>[\w<>.]+)")
_NB_FRAME = re.compile(r"^\s*\[?(?P<path>/[^\s\]\[()]+\.py)\]?(?:\([^)]*\))? in (?P<func>[\w<>]+)")
# "pkg.mod.SomeError: message", "RayTaskError(KeyError): ray::f()", "KeyError: 'x'", "Killed" is not one
# (and types without such a suffix where their module names them: "pyarrow.lib.ArrowInvalid", "aiohttp.web_exceptions.
# HTTPRequestEntityTooLarge"; pyarrow's bare ArrowInvalid)
_EXC = re.compile(r"^\s*(?P<type>(?:[A-Za-z_]\w*\.)*(?:(?:[A-Z]\w*)?(?:Error|Exception|Exit|Interrupt|Failure)|"
                  r"KeyboardInterrupt|StopIteration|GeneratorExit|ArrowInvalid)|(?:[a-z_]\w*\.)+[A-Z]\w+(?=:\s))"
                  r"(?:\((?P<inner>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\))?(?::\s?(?P<msg>.*)|\s*$)")
_CLASS_REPR = re.compile(r"^\s*<class '([\w.]+)'>:")
# a message quoted without its exception type, whose wording only one type has (a person copied the
# message, not the line: "`Accelerator.__init__() got an unexpected keyword argument x`")
_IMPLIED_TYPES = [(re.compile(r"^\s*[\w.]*\w\(\) got an unexpected keyword argument '?\w"), "TypeError"),
                  (re.compile(r"^\s*cannot import name '\w+' from '"), "ImportError"),
                  (re.compile(r"^\s*No module named '[\w.]+'"), "ModuleNotFoundError")]
_CAUSE = "The above exception was the direct cause of the following exception"
_CONTEXT = "During handling of the above exception, another exception occurred"
_ERROR_LINE = re.compile(r"(?:^|\s)(?:ERROR|FATAL|CRITICAL)(?:\]|:|\s)|^\s*[EF]\d{4} |\[E \d|\bERROR \d\d-\d\d ")
# a warning or error line that may carry an errno ("NCCL WARN Call to posix_fallocate failed: No space left on device")
_COMPLAINT = re.compile(r"(?i)warn|error|fail|errno|cannot|unable")
_ERRNO = re.compile(r"\[Errno (\d+)\]|\berrno[ =:]+(\d+)|\bOSError\((\d+),")
_SIGNAL_NUM = re.compile(r"(?:exit ?code|exitcode|exit status|returncode|return code)\s*[:=]?\s*-(\d{1,2})\b"
                         r"|(?:killed by |received |got |terminated by )signal:? ?(\d{1,2})\b"
                         r"|\bsignal (\d{1,2})\b")
_SIGNAL_NAME = re.compile(r"(?:Signals\.|signal:? |received |killed by |got |terminated by |caught |died of )(SIG[A-Z]{2,6})\b"
                          r"|\b(SIG[A-Z]{2,6}) (?:received|caught)")
_SITE = re.compile(r"(?:site|dist)-packages/(?P<pkg>[A-Za-z_][\w]*)")
# a source checkout of a stack library: /workspace/vllm/vllm/engine/… is vllm's code
_CHECKOUT = re.compile(r"/(?P<pkg>vllm|verl|torch|ray|transformers|flash_attn|xformers|tensordict|triton|"
                       r"numpy|pyarrow|datasets|sglang|megatron|deepspeed|accelerate|trl|peft)/(?P=pkg)/")
# a logger's prefix before each line of a traceback it logs: vLLM's "ERROR 01-19 03:55:24 file.py:233] ",
# glog's "E1119 10:00:00.123456  1234 file.cc:12] ", logging's "2024-01-01 12:00:00,123 - name - ERROR - "
_LOGGER_PREFIX = re.compile(r"^\s*(?:(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) \d\d-\d\d [\d:.]+ \[?[\w.<>-]+:\d+\] ?"
                            r"|[EWIF]\d{4} [\d:.]+\s+\d+ [\w.-]+:\d+\] "
                            r"|\d{4}-\d\d-\d\d[ T][\d:,.]+ - [\w.-]+ - (?:ERROR|CRITICAL) - )")
# a fork's vendored verl (Archer2.0/verl/workers/…, TinyZero/verl/trainer/…): verl's code, not the user's
# (or a frame whose head a paste cut off: verl/utils/… at the start of the path)
_VERL_FORK = re.compile(r"(?:/|^)verl/(?:workers|trainer|utils|single_controller|models|third_party|protocol)\b")
_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages|dist-packages)|^<frozen ")


# The OSError subclasses of PEP 3151 and the errno each stands for (where a paste cut the "[Errno N]" off)
_ERRNO_OF_TYPE = {"PermissionError": "EACCES", "FileNotFoundError": "ENOENT", "FileExistsError": "EEXIST",
                  "IsADirectoryError": "EISDIR", "NotADirectoryError": "ENOTDIR", "ConnectionRefusedError": "ECONNREFUSED",
                  "ConnectionResetError": "ECONNRESET", "ConnectionAbortedError": "ECONNABORTED",
                  "BrokenPipeError": "EPIPE", "TimeoutError": "ETIMEDOUT", "ProcessLookupError": "ESRCH",
                  "ChildProcessError": "ECHILD", "BlockingIOError": "EAGAIN", "InterruptedError": "EINTR"}
# A frame whose path the paste elided before the package (".../mbridge/core/util.py"): that package's code
_ELIDED = re.compile(r"^(?:\.\.\.|…)/(?P<pkg>[A-Za-z_]\w*)/[\w/]+\.py$")


@dataclass
class Frame:
    path: str
    line: int
    func: str

    @property
    def owner(self) -> str | None:
        """The package whose code this frame is: site-packages/<pkg>/…, a checkout of a stack library,
        `stdlib`, or None for the user's own code."""
        m = _SITE.search(self.path) or _CHECKOUT.search(self.path) or _ELIDED.match(self.path)
        if m:
            return m.group("pkg")
        if _VERL_FORK.search(self.path):
            return "verl"
        if _STDLIB.search(self.path):
            return "stdlib"
        # code compiled at run time (<string>, a notebook cell is not: <ipython-input-…> is the user's)
        return "generated" if self.path.startswith("<") and not self.path.startswith("<ipython") else None


@dataclass
class Raised:
    """One exception (or, without a type, one error line) the log shows."""
    type: str                   # "OSError", "ray.exceptions.RayTaskError", "" for an error line
    message: str
    line: int                   # index of its exception (or error) line
    start: int                  # index of its traceback header (= line without one)
    frames: list[Frame] = field(default_factory=list)
    inner: str | None = None    # RayTaskError(KeyError) → KeyError
    linked_to_next: str | None = None   # "cause" | "context": how the next exception follows from this one
    wrapper: bool = False

    @property
    def short_type(self) -> str:
        return self.type.rsplit(".", 1)[-1]

    @property
    def text(self) -> str:
        return f"{self.type}: {self.message}" if self.type else self.message

    @property
    def raising_frame(self) -> Frame | None:
        return self.frames[-1] if self.frames else None

    @property
    def owner(self) -> str | None:
        """The package that raised it: the innermost frame that is not the standard library's (a
        library calls into the stdlib; the library is what failed)."""
        for f in reversed(self.frames):
            if f.owner != "stdlib":
                return f.owner
        if self.frames:
            return "stdlib"
        # no frames pasted: a qualified exception type names the package that defines (and raised) it
        top = self.type.split(".", 1)[0] if "." in self.type else None
        return top if top not in (None, "builtins", "__main__") else None

    @property
    def within(self) -> str | None:
        """The library whose own code both raised it and called the raising code (its two innermost
        frames outside the standard library): a failure inside one package, not at a call into it."""
        owners = [f.owner for f in self.frames if f.owner != "stdlib"][-2:]
        if len(owners) == 2 and owners[0] == owners[1] and owners[0] not in (None, "generated"):
            return owners[0]
        return None

    @property
    def boundary(self) -> tuple[str | None, str | None]:
        """(caller, callee): the last call in the frames from one package into another — where a
        signature or API mismatch between two versions shows (trl → vllm)."""
        owners = [f.owner for f in self.frames if f.owner not in ("stdlib", "generated")]
        for a, b in zip(reversed(owners[:-1]), reversed(owners[1:])):
            if a != b:
                return a or "your code", b or "your code"
        return None, owners[-1] if owners else None

    @functools.cached_property
    def errno(self) -> str | None:
        # asked for by the ranking and by every errno class: once. The message's own errno, else the one
        # the exception's type stands for (PEP 3151: PermissionError is EACCES/EPERM, …)
        return errno_of(self.message) or _ERRNO_OF_TYPE.get(self.short_type)


@dataclass
class Failure:
    raised: list[Raised]          # every exception and error line of the failure region, in log order
    root: Raised | None           # the most specific one of the failure (wrappers unwrapped)
    wrappers: list[str]           # the wrapper types the root was found under
    signal: str | None            # SIGKILL, SIGBUS… a process of the run died of

    def describe(self) -> list[str]:
        """Evidence lines: what failed, where, wrapped by what."""
        out = []
        r = self.root
        if r is not None:
            out.append(f"root exception: {r.text[:200]}")
            f = r.raising_frame
            if f is not None and not r.message:
                out.append(f"last frame shown: {f.path}:{f.line} in {f.func} (the paste ends before the exception's "
                           "message: it was raised further in)")
            elif f is not None:
                out.append(f"raised at {f.path}:{f.line} in {f.func}"
                           + (f" ({r.owner}'s code)" if r.owner and r.owner != "stdlib" else
                              " (your code)" if r.owner is None else ""))
            elif r.owner and r.owner not in ("stdlib", "generated"):
                out.append(f"raised in {r.owner}'s code (its exception type; the paste shows no frames)")
            if r.errno:
                out.append(f"errno {r.errno}: {os.strerror(getattr(_errno, r.errno))}")
        if self.wrappers:
            out.append("unwrapped from: " + ", ".join(dict.fromkeys(self.wrappers)))
        if self.signal:
            out.append(f"a process died of {self.signal} ({_signal.strsignal(_signal.Signals[self.signal])})")
        return out


@functools.lru_cache(maxsize=None)
def _strerrors() -> list[tuple[str, str]]:
    """(errno name, strerror text) for the errno texts distinctive enough to be found in prose."""
    out = []
    for num, name in _errno.errorcode.items():
        text = os.strerror(num)
        if len(text) >= 16 and not text.startswith("Unknown error"):
            out.append((name, text))
    return sorted(out, key=lambda t: -len(t[1]))


@functools.lru_cache(maxsize=None)
def _any_strerror() -> re.Pattern:
    """One scan for whether a line holds any strerror text at all (most lines hold none)."""
    return re.compile("|".join(re.escape(text.lower()) for _, text in _strerrors()))


_STRERROR_CHECKS = [0]   # how many texts were checked: the one-pass regex pays off only on a long log


def _has_strerror(low: str) -> bool:
    """Whether a lower-cased text holds any strerror text: a loop of `in` for the first few hundred texts (a
    paste's few lines: compiling the alternation of every strerror was a twentieth of a short triage), the
    compiled alternation after that (a long log's complaint lines)."""
    _STRERROR_CHECKS[0] += 1
    if _STRERROR_CHECKS[0] > 300:
        return _any_strerror().search(low) is not None
    return any(text in low for text in _lower_strerrors())


@functools.lru_cache(maxsize=None)
def _lower_strerrors() -> tuple[str, ...]:
    return tuple(text.lower() for _, text in _strerrors())


def errno_of(message: str) -> str | None:
    """The errno a message carries: `[Errno N]`, `errno=N`, or its strerror text ("Address already
    in use" is EADDRINUSE whoever prints it — torch's c10d, NCCL, a socket library)."""
    m = _ERRNO.search(message)
    if m:
        num = int(next(g for g in m.groups() if g))
        return _errno.errorcode.get(num)
    low = message.lower()
    if not _has_strerror(low):
        return None
    for (name, _), text in zip(_strerrors(), _lower_strerrors()):
        if text in low:
            return name
    return None


@functools.lru_cache(maxsize=None)
def _crash_texts() -> dict[str, str]:
    """What a shell or a library prints for the signals a training process dies of, → the signal."""
    texts = {(_signal.strsignal(s) or "").lower(): s.name for s in _signal.Signals if _signal.strsignal(s)}
    return {t: n for t, n in texts.items() if t in ("killed", "segmentation fault", "bus error", "aborted")}


def signal_of(lines: list[str], region: list[int]) -> str | None:
    """The signal a process of the run died of: `exitcode: -9`, `killed by signal: Bus error`,
    `Signals.SIGKILL`, `Segmentation fault`, a shell's `Killed`. The last one in the region."""
    crash = _crash_texts()
    found = None
    for i in region:
        ln = lines[i]
        m = _SIGNAL_NUM.search(ln)
        if m:
            num = int(next(g for g in m.groups() if g))
            try:
                found = _signal.Signals(num).name
            except ValueError:
                pass
            continue
        named = {g for m in _SIGNAL_NAME.finditer(ln) for g in m.groups() if g}
        if len(set(re.findall(r"\bSIG[A-Z]{2,6}\b", ln))) > 1:
            continue   # "killed by SIGKILL … or SIGSEGV": a list of what it might have been, not an event
        name = next(iter(named), None)
        if name in _signal.Signals.__members__ and name not in ("SIGTERM", "SIGINT", "SIGHUP"):
            found = name
            continue
        s = ln.strip().lower().rstrip(".")
        for text, name in crash.items():
            if text in s and (
                    s == text or s.endswith(" " + text) or f"signal: {text}" in s or f"{text} (core dumped)" in s
                    or re.search(r"[\]|%]\s?" + text + "$", s)):   # "…4/8 [02:10<02:22]Killed" after a progress bar
                found = name
    return found


@functools.lru_cache(maxsize=None)
def _wrappers() -> list[tuple[Matcher | None, Matcher | None]]:
    out = []
    for w in knowledge.load("triage").get("wrappers", []):
        out.append((compile_knowledge(w["type"]) if w.get("type") else None,
                    compile_knowledge(w["message"]) if w.get("message") else None))
    return out


def is_wrapper(r: Raised) -> bool:
    """An exception that only reports another one (Ray's task error, torchrun's ChildFailedError,
    Hydra's job error, vLLM's "see root cause above"): the root is elsewhere in the log."""
    for trx, mrx in _wrappers():
        if (trx is None or trx.search(r.type)) and (mrx is None or mrx.search(r.message)):
            return True
    return False


def exceptions(lines: list[str], region: list[int]) -> list[Raised]:
    """Every exception (with its frames) and error line in the region, in order. A traceback's
    exception line ends it; an exception line followed by frames starts a nested traceback (Ray
    prints the remote one under its RayTaskError line); the chain separators link neighbours."""
    allowed = set(region)
    out: list[Raised] = []
    frames: list[Frame] = []
    start: int | None = None
    header_type = ""
    for i in region:
        raw = lines[i]
        ln = _LOGGER_PREFIX.sub("", raw, 1)
        if ln[:1] in "*`":
            ln = ln.lstrip("*`")   # a paste's Markdown: "**RuntimeError: …**"
        ln = _CLASS_REPR.sub(r"\1:", ln)   # "<class 'pyarrow.lib.ArrowInvalid'>: …" (a notebook's or logger's print)
        if _TRACEBACK.match(ln):
            if start is not None and frames:   # a cut traceback: its exception line never came
                out.append(Raised(header_type, "", start, start, frames))
            start, frames = i, []
            # IPython names the exception in its header ("OSError    Traceback (most recent call last)"):
            # the type is known even where the paste is cut before the exception line
            hm = _EXC.match(ln.split("Traceback", 1)[0].strip() + ":")
            header_type = hm["type"] if hm else ""
            continue
        fm = (_FRAME.match(ln) or _CUT_FRAME.match(ln) or _IPY_FRAME.match(ln)
              or (_NB_FRAME.match(ln) if start is not None else None))
        if fm:
            if start is None:
                start = i
                if out and out[-1].type and out[-1].line >= i - 2 and not out[-1].linked_to_next:
                    out[-1].linked_to_next = "wraps"   # Ray prints the remote traceback under its own line
            frames.append(Frame(fm["path"], int(fm.groupdict().get("line") or 0), fm["func"]))
            continue
        if _CAUSE in ln or _CONTEXT in ln:
            if out:
                out[-1].linked_to_next = "cause" if _CAUSE in ln else "context"
            continue
        em = _EXC.match(ln)
        if em and (start is not None or em["msg"] is not None):
            msg = (em["msg"] or "").strip()
            # a message that goes on over the next lines (pydantic, Hydra, HF hub messages)
            j = i + 1
            # (only where the message is visibly unfinished or the next line is indented: prose
            # written under a pasted exception is not its message)
            while (j in allowed and j < len(lines) and lines[j].strip() and len(msg) < 400
                   and (not msg or msg.rstrip()[-1:] in ":,(" or lines[j][:1].isspace())
                   and not (_TRACEBACK.match(lines[j]) or _FRAME.match(lines[j]) or _EXC.match(lines[j])
                            or _ERROR_LINE.search(lines[j]) or _LOGGER_PREFIX.match(lines[j])
                            or _CAUSE in lines[j] or _CONTEXT in lines[j])
                   and j - i <= 3 and not re.match(r"^\S+ \d|^\[|^\d{4}-|^\w+:\s*$", lines[j])):
                msg += " " + lines[j].strip()
                j += 1
            r = Raised(em["type"], msg.strip("*` "), i, start if start is not None else i, frames, em["inner"])
            r.wrapper = is_wrapper(r)
            out.append(r)
            start, frames = None, []
            continue
        if start is not None and frames and not ln.strip():
            continue
        implied = next((t for rx, t in _IMPLIED_TYPES if rx.match(ln)), None) if start is None else None
        if implied:
            out.append(Raised(implied, ln.strip().strip("*` "), i, i))
            continue
        if start is None and ln.strip() and (_ERROR_LINE.search(raw) or (_COMPLAINT.search(ln) and errno_of(ln))):
            r = Raised("", ln.strip().strip("*` "), i, i)
            r.wrapper = is_wrapper(r)
            out.append(r)
    if start is not None and frames:
        out.append(Raised(header_type, "", start, start, frames))
    return out


def specificity(r: Raised) -> int:
    """How much an exception says about its cause (doctor.signatures.specificity); a wrapper or a
    traceback cut before its exception line says nothing."""
    if r.wrapper:
        return -10
    if not r.type and not r.message:
        return -8
    # an errno known only by its strerror text ("Address already in use") counts like [Errno N]
    by_text = 3 if r.errno and "errno" not in r.message.lower() else 0
    return message_specificity(r.type, r.message) + by_text


def model(lines: list[str], region: list[int]) -> Failure:
    """The failure of the region: its exceptions, the root, the wrappers around it, the signal."""
    raised = exceptions(lines, region)
    sig = signal_of(lines, region)
    if not raised:
        return Failure([], None, [], sig)
    # The last chain: the final exception and every one linked to it by "direct cause" / "during
    # handling", plus what a wrapper at its head reports (the tracebacks just before it).
    last = len(raised) - 1
    while last > 0 and not raised[last].type and not raised[last].message and raised[last].frames:
        last -= 1   # a cut traceback at the end says nothing; the chain before it does
    first = last
    while first > 0 and raised[first - 1].linked_to_next:
        first -= 1
    chain = raised[first:last + 1]
    wrappers = [r.type or r.message[:60] for r in chain if r.wrapper]
    candidates = [r for r in chain if not r.wrapper]
    if not [r for r in candidates if specificity(r) > 0]:
        # the chain only wraps (or is cut): the root is what came before it — the remote traceback
        # Ray printed, the engine core's own error, an ERROR line the library logged
        before = [r for r in raised[:first] if not r.wrapper]
        candidates = candidates + before[-6:]
    if not candidates:
        return Failure(raised, None, wrappers, sig)
    # most specific first; on a tie the earliest of the chain (the cause before its consequence)
    order = {id(r): n for n, r in enumerate(candidates)}
    root = max(candidates, key=lambda r: (specificity(r), -order[id(r)] if r in chain else order[id(r)] - 100))
    return Failure(raised, root, wrappers, sig)


# ---- failure classes: finding by structure ------------------------------------------------------

# the keys of a class's `when` that are patterns over the exception (errno and signal are sets)
_WHEN_KEYS = ("type", "message", "owner", "within", "frame", "text", "log")


@functools.lru_cache(maxsize=None)
def _classes() -> list[dict]:
    out = []
    for c in knowledge.load("triage").get("failure_classes", []):
        when = c["when"]
        out.append({**c, "rx": {k: compile_knowledge(v, re.I if k in ("message", "text") else 0)
                                for k, v in when.items() if k in _WHEN_KEYS},
                    "errno": set(when.get("errno", [])), "signal": set(when.get("signal", []))})
    return out


def classify(failure: Failure, lines: list[str], region: list[int], decisive_only: bool = False,
             last: bool = False) -> tuple[dict, Raised | None, dict] | None:
    """The first failure class (knowledge/triage.yaml) that the root — then the other exceptions of
    the region, most specific first — belongs to: (class, the exception, its named groups). `last`:
    only the classes marked last (tried after the symptom signatures), else only the others."""
    ranked = [failure.root] if failure.root else []
    ranked += sorted((r for r in failure.raised if r is not failure.root and not r.wrapper),
                     key=lambda r: -specificity(r))
    region_text = "\n".join(lines[i] for i in region[-400:])
    fields: dict[int, dict[str, str]] = {}   # each exception's values for the `when` keys: built once, not per class

    def field(r: Raised, key: str) -> str:
        if id(r) not in fields:
            fields[id(r)] = {"type": " ".join(filter(None, [r.type, r.inner])), "message": r.message,
                             "owner": r.owner or "", "within": r.within or "", "text": r.text, "log": region_text,
                             "frame": "\n".join(f"{f.path}:{f.func}" for f in r.frames)}
        return fields[id(r)][key]

    for c in _classes():
        if (decisive_only and not (c["errno"] or c["signal"] or c.get("decisive"))) or bool(c.get("last")) != last:
            continue
        rx = c["rx"]
        if c["signal"]:
            if failure.signal in c["signal"] and (not rx.get("text") or rx["text"].search(region_text)):
                m = rx["text"].search(region_text) if rx.get("text") else None
                return c, failure.root, (m.groupdict() if m else {})
            continue
        for r in ranked:
            groups: dict = {}
            ok = True
            if c["errno"]:
                ok = r.errno in c["errno"]
            for key in _WHEN_KEYS:
                if not ok or key not in rx:
                    continue
                m = rx[key].search(field(r, key))
                ok = m is not None
                if m:
                    groups.update({k: v for k, v in m.groupdict().items() if v})
            if ok:
                return c, r, groups
        if set(rx) == {"text"} and not c["errno"]:
            # a class keyed by text alone also reads a failure that raised no exception (a build's
            # "unable to execute …", a logger's ERROR line): the first line of the region it names
            for i in region[-400:]:
                m = rx["text"].search(lines[i])
                if m:
                    return c, None, {**{k: v for k, v in m.groupdict().items() if v}, "_line": i}
        elif set(rx) == {"log"} and not c["errno"]:
            # a class keyed by the region's text (a message wrapped over lines, a usage line and its error
            # below it) reads a failure without an exception the same way: the line its match starts on
            m = rx["log"].search(region_text)
            if m:
                tail = region[-400:]
                return c, None, {**{k: v for k, v in m.groupdict().items() if v},
                                 "_line": tail[region_text.count("\n", 0, m.start())]}
    return None
