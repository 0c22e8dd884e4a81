"""What `recipes lint`, `recipes run` (its preflight, dry run, bands and verdict) and `recipes report`
print on a terminal."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from doctor.findings import Finding
from doctor.recipes.dryrun import next_on_gpu, step_summary, steps_known
from doctor.recipes.lint import LintResult
from doctor.recipes.preflight import PreflightCheck
from doctor.recipes.report import algorithm_name, v
from doctor.report.marks import symbol
from doctor.report.text import render_check, render_finding, render_triage
from doctor.triage import Triage


def render_lint(r: LintResult, out=None) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(file=out or sys.stdout, highlight=False, soft_wrap=True)
    c = r.compose
    console.print(f"[bold]recipes lint[/] · {escape(r.source)} · verl {c.get('verl')} (Hydra {c.get('hydra')}) "
                  f"in {escape(r.python)}")
    console.print(f"  [dim]composed with {escape(str(c.get('config_dir')))}/ppo_trainer.yaml, "
                  f"{len(r.overrides)} override(s)[/]")
    by_id: dict[str, list[Finding]] = {}
    for f in r.findings:
        by_id.setdefault(f.id, []).append(f)
    for chk in r.checks:
        render_check(console, chk)
        for fid in chk.ids:
            for f in by_id.pop(fid, []):
                render_finding(console, f)
    errors = sum(f.severity == "error" for f in r.findings)
    warnings = sum(f.severity == "warning" for f in r.findings)
    colour = "red" if errors else "yellow" if warnings else "green"
    console.print(f"\n[bold {colour}]{errors} error(s), {warnings} warning(s)[/]")


def render_dry_run(dry: dict, findings: list, recipe: str, python: str, out=None, note: str | None = None) -> None:
    console = Console(file=out or sys.stdout, highlight=False, soft_wrap=True)
    console.print(f"[bold]recipes run {escape(recipe)} --dry-run[/] · verl {dry.get('verl') or '?'} in {escape(python)}"
                  + (f" [yellow]· {escape(note)}: --python PATH for the training env[/]" if note else ""))
    if dry.get("stand_in_for") and dry.get("steps"):
        console.print(f"  [dim]{escape(str(dry['stand_in_for']))} is not on this machine: the tokenizer and model config "
                      "are a tiny Qwen2 stand-in written by the target's transformers[/]")
    if not dry.get("steps"):
        console.print(f"[bold yellow]the dry run could not run:[/] {escape(str(dry.get('error') or 'it reported no step'))}")
        return
    marks = {"ok": f"[green]{symbol('ok', console.file)}[/]", "failed": f"[red]{symbol('error', console.file)}[/]",
             "running": "[yellow]…[/]"}
    for s in dry["steps"]:
        summary = step_summary(s)
        console.print(f"  {marks.get(s['status'], '?')} {s['seconds']:6.1f} s  {escape(s['title'])}"
                      + (f"[dim] — {escape(summary)}[/]" if summary else ""))
    reached = {s["name"] for s in dry["steps"]}
    if any(s["status"] == "failed" for s in dry["steps"]):
        trainer = "v1" if dry.get("entry") == "TaskRunnerV1" else "v0"
        rest = [k["title"] for k in steps_known() if k["id"] not in reached and not k.get("optional")
                and k["id"] != "stand-in" and k.get("trainer") in (None, trainer)]
        if rest:
            console.print(f"  [dim]-          not reached: {escape('; '.join(rest))}[/]")
    for f in findings:
        render_finding(console, f)
    nxt = next_on_gpu(dry)
    if dry.get("unsupported") and not any(s["status"] == "failed" for s in dry["steps"]):
        console.print(f"\n[bold yellow]the dry run stopped early[/]: {escape(str(dry['unsupported']))} (exit 3)")
        return
    if dry.get("ok"):
        console.print(f"\n[bold green]the trainer's CPU path passes[/] ({dry.get('seconds')} s); next, on a GPU: {escape(nxt or '?')}")
    else:
        failed = [s for s in dry["steps"] if s["status"] == "failed"]
        console.print(f"\n[bold red]the trainer fails on CPU[/] at: {escape(failed[0]['title'] if failed else '?')}")


def render_preflight(checks: list[PreflightCheck], stream) -> None:
    for c in checks:
        mark = symbol("error" if not c.ok else "warning" if c.note else "ok", stream)
        stream.write(f"  {mark} {c.name}: {c.line}\n")
        if not c.ok and c.fix:
            stream.write(f"      fix: {c.fix}\n")
    stream.flush()


def render_verdict(summary: dict, steps: int, elapsed_s: float, out: Path) -> None:
    """The run's bands, one line each, and its verdict."""
    print(f"\n{steps} step(s) in {elapsed_s:.1f} s")
    for b in summary["bands"]:
        mark = symbol("ok" if b["passed"] else "error" if b["gate"] else "warning", sys.stdout)
        val = "never logged" if b["value"] is None else f"{b['value']:g}"
        print(f"  {mark} {b['metric']} [{b['agg']}] = {val}, expected {b['comparison']} {b['expected']:g}"
              f"{'' if b['gate'] else ' (informational)'} — {b['status']}: {b['source']}")
    status, reason, code = summary["status"], summary["reason"], summary["exit_code"]
    verdict = {"passed": "PASS", "band-missed": "BAND MISSED", "run-failed": "RUN FAILED",
               "interrupted": "INTERRUPTED"}[status]
    print(f"verdict: {verdict}{': ' + reason if reason else ''} (exit {code}) · {out}/summary.json")


