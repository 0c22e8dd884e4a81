"""Human report: grouped by area, one line per check (✓ / ! / ✗), evidence and fix under problems."""

from __future__ import annotations

from doctor.report.console import Printer, console_for, escape
from doctor.report.marks import mark_for
from doctor.uv import runnable

AREA_TITLES = {
    "stack": "Stack", "versions": "Versions", "python": "Python env", "packages": "Packages",
    "imports": "Imports", "vllm": "vLLM", "attention": "Attention kernels", "gpu": "GPU",
    "system": "System", "lock": "Lockfile", "doctor": "Doctor", "ray": "Ray", "config": "Config",
    "trainer": "Trainer (dry run on CPU)", "settings": "Settings",
}


ATTENTION = ("error", "warning", "info", "crash")


def render(result, console: Printer | None = None, verbose: bool = False) -> None:
    """The check report. By default what needs attention, and one line for each area (or the rest of
    it) that passed or was skipped, flutter-doctor style; verbose: every check."""
    console = console or console_for()
    t = result.facts.get("python", {})
    console.print(f"[bold]verl-doctor[/] · target {escape(result.python)} (Python {t.get('version')}, "
                  f"{len(result.facts.get('distributions', {}))} distributions)"
                  + (f" [yellow]· {escape(result.target_note)}: --python PATH for the training env[/]"
                     if getattr(result, "target_note", None) else ""))
    if result.replayed_from:
        console.print(f"[dim]facts recorded in {escape(result.replayed_from)}, judged by this doctor; nothing was probed[/]")
    for line in gpu_banner(result):
        console.print(line)
    by_id: dict[str, list] = {}   # a rule may report one ID more than once (two overlapping pairs)
    for f in result.findings:
        by_id.setdefault(f.id, []).append(f)
    together = {fid: [t for t in group["targets"] if t != fid] for group in getattr(result, "fix_together", [])
                for fid in group["targets"]}
    consequences: dict[str, list] = {}
    for f in result.findings:
        if f.caused_by:
            consequences.setdefault(f.caused_by, []).append(f)
    shown: set[str] = set()
    for area in dict.fromkeys(c.area for c in result.checks):
        checks = [c for c in result.checks if c.area == area]
        title = AREA_TITLES.get(area, area)
        listed = checks if verbose else [c for c in checks if c.status in ATTENTION]
        if not listed:
            console.print(f"\n[bold]{title}[/] {_rest_line(console, checks)}")
            continue
        console.print(f"\n[bold]{title}[/]")
        for c in listed:
            render_check(console, c)
            for fid in c.ids:
                for n, f in enumerate(by_id[fid]):
                    if fid in shown or f.caused_by:  # printed once: above, or under its root cause
                        m, col = mark_of(console, f.severity)
                        where = f"caused by {f.caused_by}" if f.caused_by else "above"
                        console.print(f"      [{col}]{m} {fid}[/] [dim]({escape(where)})[/]")
                        continue
                    render_finding(console, f, together.get(fid))
                    if n == len(by_id[fid]) - 1:
                        shown.add(fid)
                        for sub in consequences.get(fid, []):
                            m, col = mark_of(console, sub.severity)
                            console.print(f"        [dim]caused by this:[/] [{col}]{m} {escape(sub.id)}[/]: "
                                          f"{escape(sub.title)}")
        rest = [c for c in checks if c not in listed]
        if rest:
            console.print(f"  {_rest_line(console, rest)}")
    for group in getattr(result, "fix_together", []):
        console.print("\n[bold]Fix together[/] [dim](one resolution; `doctor fix` runs exactly this, after a snapshot)[/]")
        console.print(f"  {escape(', '.join(group['targets']))}: {escape(group['description'])}")
        console.print(f"    $ {escape(group['command'])}")
    roots = [f for f in result.findings if not f.caused_by]
    errors = sum(f.severity == "error" for f in roots)
    warnings = sum(f.severity == "warning" for f in roots)
    caused = len(result.findings) - len(roots)
    cached = [] if result.replayed_from else result.timings.get("cached") or []
    took = result.timings.get("collect_s", 0) + result.timings.get("rules_s", 0)
    colour = "red" if errors else "yellow" if warnings else "green"
    console.print(f"\n[bold {colour}]{errors} error(s), {warnings} warning(s)[/]"
                  + (f" [dim](+{caused} caused by them)[/]" if caused else "") + f" in {took:.2f} s"
                  + (" [dim](deep probes from cache; --no-cache to re-run)[/]" if cached else ""))
    if errors or warnings:
        console.print(f"[dim]{escape(runnable('doctor explain ID'))} · {escape(runnable('doctor fix --dry-run'))}"
                      + ("" if verbose else " · --verbose lists every check") + "[/]")


