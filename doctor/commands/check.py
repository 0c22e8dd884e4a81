"""`doctor check`."""

from __future__ import annotations

import sys
from pathlib import Path

from doctor.engine import run_check as engine_check
from doctor.target import default_note, resolve_python
from doctor.results import ExitCode
from doctor.errors import UsageError
from doctor.probes import TARGET_PROBES
from doctor.engine import recheck_facts
from doctor.report import json_report
from doctor.report import text
from doctor.report.html_report import check_output_path
from doctor.recipes.catalog import load as load_recipe
from doctor.report.html_report import write


def exit_code(result, strict: bool) -> int:
    sev = {f.severity for f in result.findings}
    if "error" in sev or (strict and "warning" in sev):
        return ExitCode.PROBLEMS
    if any(not r.ok for r in result.probes.values()) or any(c.status == "crash" for c in result.checks):
        return ExitCode.INCOMPLETE
    return ExitCode.OK


def _skips(args) -> list[str]:
    deep = sorted(n for n, p in TARGET_PROBES.items() if p.deep)
    for name in args.skip_probe:
        if name not in deep:
            raise UsageError(f"--skip-probe {name}: unknown deep probe (known: {', '.join(deep)})")
    return args.skip_probe


def _recheck(args) -> int:
    for flag, given in (("--python", args.python), ("--cluster", args.cluster), ("--recipe", args.recipe),
                        ("--fast", args.fast), ("--no-cache", args.no_cache), ("--skip-probe", args.skip_probe)):
        if given:
            raise UsageError(f"--facts replays recorded facts: {flag} does not apply (nothing is probed)")
    result = recheck_facts(args.facts, stack_name=args.stack, lockfile=Path(args.lock) if args.lock else None,
                           no_gpu=args.no_gpu)
    crashed = _render(result, args)
    return crashed if crashed is not None else exit_code(result, args.strict)


def _render(result, args) -> int | None:
    """The report on stdout (JSON or text); the exit code when the text renderer crashed."""
    if args.json:
        sys.stdout.write(json_report.render(result) + "\n")
        return None
    try:
        text.render(result, verbose=args.verbose)
    except Exception as exc:  # noqa: BLE001 - the doctor's own bug must not hide what it found
        return _report_crashed("text", exc, result, args.strict)
    return None


def _report_crashed(kind: str, exc: Exception, result, strict: bool) -> int:
    """A renderer raised: say so in one line, and give the findings in the form that cannot fail
    (the JSON document, which the tests hold to the schema)."""
    import traceback

    where = traceback.extract_tb(exc.__traceback__)[-1]
    print(f"doctor: the {kind} report crashed ({type(exc).__name__}: {exc} at {where.filename}:{where.lineno}); "
          "please report it. The findings as JSON:", file=sys.stderr)
    sys.stdout.write(json_report.render(result) + "\n")
    code = exit_code(result, strict)
    return code if code == ExitCode.PROBLEMS else ExitCode.INCOMPLETE


def run_check(args) -> int:
    if args.facts:
        return _recheck(args)
    python = resolve_python(args.python)
    lockfile = Path(args.lock) if args.lock else None
    if lockfile is not None and not lockfile.is_file():
        raise UsageError(f"--lock {args.lock}: no such file")
    html_out = None
    if getattr(args, "html", None):  # a bad output path: exit 2 before any probe
        html_out = check_output_path(args.html)
    recipe = None
    if getattr(args, "recipe", None):  # bad recipe: exit 2 before any probe
        recipe = load_recipe(args.recipe)
    status = None
    progress = None
    if not args.json and sys.stderr.isatty():
        from rich.console import Console

        running: set[str] = set()
        status = Console(stderr=True).status("probing…")
        status.start()

        def progress(name, state):
            (running.add if state == "start" else running.discard)(name)
            status.update(f"probing the target: {', '.join(sorted(running)) or 'finishing'} "
                          "(imports of vllm/verl take ~15-30 s cold; cached afterwards)")
    try:
        result = engine_check(python, fast=args.fast, use_cache=not args.no_cache, scale=args.timeout_scale,
                              stack_name=args.stack, lockfile=lockfile, progress=progress,
                              cluster=getattr(args, "cluster", None), skip=tuple(_skips(args)),
                              no_gpu=args.no_gpu, recipe=recipe, show=not args.json)
    finally:
        if status:
            status.stop()
    result.target_note = default_note(args.python)
    crashed = _render(result, args)
    if crashed is not None:
        return crashed
    if html_out is not None:
        write(result, html_out)
        if not args.json:
            print(f"HTML report: {html_out}")
    return exit_code(result, args.strict)