def render_run_triage(triage: Triage) -> None:
    """The failed run's cause, on stderr (stdout stays the verdict, or the JSON)."""
    print("\n── doctor triage of console.log ──", file=sys.stderr)
    render_triage(triage, Console(stderr=True, highlight=False, soft_wrap=True))


def render_report(s: dict, files: dict[str, Path], parse_s: float) -> None:
    console = Console(highlight=False, soft_wrap=True)
    console.print(f"[bold]verl run report[/] · {escape(s['log'])}")
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="dim")
    t.add_column()
    t.add_row("trainer / algorithm / era", f"verl.trainer.main_{s['trainer']} / {algorithm_name(s.get('algorithm'))} / "
                                           f"verl {s['era'] or '?'} metric names")
    t.add_row("steps", f"{s['steps']} (step {s['first_step']} … {s['last_step']}, {s['step_records']} step lines"
                       + (", [yellow]out of order in the log[/]" if s["out_of_order"] else "") + ")")
    if s["val_metric"]:
        t.add_row("validation", f"{escape(s['val_metric'])}: {v(s['initial_val_score'])} → "
                                f"[bold]{v(s['final_val_score'])}[/] ({escape(s['final_val_from'] or '')}); "
                                f"best {v(s['best_val_score'])} at step {s['best_val_step']}")
    else:
        t.add_row("validation", "[dim]none in this log[/]"
                  + (" (Final validation metrics: None)" if s["final_validation_line"] == "None" else ""))
    t.add_row("reward", f"{escape(s['reward_metric'] or '—')}: {v(s['first_reward'])} → {v(s['last_reward'])}")
    t.add_row("response length", f"median {v(s['median_response_length'])} tokens")
    t.add_row("KL", f"{escape(s['kl_metric'] or '—')}: last {v(s['last_kl'])}")
    t.add_row("throughput", f"median {v(s['median_throughput'])} tokens/s/GPU" if s["median_throughput"] is not None
              else "[dim]not logged (verl < 0.3 has no perf/throughput)[/]")
    t.add_row("time per stage", ", ".join(f"{k} {v:.4g} s" for k, v in s["timing"].items()) or "—")
    console.print(t)
    console.print(f"[dim]parsed in {parse_s * 1000:.0f} ms · wrote {escape(str(files['metrics']))}, "
                  f"{files['summary'].name}, {files['html'].name}[/]")


def render_recipe_list(recipes: list[dict], out=None) -> None:
    """`recipes list`: one block per recipe, wrapped to the terminal (80 columns in a pipe), never cut."""
    out = out or sys.stdout
    width = shutil.get_terminal_size((80, 24)).columns if out.isatty() else 80
    for r in recipes:
        out.write(f"{r['name']}  ({r['hardware']['gpus']} GPU{'s' if r['hardware']['gpus'] != 1 else ''}, "
                  f"stack {r['stack']})\n")
        out.write(textwrap.fill(r["description"], width=max(40, width), initial_indent="    ",
                                subsequent_indent="    ", break_on_hyphens=False, break_long_words=False) + "\n")


def render_recipe(r: dict, res: dict, data_use: str | None, out=None) -> None:
    """`recipes show NAME`."""
    out = out or sys.stdout
    out.write(f"{r['name']}: {r['description']}\n  file: {r['_path']}\n  stack: {r['stack']}\n")
    hw = r["hardware"]
    out.write(f"  hardware: {hw['gpus']} GPU(s), ≥ {hw.get('min_memory_gib', '?')} GiB each; bands from: "
              f"{hw.get('measured_on', 'unknown')}\n")
    name = r["model"].get("id") or r["model"].get("path")
    where = (f"local at {res['model_path']}" if res["model_local"] else
             "not downloaded here: the run fetches it from the Hugging Face Hub (VERL_DOCTOR_MODEL_PATH=DIR uses a local copy)"
             if res["model_path"] == name else f"{res['model_path']} (not on this machine)")
    out.write(f"  model: {name} ({r['model'].get('architecture', '?')}), {where}\n")
    out.write(f"  data: {res['files']['train']}, {res['files']['val']}\n")
    if data_use:
        out.write(f"  data use: {data_use}\n")
    if res["env"]:
        out.write("  env: " + " ".join(f"{k}={v}" for k, v in res["env"].items()) + "\n")
    out.write("  overrides:\n" + "".join(f"    {o}\n" for o in res["overrides"]))
    q = r.get("quick") or {}
    if q:
        out.write(f"  quick mode: trainer.total_training_steps={q.get('max_steps')}\n")
    for title, bands in (("expected bands", r.get("bands") or []), ("quick-mode bands", q.get("bands") or [])):
        if bands:
            out.write(f"  {title}:\n")
            for b in bands:
                gate = "" if b.get("gate", True) else " (informational)"
                out.write(f"    {b['metric']} [{b.get('agg', 'last')}] {b['comparison']} {b['value']}{gate}  — "
                          f"{b.get('status', 'claimed')}: {b['source']}\n")
