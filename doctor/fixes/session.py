"""`doctor fix` and `doctor rollback` as sessions: the order of the work, and what is kept.

fix: check → plan (findings.yaml fix.plan) → confirm → snapshot → apply → re-check; a re-check with a
new error, or with an error the plan targeted still there, rolls back at once. rollback: snapshot
what it replaces, then restore. What the user sees is a FixUI's business (report/fix_text.py on a
terminal; nothing with --json, whose document is the session's return value)."""

from __future__ import annotations

import contextlib
import difflib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Protocol

from rich.markup import escape as esc

from doctor.dists import user_projects
from doctor.findings import is_host_fact
from doctor.rules.packages import conflicts
from doctor.fixes import STEP_KINDS, ApplyContext, FixError, build_plan
from doctor.fixes import snapshot as snapmod
from doctor.fixes.packages import bind_constraints_path, freeze
from doctor.knowledge import get_stack
from doctor.results import ExitCode, Severity
from doctor.stacks import choose_stack, family_guard
from doctor.uv import runnable

if TYPE_CHECKING:
    from doctor.engine import CheckResult

class FixUI(Protocol):
    def say(self, markup: str) -> None: ...
    def mark(self, status: str) -> str: ...
    def plan(self, plan, result, stack_how: str) -> None: ...
    def plan_failed(self, reason: str) -> None: ...
    def recheck_failed(self, reason: str, after, ids: set[str]) -> None: ...
    def fixed(self, fixed: list[str], remaining: list, doc: dict, snap_id: str) -> None: ...
    def interrupted(self, snap_id: str, python: str | None) -> None: ...
    def confirm(self, question: str) -> bool: ...


class QuietUI:
    """--json: the document says everything; confirmation was given with --yes."""

    def say(self, markup: str) -> None:
        pass

    def mark(self, status: str) -> str:
        return ""

    def plan(self, plan, result, stack_how: str) -> None:
        pass

    def plan_failed(self, reason: str) -> None:
        pass

    def recheck_failed(self, reason: str, after, ids: set[str]) -> None:
        pass

    def fixed(self, fixed, remaining, doc, snap_id) -> None:
        pass

    def interrupted(self, snap_id: str, python: str | None) -> None:
        # stdout is the JSON document; the way back goes to stderr as on a terminal.
        import sys

        print(f"interrupted: the target may be half-changed; snapshot {snap_id} was written before any change.\n"
              "restore it with: " + runnable(f"doctor rollback {snap_id} --yes" + (f" --python {python}" if python else "")),
              file=sys.stderr)

    def confirm(self, question: str) -> bool:
        return False


@dataclass
class FixRequest:
    python: str
    python_given: bool                 # --python was given (the undo hint repeats it)
    lockfile: Path | None = None
    stack_name: str | None = None
    only: list[str] | None = None
    dry_run: bool = False
    yes: bool = False


def summary(findings) -> dict:
    return {sev.value: sorted({f.id for f in findings if f.severity == sev}) for sev in Severity}


def judge(before, after, targets: set[str]) -> tuple[list[str], list[str]]:
    """(new errors, targeted errors still there). Host facts (findings.yaml scope: host) never count:
    no change to the environment makes or clears them."""
    def errs(findings):
        return {f.id for f in findings if f.severity == Severity.ERROR and not is_host_fact(f)}

    b, a = errs(before), errs(after)
    return sorted(a - b), sorted(a & b & targets)


