"""`recipes lint`, `recipes run` and `recipes report`: arguments → the recipes' functions → a renderer."""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

from doctor import knowledge, logparse
from doctor.errors import UsageError
from doctor.recipes import catalog
from doctor.recipes import report
from doctor.recipes.bands import evaluate_bands
from doctor.recipes.catalog import read_overrides_file
from doctor.recipes.dryrun import next_on_gpu
from doctor.recipes.launch import launch, trainer_command
from doctor.recipes.lint import LintResult, lint_overrides, lint_recipe, write_fixed
from doctor.recipes.dryrun import dry_run
from doctor.recipes.preflight import preflight
from doctor.report.recipes_text import (render_dry_run, render_lint, render_preflight, render_recipe, render_recipe_list,
                                        render_report, render_run_triage, render_verdict)
from doctor.results import ExitCode
from doctor.target import default_note, resolve_python
from doctor.triage import read_log, triage_text


def run_catalog(args) -> int:
    """`recipes list`, `show NAME`, `data NAME --out DIR`."""
    if args.command == "list":
        render_recipe_list([catalog.load(n) for n in catalog.names()])
    elif args.command == "show":
        r = catalog.load(args.name)
        res = catalog.resolve(r)
        use = catalog.data_use(res["overrides"], knowledge.load("config_rules")["gsm8k_train_rows"]) \
            if r["data"] == "builtin:gsm8k" else None
        render_recipe(r, res, use)
    else:
        for path in catalog.write_dataset(args.dataset, args.out):
            print(path)
    return ExitCode.OK


def run_lint(args) -> int:
    if not args.name and not args.overrides_file:
        raise UsageError("give a recipe NAME (or YAML file) and/or --overrides-file F")
    if getattr(args, "write_fixed", None) and Path(args.write_fixed).exists():  # before the compose
        raise UsageError(f"--write-fixed {args.write_fixed}: it exists; name a new file (the doctor never overwrites one)")
    extra = read_overrides_file(args.overrides_file) if args.overrides_file else []
    python = resolve_python(args.python)
    if args.name:
        result = lint_recipe(python, args.name, extra)
        if args.overrides_file:
            result.source += f" + {args.overrides_file}"
    else:
        if not extra:
            raise UsageError(f"--overrides-file {args.overrides_file}: no overrides in it")
        result = lint_overrides(python, extra, args.overrides_file)
    if getattr(args, "write_fixed", None):
        return _write_fixed_and_relint(result, python, args)
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=1, default=str) + "\n")
    else:
        render_lint(result)
    return ExitCode.PROBLEMS if any(f.severity == "error" for f in result.findings) else ExitCode.OK


def _write_fixed_and_relint(result: LintResult, python: str, args) -> int:
    """--write-fixed: write the fixed overrides, then lint that file alone (a real compose again)."""
    path, changes = write_fixed(result, args.write_fixed)
    again = lint_overrides(python, read_overrides_file(str(path)), str(path))
    if args.json:
        doc = {"written": str(path), "changes": changes, "before": result.to_dict(), "after": again.to_dict()}
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
    else:
        render_lint(result)
        print(f"\nwrote {path}: {len(changes)} override(s) changed")
        for c in changes:
            print(f"  {c['override']}  →  {c['replacement'] or '(dropped)'}")
        print(f"\nre-lint of {path} alone:")
        render_lint(again)
    return ExitCode.PROBLEMS if any(f.severity == "error" for f in again.findings) else ExitCode.OK


def run_report(args) -> int:
    log_path = Path(args.log)
    t0 = time.perf_counter()
    log = logparse.parse_file(log_path)          # bad input ends here, before anything is written
    parse_s = time.perf_counter() - t0
    summary = report.summarize(log)
    out = report.out_dir(log_path, getattr(args, "out", None))
    files = report.write_outputs(log, summary, out)
    if getattr(args, "json", False):
        print(json.dumps(summary, indent=1))
        return 0
    render_report(summary, files, parse_s)
    return 0


def _report_summary(log_path: Path, out: Path) -> dict | None:
    """The console-log report (recipes report's metrics, summary and HTML) of the run."""
    try:
        log = logparse.parse_file(log_path)
        summary = report.summarize(log)
        report.write_outputs(log, summary, out)
        return summary
    except Exception as exc:  # noqa: BLE001 - the report is an extra; the verdict does not depend on it
        return {"error": f"{type(exc).__name__}: {exc}"}


def _dry_run_only(recipe: dict, res: dict, python: str, args) -> int:
    """`recipes run NAME --dry-run`: exit 0 the CPU path passes, 1 a step failed, 3 it could not run."""
    dry, findings, checks = dry_run(recipe, res, python, show=True)  # on stderr: --json keeps stdout
    failed = any(s.get("status") == "failed" for s in dry.get("steps") or [])
    code = (ExitCode.OK if dry.get("ok") else ExitCode.PROBLEMS if dry.get("steps") and (failed or not dry.get("unsupported"))
            else ExitCode.INCOMPLETE)   # a trainer path the dry run does not follow yet: incomplete, not failed
    if args.json:
        sys.stdout.write(json.dumps({"recipe": recipe["name"], "python": python, "status": "passed" if dry.get("ok") else
                                     "stopped-early" if code == ExitCode.INCOMPLETE and dry.get("steps") else
                                     "failed" if dry.get("steps") else "could-not-run", "exit_code": int(code),
                                     "next_on_gpu": next_on_gpu(dry), "dry_run": dry,
                                     "findings": [f.to_dict() for f in findings],
                                     "checks": [c.to_dict() for c in checks]}, indent=1, default=str) + "\n")
    else:
        render_dry_run(dry, findings, recipe["name"], python, note=default_note(args.python))
    return code


