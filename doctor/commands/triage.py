"""`doctor triage LOG [--json] [--python PATH]`. Exit codes: 0 the run completed or shows no
failure · 1 the run failed (a cause named or not) · 2 bad input (not a console log)."""

from __future__ import annotations

import json
import os
import sys

from doctor.results import ExitCode
from doctor.target import resolve_python
from doctor.triage import looks_like_a_log, read_log, spec, triage_text
from doctor.bundle import bundle_log_text, bundle_target
from doctor.report.text import render_triage


def _python_version(python: str) -> str | None:
    """3.N of the interpreter the fixes name (it picks their lockfile when the log shows no Python).
    The doctor's own binary (a venv's python links to it) is not started again: that start was a
    tenth of a short triage."""
    try:
        if os.path.realpath(python) == os.path.realpath(sys.executable):
            return "%d.%d" % sys.version_info[:2]
    except OSError:
        pass
    import subprocess  # lazy: only another interpreter is started (subprocess is a tenth of a short triage)

    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out or None


def run_triage(args) -> int:
    text = read_log(args.log)
    recorded, recorded_version = bundle_target(text)  # a bug-report bundle: its env is the default target
    text = bundle_log_text(text) or text  # a bug-report bundle: its log tail
    # Whatever text people paste is read (issue 25): a paste without log structure is judged like any
    # other — nothing in it shows a failure, so nothing is blamed — and the report says so.
    log_like = looks_like_a_log(text.splitlines(), spec())
    if args.python is None and recorded:
        python, version = recorded, recorded_version  # the fixes name the env the bundle recorded
    else:
        python = resolve_python(args.python)
        version = _python_version(python)
    try:
        t = triage_text(text, args.log, python=python, python_version=version,
                        target_first=args.python is not None or bool(recorded))
    except Exception as exc:  # noqa: BLE001 - the doctor's own bug: one line, not a traceback
        import traceback

        where = traceback.extract_tb(exc.__traceback__)[-1]
        print(f"doctor: triage crashed on {args.log} ({type(exc).__name__}: {exc} at {where.filename}:{where.lineno}); "
              "please report it with the log", file=sys.stderr)
        return ExitCode.INCOMPLETE
    if args.json:
        print(json.dumps({**t.to_document(), "python": python, "log_like": log_like}, indent=1))
    else:
        render_triage(t, python=python)
        if not log_like and not t.failed:
            print("(no traceback, error line, log level, Ray or step line in it: if the run failed, give its console "
                  "output, e.g. the file `| tee` wrote)")
    return ExitCode.PROBLEMS if t.failed else ExitCode.OK