def fix(req: FixRequest, ui: FixUI, check: Callable[[str | None], "CheckResult"]) -> dict:
    """One `doctor fix`. `check(stack_name)` runs `doctor check` on the target. Returns the JSON
    document (its `status` and `exit_code` say how it ended)."""
    t_start = time.perf_counter()
    doc: dict = {"command": "fix", "target": req.python, "dry_run": req.dry_run, "snapshot": None,
                 "after": None, "new_errors": [], "unfixed": [], "reason": None, "timings": {}}

    def finish(status: str, code: ExitCode) -> dict:
        doc["status"], doc["exit_code"] = status, int(code)
        doc["timings"]["total_s"] = round(time.perf_counter() - t_start, 2)
        return doc

    with snapmod.target_lock(req.python) if not req.dry_run else contextlib.nullcontext():
        t0 = time.perf_counter()
        before = check(req.stack_name)
        doc["timings"]["check_s"] = round(time.perf_counter() - t0, 2)
        doc["timings"]["check_cached"] = bool(before.timings.get("cached"))
        chosen = before.chosen or choose_stack(before.facts, get_stack(req.stack_name) if req.stack_name else None)
        stack, stack_how = chosen.stack, chosen.how
        t0 = time.perf_counter()
        plan = build_plan(before.findings, python=req.python, stack=stack,
                          lockfile=str(req.lockfile) if req.lockfile else None, only=req.only,
                          protected=user_projects(before.facts), guard=family_guard(chosen, before.facts),
                          facts=before.facts)
        doc.update(stack=plan.stack, lockfile=plan.lockfile, before=summary(before.findings))
        snap_id = None if req.dry_run or not plan.steps else snapmod.new_id()
        if snap_id:
            for s in plan.steps:
                bind_constraints_path(s, snapmod.snapshots_dir() / snap_id / "constraints.txt")
        try:
            plan.prepare(ApplyContext(target=req.python))
        except FixError as exc:
            doc["plan"] = plan.to_dict()
            doc["reason"] = f"cannot plan: {exc}"
            ui.plan(plan, before, stack_how)
            ui.plan_failed(str(exc))
            return finish("plan-failed", ExitCode.PROBLEMS)
        doc["timings"]["plan_s"] = round(time.perf_counter() - t0, 2)
        doc["plan"] = plan.to_dict()
        ui.plan(plan, before, stack_how)
        if req.dry_run:
            ui.say("\n[dim]--dry-run: nothing was changed[/]")
            return finish("planned", ExitCode.OK)
        if not plan.steps or snap_id is None:
            left = env_errors(before.findings)
            doc["remaining_errors"] = left
            if left:  # not fixed: errors of the env remain, for manual steps (exit 1 as check would)
                ui.say(f"\n[red]nothing to fix automatically; {len(left)} error(s) of the env remain[/]: "
                       + ", ".join(left) + (" (see the manual steps above)" if plan.manual else ""))
                return finish("nothing-to-do", ExitCode.PROBLEMS)
            ui.say("\n[green]nothing to fix automatically[/]" + (" (see the manual steps above)" if plan.manual else ""))
            return finish("nothing-to-do", ExitCode.OK)
        if not req.yes and not ui.confirm("\nApply this plan?"):
            ui.say("nothing was changed")
            return finish("declined", ExitCode.OK)

        # Snapshot first: from here on, `doctor rollback ID` can always restore the target.
        snap = snapmod.create(snap_id, req.python, plan, before.facts["distributions"])
        doc["snapshot"] = {"id": snap.id, "path": str(snap.path)}
        ui.say(f"\nsnapshot [bold]{snap.id}[/] written before any change: {esc(str(snap.path))}")
        ctx = ApplyContext(target=req.python, snapshot_dir=snap.path, log=lambda m: ui.say(f"  [dim]$ {esc(m)}[/]"))
        t0 = time.perf_counter()
        try:
            snap.update(status="applying")
            try:
                for i, step in enumerate(plan.steps, 1):
                    ui.say(f"applying {i}/{len(plan.steps)}: {esc(step.description)}")
                    record = step.apply(ctx)
                    snap.record_applied({"step": i, "kind": step.kind, **record})
                    if record.get("changes"):
                        ui.say(f"  [green]changed[/]: {esc(' · '.join(record['changes']))}")
            except FixError as exc:
                doc["timings"]["apply_s"] = round(time.perf_counter() - t0, 2)
                doc["reason"] = f"a step failed: {exc}"
                return finish(*roll_back(snap, req.python, doc, ui))
            doc["timings"]["apply_s"] = round(time.perf_counter() - t0, 2)
            snap.update(status="applied")
            ui.say("re-checking the target…")
            t0 = time.perf_counter()
            after = check(plan.stack)
            doc["timings"]["recheck_s"] = round(time.perf_counter() - t0, 2)
            doc["timings"]["recheck_cached"] = bool(after.timings.get("cached"))
        except KeyboardInterrupt:
            snap.update(status="interrupted")
            ui.interrupted(snap.id, req.python if req.python_given else None)
            return finish("interrupted", ExitCode.INTERRUPTED)

        new, unfixed = judge(before.findings, after.findings, plan.targets)
        # a change that satisfies the plan but breaks another installed package's declared
        # requirement (pyarrow 20 under a datasets that needs >= 21) is no fix: the env must be at
        # least as consistent as before
        left = new_conflicts(before.facts, after.facts)
        doc.update(after=summary(after.findings), new_errors=new, unfixed=unfixed, new_conflicts=left)
        if new or unfixed or left:
            why = []
            if left:
                why.append("it would leave requirements unmet that were met before: " + "; ".join(left[:5])
                           + (f" (and {len(left) - 5} more)" if len(left) > 5 else ""))
            if unfixed:
                why.append(f"still reported although the plan targeted them: {', '.join(unfixed)}")
            if new:
                why.append(f"new error(s) after the change: {', '.join(new)}")
            doc["reason"] = "; ".join(why)
            ui.recheck_failed(doc["reason"], after, set(new) | set(unfixed))
            return finish(*roll_back(snap, req.python, doc, ui))

        snap.update(status="fixed")
        # Fixed: what the plan targeted and the re-check no longer reports as a problem (an overlap of
        # wheels whose right copy now wins is still said, as info). A finding without an automatic fix
        # is never listed here.
        remaining = [f for f in after.findings if f.severity in (Severity.ERROR, Severity.WARNING)]
        fixed = sorted(plan.targets - {f.id for f in remaining})
        doc["fixed"] = fixed
        doc["remaining_errors"] = env_errors(after.findings)
        ui.fixed(fixed, remaining, doc, snap.id)
        # what the plan targeted is fixed; errors of the env that need a manual step still fail the
        # command (exit 1, as `doctor check` would); the machine's own (no GPU here) do not
        return finish("fixed", ExitCode.PROBLEMS if doc["remaining_errors"] else ExitCode.OK)


