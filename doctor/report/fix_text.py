"""`doctor fix` / `doctor rollback` on a terminal: the plan, progress lines, the verdict."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from doctor.findings import is_host_fact
from doctor.report.marks import mark_for
from doctor.uv import runnable


def render_plan(console: Console, plan, result, stack_how: str) -> None:
    errors = sum(f.severity == "error" for f in result.findings)
    warnings = sum(f.severity == "warning" for f in result.findings)
    console.print(f"[bold]verl-doctor fix[/] · target {escape(plan.target)}")
    console.print(f"  stack {escape(plan.stack or '-')} ({stack_how})"
                  + (f" · lock {escape(plan.lockfile)}" if plan.lockfile else "")
                  + f" · check: {errors} error(s), {warnings} warning(s)")
    if plan.steps:
        console.print(f"\n[bold]Plan[/] ({len(plan.steps)} step(s); fixes {escape(', '.join(sorted(plan.targets)))})")
    else:
        console.print("\n[bold]Plan[/]: nothing doctor fix can change automatically")
    for i, s in enumerate(plan.steps, 1):
        console.print(f"  {i}. [cyan]\\[{s.kind}][/] {escape(s.description)}")
        console.print(f"     fixes: {escape(', '.join(s.targets))}")
        for c in s.commands:
            console.print(f"     $ {escape(c)}")
        cons = [ln for ln in s.data.get("constraints", "").splitlines() if ln.strip()]
        if cons:
            console.print(f"     [dim]constraints.txt = {escape(s.data.get('stack') or '')}'s {len(cons)} constraints: "
                          f"{escape(' '.join(cons))}[/]")
        if s.changes:
            console.print(f"     changes: {escape(' · '.join(s.changes))}")
        for r in s.reasons:
            console.print(f"     [dim]why {escape(r['requirement'])} ← {escape(', '.join(r['findings']))}: "
                          f"{escape(r['reason'])} ({escape(r['source'])})[/]")
    if plan.excluded:
        console.print(f"  [dim]left out by --only: {escape(', '.join(plan.excluded))}[/]")
    for k in getattr(plan, "kept", []):
        console.print(f"  [cyan]will not touch[/] {escape(', '.join(k['dists']))} for {escape(k['id'])}: {escape(k['why'])}")
    for m in getattr(plan, "follows", []):
        console.print(f"  [dim]{escape(m['id'])} follows from {escape(m['caused_by'])}: the re-check judges it with its cause[/]")
    if plan.manual:
        console.print("\n[bold]Manual steps[/] (doctor fix does not do these)")
        for m in plan.manual:
            mark, colour = mark_for("error" if m["severity"] == "error" else "warning", console.encoding)
            console.print(f"  [{colour}]{mark} {escape(m['id'])}[/]: {escape(m['title'])}")
            console.print(f"      fix: {escape(m['summary'])}")
            if m.get("why", "").startswith("a sync to"):
                console.print(f"      [cyan]not done by doctor fix:[/] {escape(m['why'])}")
            for c in m["commands"]:
                console.print(f"        $ {escape(c)}")


class TextUI:
    """The FixUI of a terminal (doctor.fixes.session): stdout for the plan and progress, stderr
    for the interrupt notice and the confirmation prompt."""

    def __init__(self, out: Console | None = None):
        self.out = out or Console(highlight=False, soft_wrap=True)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    def say(self, markup: str) -> None:
        self.out.print(markup)

    def mark(self, status: str) -> str:
        return mark_for(status, self.out.encoding)[0]

    def plan(self, plan, result, stack_how: str) -> None:
        render_plan(self.out, plan, result, stack_how)

    def plan_failed(self, reason: str) -> None:
        x = mark_for("error", self.out.encoding)[0]
        self.out.print(f"\n[bold red]{x} the plan cannot be applied[/]: {escape(reason)}\n  nothing was changed")

    def recheck_failed(self, reason: str, after, ids: set[str]) -> None:
        self.out.print(f"\n[bold red]{mark_for('error', self.out.encoding)[0]} the re-check failed[/]: {escape(reason)}")
        for f in after.findings:
            if f.id in ids:
                self.out.print(f"    [red]{mark_for('error', self.out.encoding)[0]} {escape(f.id)}[/]: {escape(f.title)}")
                for e in f.evidence[:4]:
                    self.out.print(f"        [dim]{escape(e)}[/]")

    def fixed(self, fixed: list[str], remaining: list, doc: dict, snap_id: str) -> None:
        t = doc["timings"]
        ok = mark_for("ok", self.out.encoding)[0]
        self.out.print(f"\n[bold green]{ok} fixed[/]: {escape(', '.join(fixed) or 'nothing left to fix')} "
                       f"[dim](apply {t['apply_s']:.1f} s, re-check {t['recheck_s']:.1f} s)[/]")
        for f in remaining:
            mark, colour = mark_for("error" if f.severity == "error" else "warning", self.out.encoding)
            note = " (host fact, not the env)" if is_host_fact(f) else ""
            self.out.print(f"  still reported: [{colour}]{mark} {escape(f.id)}[/]{note}: {escape(f.title)}")
        if doc.get("remaining_errors"):
            self.out.print(f"[red]{len(doc['remaining_errors'])} error(s) of the env remain[/] "
                           f"({escape(', '.join(doc['remaining_errors']))}): their manual steps are in the plan "
                           "above (exit 1)")
        self.out.print(f"  undo with: {escape(runnable(f'doctor rollback {snap_id}'))}")

    def interrupted(self, snap_id: str, python: str | None) -> None:
        self.err.print(f"\n[bold yellow]interrupted[/]: the target may be half-changed; snapshot {snap_id} "
                       f"was written before any change.\nrestore it with: "
                       + escape(runnable(f"doctor rollback {snap_id} --yes" + (f" --python {python}" if python else ""))))

    def confirm(self, question: str) -> bool:
        from rich.prompt import Confirm

        return Confirm.ask(question, default=False, console=self.err)


def render_snapshots(console: Console, snaps, where: str) -> None:
    """`doctor rollback --list`."""
    if not snaps:
        console.print(f"no snapshots in {escape(where)}")
        return
    for s in snaps:
        targets = sorted({t for st in s.meta.get("plan", {}).get("steps", []) for t in st.get("targets", [])})
        console.print(f"{s.id}  {s.meta.get('created', '?')}  [bold]{escape(s.meta.get('status', '?'))}[/]  "
                      f"{escape(s.meta.get('target', '?'))}")
        if s.meta.get("made_by") == "rollback":
            console.print(f"    the state a rollback to {escape(s.meta.get('before_rollback_to') or '?')} replaced")
        else:
            console.print(f"    fixes: {escape(', '.join(targets) or '-')}")
