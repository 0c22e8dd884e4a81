"""Human report: grouped by area, one line per check (✓ / ! / ✗), evidence and fix under problems."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from doctor.uv import runnable

MARK = {"ok": ("✓", "green"), "info": ("i", "cyan"), "warning": ("!", "yellow"), "error": ("✗", "red"),
        "skipped": ("-", "dim"), "crash": ("‼", "magenta")}
AREA_TITLES = {
    "stack": "Stack", "versions": "Versions", "python": "Python env", "packages": "Packages",
    "imports": "Imports", "vllm": "vLLM", "attention": "Attention kernels", "gpu": "GPU",
    "system": "System", "lock": "Lockfile", "doctor": "Doctor", "ray": "Ray", "config": "Config",
}


def render(result, console: Console | None = None) -> None:
    console = console or Console(highlight=False, soft_wrap=True)
    t = result.facts.get("python", {})
    console.print(f"[bold]verl-doctor[/] · target {escape(result.python)} (Python {t.get('version')}, "
                  f"{len(result.facts.get('distributions', {}))} distributions)")
    by_id = {f.id: f for f in result.findings}
    shown: set[str] = set()
    area_order = list(dict.fromkeys(c.area for c in result.checks))
    for area in area_order:
        console.print(f"\n[bold]{AREA_TITLES.get(area, area)}[/]")
        for c in (c for c in result.checks if c.area == area):
            render_check(console, c)
            for fid in c.ids:
                if fid in shown:  # one finding from two checks: its details are printed once
                    m, col = MARK[by_id[fid].severity]
                    console.print(f"      [{col}]{m} {fid}[/] [dim](above)[/]")
                    continue
                shown.add(fid)
                render_finding(console, by_id[fid])
    errors = sum(f.severity == "error" for f in result.findings)
    warnings = sum(f.severity == "warning" for f in result.findings)
    cached = result.timings.get("cached") or []
    took = result.timings.get("collect_s", 0) + result.timings.get("rules_s", 0)
    colour = "red" if errors else "yellow" if warnings else "green"
    console.print(f"\n[bold {colour}]{errors} error(s), {warnings} warning(s)[/] in {took:.2f} s"
                  + (" [dim](deep probes from cache; --no-cache to re-run)[/]" if cached else ""))
    if errors or warnings:
        console.print(f"[dim]{escape(runnable('doctor explain ID'))} · {escape(runnable('doctor fix --dry-run'))}[/]")


def render_check(console: Console, c) -> None:
    """One check line: its mark, what was checked, and why it could not look (skipped, crash)."""
    mark, colour = MARK[c.status]
    extra = f" [dim]({escape(c.why)})[/]" if c.why and c.status in ("skipped", "crash") else ""
    console.print(f"  [{colour}]{mark}[/] {escape(c.check)}{extra}")


def render_finding(console: Console, f) -> None:
    mark, colour = MARK[f.severity]
    console.print(f"      [{colour}]{mark} {f.id}[/]: {escape(f.title)}")
    for e in f.evidence[:14]:
        console.print(f"          [dim]{escape(e)}[/]")
    if len(f.evidence) > 14:
        console.print(f"          [dim]… {len(f.evidence) - 14} more (--json has all)[/]")
    if f.severity != "info":
        auto = " [green](doctor fix can apply this)[/]" if f.fix.automatic else ""
        console.print(f"        fix: {escape(f.fix.summary)}{auto}")
        for cmd in f.fix.commands:
            console.print(f"          $ {escape(cmd)}")


def render_triage(t, console: Console | None = None) -> None:
    """`doctor triage`'s text report."""
    console = console or Console(highlight=False, soft_wrap=True)
    step = f"; last training step {t.last_step} at line {t.last_step_line}" if t.last_step is not None else ""
    console.print(f"[bold]doctor triage[/] · {escape(t.log)} ({t.lines} line{'s' if t.lines != 1 else ''}{step})")
    if t.status == "completed":
        console.print("[green]✓ the run completed (Final validation metrics printed): nothing to blame[/]")
        return
    if not t.failed:
        console.print("[green]✓ no failure in this log[/] [dim](no traceback, error line or non-zero exit"
                      + (" after the last training step" if t.last_step is not None else "") + ")[/]")
        return
    f0 = t.failure
    console.print("[red]✗ the run failed[/]" + (f" [dim]({f0['marker']} at line {f0['line']})[/]" if f0 else ""))
    for f in t.findings:
        mark, colour = MARK[f.severity]
        console.print(f"  [{colour}]{mark} {f.id}[/]: {escape(f.title)}")
        for e in f.evidence:
            console.print(f"      [dim]{escape(e)}[/]")
        console.print(f"    fix: {escape(f.fix.summary)}")
        for cmd in f.fix.commands:
            console.print(f"      $ {escape(cmd)}")
    errors = [f for f in t.findings if f.severity == "error"]
    if errors:
        console.print(f"\n[bold red]{len(errors)} cause(s)[/] · doctor explain {errors[0].id}")