def gpu_banner(result) -> list[str]:
    """A machine without a usable GPU, named once at the top: what it means for the exit code, and
    the flag that changes it."""
    gpu = result.facts.get("gpu") or {}
    if result.no_gpu:
        return ["[dim]--no-gpu: no GPU is expected here; the GPU checks are skipped and do not count in the "
                "exit code[/]"]
    if gpu.get("available") is False:
        why = gpu.get("reason") or "NVML found no GPU"
        return [f"[yellow]no usable NVIDIA GPU on this machine[/] [dim]({escape(str(why))}): that is an error "
                "(gpu.none, exit 1) where training runs; on a login node or in CPU CI, add --no-gpu[/]"]
    return []


def _rest_line(console: Printer, checks) -> str:
    """'✓ 4 passed · - 2 skipped (skipped by --fast)' for checks that need no attention."""
    ok = [c for c in checks if c.status == "ok"]
    skipped = [c for c in checks if c.status == "skipped"]
    parts = []
    if ok:
        m, col = mark_of(console, "ok")
        parts.append(f"[{col}]{m}[/] {len(ok)} {'check' if len(ok) == 1 else 'checks'} passed")
    if skipped:
        m, col = mark_of(console, "skipped")
        whys = list(dict.fromkeys(c.why or "?" for c in skipped))
        parts.append(f"[{col}]{m} {len(skipped)} skipped ({escape('; '.join(whys))})[/]")
    return " · ".join(parts)


def mark_of(console: Printer, status: str) -> tuple[str, str]:
    """The mark of a status and its colour; ASCII marks where the output cannot encode ✓/✗."""
    return mark_for(status, console.encoding)


def render_check(console: Printer, c) -> None:
    """One check line: its mark, what was checked, and why it could not look (skipped, crash)."""
    mark, colour = mark_of(console, c.status)
    extra = f" [dim]({escape(c.why)})[/]" if c.why and c.status in ("skipped", "crash") else ""
    console.print(f"  [{colour}]{mark}[/] {escape(c.check)}{extra}")


def render_finding(console: Printer, f, together: list[str] | None = None) -> None:
    mark, colour = mark_of(console, f.severity)
    console.print(f"      [{colour}]{mark} {f.id}[/]: {escape(f.title)}")
    for e in f.evidence[:14]:
        console.print(f"          [dim]{escape(e)}[/]")
    if len(f.evidence) > 14:
        console.print(f"          [dim]… {len(f.evidence) - 14} more (--json has all)[/]")
    if f.severity != "info":
        auto = " [green](doctor fix can apply this)[/]" if f.fix.automatic else ""
        console.print(f"        fix: {escape(f.fix.summary)}{auto}")
        if together:  # one cause, one command: printed once, under "Fix together"
            console.print(f"          [dim]in one resolution with {escape(', '.join(together))}: see \"Fix together\" below[/]")
            return
        for cmd in f.fix.commands:
            console.print(f"          $ {escape(cmd)}")


def render_triage(t, console: Printer | None = None, python: str | None = None) -> None:
    """`doctor triage`'s text report; `python`: the interpreter its fix commands name."""
    console = console or console_for()
    step = f"; last training step {t.last_step} at line {t.last_step_line}" if t.last_step is not None else ""
    console.print(f"[bold]doctor triage[/] · {escape(t.log)} ({t.lines} line{'s' if t.lines != 1 else ''}{step})")
    if python and t.failed:
        console.print(f"[dim]fix commands are for {escape(python)} (--python PATH names the training env)[/]")
    if t.status == "completed":
        console.print(f"[green]{mark_of(console, 'ok')[0]} the run completed (Final validation metrics printed): nothing to blame[/]")
        return
    if not t.failed:
        console.print(f"[green]{mark_of(console, 'ok')[0]} no failure in this log[/] [dim](no traceback, error line or non-zero exit"
                      + (" after the last training step" if t.last_step is not None else "") + ")[/]")
        return
    f0 = t.failure
    x = mark_of(console, "error")[0]
    console.print(f"[red]{x} the run failed[/]" + (f" [dim]({f0['marker']} at line {f0['line']})[/]" if f0 else ""))
    if getattr(t, "differs", None):
        console.print(f"  [yellow]this log's stack is not the locked set:[/] {escape(', '.join(t.differs))} — the fixes "
                      "name the log's own versions and pin no lockfile; to move to the locked set instead, sync a venv "
                      "from one of the doctor's lockfiles (README: The reference stacks)")
    for f in t.findings:
        mark, colour = mark_of(console, f.severity)
        console.print(f"  [{colour}]{mark} {f.id}[/]: {escape(f.title)}")
        for e in f.evidence:
            console.print(f"      [dim]{escape(e)}[/]")
        console.print(f"    fix: {escape(f.fix.summary)}")
        for cmd in f.fix.commands:
            console.print(f"      $ {escape(cmd)}")
    errors = [f for f in t.findings if f.severity == "error"]
    if errors:
        console.print(f"\n[bold red]{len(errors)} cause(s)[/] · doctor explain {errors[0].id}")
