# Prepended to every probe script. Probe scripts run *inside the target interpreter*, so they use
# the standard library only, and they report one JSON object after a marker line on stdout
# (imported libraries may print their own lines before it).
import json as _json
import os as _os
import sys as _sys
import sysconfig as _sysconfig
import traceback as _traceback

_STDLIB = _sysconfig.get_paths().get("stdlib", "\0")

_MARKER = "@@VERL-DOCTOR-JSON@@"


def emit(obj):
    _sys.stdout.flush()
    _sys.stdout.write("\n" + _MARKER + "\n" + _json.dumps(obj, default=str) + "\n")
    _sys.stdout.flush()


def emit_and_exit(obj):
    """A probe's last word. Exits without interpreter teardown: once torch and vLLM are loaded,
    tearing them down costs ~1 s of CPU that the other probes, running in parallel, could use."""
    emit(obj)
    _sys.stderr.flush()
    _os._exit(0)


def _first_line(lines):
    text = [ln.strip() for ln in "".join(lines).strip().splitlines() if ln.strip()]
    if not text:
        return ""
    if text[0].endswith(":") and len(text) > 1:
        return text[0] + " " + text[1]
    return text[0]


def _frames_of(exc):
    frames = _traceback.extract_tb(exc.__traceback__)
    # Only frames in packages: the probe's own code ("<string>") and importlib are noise.
    return [f"{f.filename}:{f.lineno}" for f in frames
            if not f.filename.startswith("<") and not f.filename.startswith(_STDLIB + _os.sep)][-12:]


def describe_exception(exc):
    """Type, message and the chain of frames that led to it (file:line), newest last; `causes`: the
    exceptions it was raised from or while handling (`raise … from …`, "During handling …"),
    nearest first — the first message of a chain is often the specific one ("Please upgrade X")."""
    lines = _traceback.format_exception_only(type(exc), exc)
    causes = []
    seen = {id(exc)}
    cur = exc
    while len(causes) < 5:
        nxt = cur.__cause__ if cur.__cause__ is not None else (None if cur.__suppress_context__ else cur.__context__)
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        nlines = _traceback.format_exception_only(type(nxt), nxt)
        causes.append({"type": type(nxt).__name__, "message": _first_line(nlines) if nlines else repr(nxt),
                       "link": "cause" if cur.__cause__ is not None else "context", "chain": _frames_of(nxt)})
        cur = nxt
    return {
        "type": type(exc).__name__,
        # The exception's own first line: a library's precise check ("tokenizers>=0.21,<0.22 is
        # required …, but found tokenizers==0.20.3") comes before its generic hint ("Try: pip
        # install -U"); a message that starts on the next line (NumPy's) takes that line too.
        "message": _first_line(lines) if lines else repr(exc),
        "text": "".join(lines).strip()[:2000] if lines else repr(exc),
        "missing_module": getattr(exc, "name", None) if isinstance(exc, ImportError) else None,
        "chain": _frames_of(exc),
        "causes": causes,
    }
