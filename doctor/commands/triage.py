"""`doctor triage LOG [--json]`. Exit codes: 0 no cause found, 1 a cause found, 2 bad input."""

from __future__ import annotations

import json

from doctor.triage import read_log, triage_text
from doctor.results import ExitCode

def run_triage(args) -> int:
    t = triage_text(read_log(args.log), args.log)
    if args.json:
        print(json.dumps(t.to_document(), indent=1))
    else:
        from doctor.report.text import render_triage

        render_triage(t)
    return ExitCode.PROBLEMS if any(f.severity == "error" for f in t.findings) else ExitCode.OK