def new_conflicts(before_facts: Mapping, after_facts: Mapping) -> list[str]:
    """`pip check` lines of the env after a change that it did not have before."""
    if not before_facts.get("distributions") or not after_facts.get("distributions"):
        return []
    was = set(conflicts(before_facts))
    return [c for c in conflicts(after_facts) if c not in was]


def env_errors(findings) -> list[str]:
    """The error findings of the target env (not of the machine: no GPU, /dev/shm), by ID."""
    return sorted({f.id for f in findings if f.severity == Severity.ERROR and not is_host_fact(f)})


def roll_back(snap, python: str, doc: dict, ui: FixUI) -> tuple[str, ExitCode]:
    ui.say(f"\nrolling back to snapshot [bold]{snap.id}[/]…")
    t0 = time.perf_counter()
    try:
        snapmod.restore(snap, python, log=lambda m: ui.say(f"  [dim]$ {esc(m)}[/]"))
    except FixError as exc:
        snap.update(status="rollback-failed")
        doc["rollback_error"] = str(exc)
        retry = runnable(f"doctor rollback {snap.id} --yes")
        ui.say(f"[bold red]{ui.mark('error')} the automatic rollback failed[/]: {esc(str(exc))}\n  retry with: {esc(retry)}")
        return "rollback-failed", ExitCode.PROBLEMS
    doc["timings"]["rollback_s"] = round(time.perf_counter() - t0, 2)
    snap.update(status="rolled-back", rollback_reason=doc.get("reason"))
    ui.say(f"[bold yellow]rolled back[/]: `uv pip freeze` is identical to the snapshot; the fix was not kept "
           f"({esc(doc.get('reason') or '')})")
    return "rolled-back", ExitCode.PROBLEMS


# ------------------------------------------------------------------------------------- rollback


def freeze_versions(freeze_text: str) -> dict:
    """{name: {"version": v}} from `uv pip freeze` lines of the form name==version."""
    out = {}
    for line in freeze_text.splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            out[name.strip()] = {"version": version.strip()}
    return out


def restores_packages(record: dict) -> bool:
    kind = STEP_KINDS.get(record.get("kind") or "")
    return kind is None or kind.restores_packages


def rollback(snap, python: str, ui: FixUI, yes: bool) -> ExitCode:
    """Restore a snapshot into `python`, after snapshotting what the restore replaces."""
    with snapmod.target_lock(python):
        saved = snap.freeze_path.read_text()
        now = freeze(python)
        ui.say(f"[bold]verl-doctor rollback[/] · snapshot {snap.id} ({snap.meta.get('created')}, "
               f"{snap.meta.get('status')}) → {esc(python)}")
        if now == saved and all(restores_packages(r) for r in snap.meta.get("applied", [])):
            ui.say("[green]nothing to do[/]: `uv pip freeze` already equals the snapshot's")
            return ExitCode.OK
        diff = [ln for ln in difflib.unified_diff(now.splitlines(), saved.splitlines(), lineterm="", n=0)
                if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        ui.say(f"  restores {len(diff)} freeze line(s):")
        for ln in diff[:30]:
            ui.say(f"    [{'green' if ln[0] == '+' else 'red'}]{esc(ln)}[/]")
        if not yes and not ui.confirm("Restore this snapshot?"):
            ui.say("nothing was changed")
            return ExitCode.OK
        t0 = time.perf_counter()
        # A rollback changes the env too: snapshot what it replaces first, so it can be undone.
        before = snapmod.create(snapmod.new_id(), python, None, freeze_versions(now), before_rollback_to=snap.id)
        ui.say(f"  snapshot of the current state: {before.id} (undo this rollback: "
               f"{esc(runnable(f'doctor rollback {before.id} --python {python}'))})")
        try:
            snapmod.restore(snap, python, log=lambda m: ui.say(f"  [dim]$ {esc(m)}[/]"))
        except FixError as exc:
            ui.say(f"[bold red]{ui.mark('error')} rollback failed[/]: {esc(str(exc))}")
            return ExitCode.PROBLEMS
        snap.update(status="rolled-back")
        before.update(status="replaced-by-rollback")
        ui.say(f"[bold green]{ui.mark('ok')} restored[/] in {time.perf_counter() - t0:.1f} s: `uv pip freeze` is byte-identical "
               "to the snapshot")
    return ExitCode.OK