def run_recipe(args) -> int:
    recipe = catalog.load(args.name)
    res = catalog.resolve(recipe, quick=args.quick)
    python = resolve_python(args.python)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or Path("runs") / f"{recipe['name']}{'-quick' if args.quick else ''}-{stamp}")
    info = sys.stderr if args.json else sys.stdout
    if args.dry_run:
        return _dry_run_only(recipe, res, python, args)
    # "out" is set once the folder exists: a preflight that stops the run creates nothing.
    summary = {"recipe": recipe["name"], "mode": "quick" if args.quick else "full", "python": python,
               "out": None, "preflight": None}

    if args.skip_preflight:
        info.write(f"recipes run {recipe['name']}: preflight skipped (--skip-preflight)\n")
    else:
        info.write(f"recipes run {recipe['name']}: preflight\n")
        info.flush()
        t0 = time.monotonic()

        def say(msg: str) -> None:  # each step as it starts and ends, from the first second (stderr: stdout is the verdict)
            sys.stderr.write(f"[preflight] {time.monotonic() - t0:5.1f} s  {msg}\n")
            sys.stderr.flush()

        pf = preflight(recipe, res, python, say=say, fast=args.preflight_fast)
        checks = pf.lines()
        render_preflight(checks, info)
        summary["preflight"] = [asdict(c) for c in checks]
        summary["preflight_findings"] = [f.to_dict() for f in pf.findings()]
        failed = [c for c in checks if not c.ok]
        if failed:
            info.write(f"preflight failed: {'; '.join(c.name for c in failed)}"
                       f"{' — not starting the run' if not args.preflight_only else ''}\n")
            # Problems found (a GPU short, a config error, a model missing) are exit 1; exit 3 only when the
            # preflight itself could not look (its script failed in the target) and found nothing else.
            code = ExitCode.INCOMPLETE if all(c.name == "target" for c in failed) else ExitCode.PROBLEMS
            summary.update(status="preflight-failed", exit_code=code,
                           reason="; ".join(f"{c.name}: {c.line}" for c in failed))
            if args.json:
                sys.stdout.write(json.dumps(summary, indent=1) + "\n")
            return code
        info.write("preflight passed\n")
    if args.preflight_only:
        if args.json:
            sys.stdout.write(json.dumps({**summary, "status": "preflight-passed", "exit_code": 0}, indent=1) + "\n")
        return ExitCode.OK

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create: {exc.strerror or exc}") from None
    summary["out"] = str(out)
    base, injected = trainer_command(python)
    cmd = base + res["overrides"]
    total = None
    for o in res["overrides"]:
        if o.startswith("trainer.total_training_steps="):
            total = int(o.split("=", 1)[1])
    (out / "command.txt").write_text(" ".join(f"{k}={shlex.quote(v)}" for k, v in res["env"].items()) + " " +
                                     shlex.join(cmd) + "\n")
    info.write(f"running{' (trainer injected by VERL_DOCTOR_TRAINER_CMD)' if injected else ''}: "
               f"{shlex.join(base)} … ({len(res['overrides'])} overrides) → {out}/console.log\n")
    info.flush()
    outcome = launch(cmd, res["env"], out, total, show=not args.json)
    steps = outcome["steps"]
    bands = evaluate_bands(res["bands"], steps)
    if outcome["interrupted"]:
        status, code = "interrupted", ExitCode.INTERRUPTED
        reason = f"{outcome['interrupted']}: the trainer's process group was killed"
    elif outcome["error"] or outcome["exit_code"] != 0:
        status, code = "run-failed", ExitCode.INCOMPLETE
        reason = outcome["error"] or f"the trainer exited with code {outcome['exit_code']}"
    elif not steps:
        status, code = "run-failed", ExitCode.INCOMPLETE
        reason = "the trainer exited 0 but logged no step:N lines"
    elif any(b["gate"] and not b["passed"] for b in bands):
        status, code = "band-missed", ExitCode.PROBLEMS
        reason = "; ".join(f"{b['metric']} {b['agg']}={b['value']} not {b['comparison']} {b['expected']}"
                           for b in bands if b["gate"] and not b["passed"])
    else:
        status, code, reason = "passed", ExitCode.OK, None
    run_report_doc = _report_summary(out / "console.log", out) if steps else None
    summary.update({"status": status, "exit_code": code, "reason": reason, "command": cmd, "env": res["env"],
                    "trainer_exit_code": outcome["exit_code"], "elapsed_s": outcome["elapsed_s"],
                    "steps": len(steps), "last_step": max(steps) if steps else None,
                    "total_steps": outcome.get("total"), "bands": bands,
                    "last_metrics": steps[max(steps)] if steps else None, "report": run_report_doc})
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=1, default=str) + "\n")
    else:
        render_verdict(summary, len(steps), outcome["elapsed_s"], out)
    if status == "run-failed":
        log_path = out / "console.log"
        render_run_triage(triage_text(read_log(str(log_path)), str(log_path)))
    return code
