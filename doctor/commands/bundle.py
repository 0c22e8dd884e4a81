"""`doctor bundle`: one redacted file for a bug report (doctor/bundle.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from doctor.results import ExitCode
from doctor.bundle import make_bundle, write_bundle
from doctor.engine import run_check
from doctor.errors import UsageError
from doctor.report.json_report import to_document
from doctor.target import default_note, resolve_python
from doctor.uv import runnable
from doctor.recipes import catalog
from doctor.recipes.launch import trainer_command


def run_bundle(args) -> int:
    python = resolve_python(args.python)
    if args.log and args.log != "-" and not Path(args.log).is_file():
        raise UsageError(f"--log {args.log}: no such file")
    out = Path(args.out or f"verl-doctor-bundle-{time.strftime('%Y%m%d-%H%M%S')}.json")
    if out.exists():
        raise UsageError(f"--out {out}: exists; give a new file name (a bundle never overwrites)")
    recipe = None
    if args.recipe:
        r = catalog.load(args.recipe)
        res = catalog.resolve(r)
        base, _ = trainer_command(python)
        recipe = {"name": r["name"], "overrides": res["overrides"],
                  "launch_command": " ".join(base + res["overrides"])}
    result = run_check(python, fast=args.fast, no_gpu=args.no_gpu)
    bundle = make_bundle(json.loads(json.dumps(to_document(result), default=str)), log_path=args.log,
                         recipe=recipe, shorten_home=args.shorten_home)
    path = write_bundle(bundle, out)
    errors = [f for f in result.findings if f.severity == "error" and not f.caused_by]
    note = default_note(args.python)
    print(f"bundle {path} ({path.stat().st_size // 1024} KiB) of {python}" + (f" ({note}: --python PATH for the training env)"
                                                                             if note else "")
          + f": check ({len(errors)} error(s))"
          + (", log tail and its triage" if args.log else "") + (f", recipe {args.recipe}" if recipe else ""))
    print(f"attach it to the issue; read it back with: {runnable(f'doctor check --facts {path}')}"
          + (f" · {runnable(f'doctor triage {path}')}" if args.log else ""))
    return ExitCode.OK
