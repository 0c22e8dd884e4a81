"""`doctor fix` and `doctor rollback`.

fix: check → plan (knowledge/fixes.yaml) → print → confirm → snapshot → apply → re-check; a
re-check with a new error, or with an error the plan targeted still there, rolls back at once.
Exit codes: 0 fixed or nothing to do, 1 the fix failed (and was rolled back), 2 usage,
130 interrupted (the snapshot is on disk: `doctor rollback ID` restores it)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from doctor.errors import UsageError
from doctor.target import resolve_python
from doctor.results import ExitCode

HOST_FACT_PREFIXES = ("gpu.",)  # errors about the machine, not the env: never judged by a re-check


def _console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _err_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _needs_confirmation_channel(args) -> None:
    if args.yes or getattr(args, "dry_run", False):
        return
    if getattr(args, "json", False):
        raise UsageError("--json cannot ask for confirmation: add --yes (or --dry-run)")
    if not sys.stdin.isatty():
        raise UsageError("no terminal to confirm on: add --yes to apply without asking (or --dry-run to only see the plan)")


def _confirm(question: str) -> bool:
    from rich.prompt import Confirm

    return Confirm.ask(question, default=False, console=_err_console())


def _progress(args):
    if args.json or not sys.stderr.isatty():
        return None, None
    status = _err_console().status("checking the target…")
    status.start()

    def progress(name, state):
        status.update(f"checking the target: {name} {state} (deep probes take ~15-30 s when not cached)")

    return status, progress


def _check(python, args, stack_name, lockfile):
    from doctor.engine import run_check

    status, progress = _progress(args)
    try:
        return run_check(python, stack_name=stack_name, lockfile=lockfile, progress=progress)
    finally:
        if status:
            status.stop()


def _summary(findings) -> dict:
    return {sev: sorted({f.id for f in findings if f.severity == sev}) for sev in ("error", "warning", "info")}


def judge(before, after, targets: set[str]) -> tuple[list[str], list[str]]:
    """(new errors, targeted errors still there). Host facts (gpu.*) never count."""
    def errs(findings):
        return {f.id for f in findings if f.severity == "error" and not f.id.startswith(HOST_FACT_PREFIXES)}

    b, a = errs(before), errs(after)
    return sorted(a - b), sorted(a & b & targets)


# --------------------------------------------------------------------------------------------------
# output


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
    if plan.manual:
        console.print("\n[bold]Manual steps[/] (doctor fix does not do these)")
        for m in plan.manual:
            mark, colour = ("✗", "red") if m["severity"] == "error" else ("!", "yellow")
            console.print(f"  [{colour}]{mark} {escape(m['id'])}[/]: {escape(m['title'])}")
            console.print(f"      fix: {escape(m['summary'])}")
            for c in m["commands"]:
                console.print(f"        $ {escape(c)}")


# --------------------------------------------------------------------------------------------------
# fix


def run_fix(args) -> int:
    from doctor.fixes import ApplyContext, FixError, build_plan, validate_only
    from doctor.fixes import snapshot as snapmod
    from doctor.fixes.packages import bind_constraints_path
    from doctor.knowledge import get_stack
    from doctor.rules.common import closest_stack

    t_start = time.perf_counter()
    python = resolve_python(args.python)
    lockfile = Path(args.lock).absolute() if args.lock else None
    if lockfile is not None and not lockfile.is_file():
        raise UsageError(f"--lock {args.lock}: no such file")
    if args.stack:
        get_stack(args.stack)  # unknown stack: exit 2 before any probe
    validate_only(args.only)
    _needs_confirmation_channel(args)

    out = _console()
    say = (lambda msg: None) if args.json else out.print
    doc: dict = {"command": "fix", "target": python, "dry_run": bool(args.dry_run), "snapshot": None,
                 "after": None, "new_errors": [], "unfixed": [], "reason": None, "timings": {}}

    def finish(status: str, code: int) -> int:
        doc["status"], doc["exit_code"] = status, code
        doc["timings"]["total_s"] = round(time.perf_counter() - t_start, 2)
        if args.json:
            sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        return code

    lock_cm = snapmod.target_lock(python) if not args.dry_run else _nullcontext()
    with lock_cm:
        t0 = time.perf_counter()
        before = _check(python, args, args.stack, lockfile)
        doc["timings"]["check_s"] = round(time.perf_counter() - t0, 2)
        doc["timings"]["check_cached"] = bool(before.timings.get("cached"))
        stack = get_stack(args.stack) if args.stack else closest_stack(before.facts)[0]
        stack_how = "chosen with --stack" if args.stack else "closest by installed versions"
        t0 = time.perf_counter()
        plan = build_plan(before.findings, python=python, stack=stack, lockfile=str(lockfile) if lockfile else None,
                          only=args.only)
        doc.update(stack=plan.stack, lockfile=plan.lockfile, before=_summary(before.findings))
        snap_id = None if args.dry_run or not plan.steps else snapmod.new_id()
        if snap_id:
            for s in plan.steps:
                bind_constraints_path(s, snapmod.snapshots_dir() / snap_id / "constraints.txt")
        try:
            plan.prepare(ApplyContext(target=python))
        except FixError as exc:
            doc["plan"] = plan.to_dict()
            doc["reason"] = f"cannot plan: {exc}"
            if not args.json:
                render_plan(out, plan, before, stack_how)
                out.print(f"\n[bold red]✗ the plan cannot be applied[/]: {escape(str(exc))}\n  nothing was changed")
            return finish("plan-failed", ExitCode.PROBLEMS)
        doc["timings"]["plan_s"] = round(time.perf_counter() - t0, 2)
        doc["plan"] = plan.to_dict()
        if not args.json:
            render_plan(out, plan, before, stack_how)
        if args.dry_run:
            say("\n[dim]--dry-run: nothing was changed[/]")
            return finish("planned", ExitCode.OK)
        if not plan.steps:
            say("\n[green]nothing to fix automatically[/]" + (" (see the manual steps above)" if plan.manual else ""))
            return finish("nothing-to-do", ExitCode.OK)
        if not args.yes and not _confirm("\nApply this plan?"):
            say("nothing was changed")
            return finish("declined", ExitCode.OK)

        # Snapshot first: from here on, `doctor rollback ID` can always restore the target.
        assert snap_id is not None  # plan.steps and not --dry-run
        snap = snapmod.create(snap_id, python, plan, before.facts["distributions"])
        doc["snapshot"] = {"id": snap.id, "path": str(snap.path)}
        say(f"\nsnapshot [bold]{snap.id}[/] written before any change: {escape(str(snap.path))}")
        ctx = ApplyContext(target=python, snapshot_dir=snap.path, log=lambda m: say(f"  [dim]$ {escape(m)}[/]"))
        t0 = time.perf_counter()
        try:
            snap.update(status="applying")
            try:
                for i, step in enumerate(plan.steps, 1):
                    say(f"applying {i}/{len(plan.steps)}: {escape(step.description)}")
                    record = step.apply(ctx)
                    snap.record_applied({"step": i, "kind": step.kind, **record})
                    if record.get("changes"):
                        say(f"  [green]changed[/]: {escape(' · '.join(record['changes']))}")
            except FixError as exc:
                doc["timings"]["apply_s"] = round(time.perf_counter() - t0, 2)
                doc["reason"] = f"a step failed: {exc}"
                return finish(*_roll_back(snap, python, doc, say))
            doc["timings"]["apply_s"] = round(time.perf_counter() - t0, 2)
            snap.update(status="applied")
            say("re-checking the target…")
            t0 = time.perf_counter()
            after = _check(python, args, plan.stack, lockfile)
            doc["timings"]["recheck_s"] = round(time.perf_counter() - t0, 2)
            doc["timings"]["recheck_cached"] = bool(after.timings.get("cached"))
        except KeyboardInterrupt:
            snap.update(status="interrupted")
            _err_console().print(f"\n[bold yellow]interrupted[/]: the target may be half-changed; snapshot {snap.id} "
                                 f"was written before any change.\nrestore it with: doctor rollback {snap.id} --yes"
                                 + (f" --python {python}" if args.python else ""))
            return finish("interrupted", ExitCode.INTERRUPTED)

        new, unfixed = judge(before.findings, after.findings, plan.targets)
        doc.update(after=_summary(after.findings), new_errors=new, unfixed=unfixed)
        if new or unfixed:
            why = []
            if unfixed:
                why.append(f"still reported although the plan targeted them: {', '.join(unfixed)}")
            if new:
                why.append(f"new error(s) after the change: {', '.join(new)}")
            doc["reason"] = "; ".join(why)
            if not args.json:
                out.print(f"\n[bold red]✗ the re-check failed[/]: {escape(doc['reason'])}")
                for f in after.findings:
                    if f.id in new or f.id in unfixed:
                        out.print(f"    [red]✗ {escape(f.id)}[/]: {escape(f.title)}")
                        for e in f.evidence[:4]:
                            out.print(f"        [dim]{escape(e)}[/]")
            return finish(*_roll_back(snap, python, doc, say))

        snap.update(status="fixed")
        fixed = sorted(plan.targets - {f.id for f in after.findings})
        remaining = [f for f in after.findings if f.severity in ("error", "warning")]
        doc["fixed"] = fixed
        if not args.json:
            out.print(f"\n[bold green]✓ fixed[/]: {escape(', '.join(fixed) or 'nothing left to fix')} "
                      f"[dim](apply {doc['timings']['apply_s']:.1f} s, re-check {doc['timings']['recheck_s']:.1f} s)[/]")
            for f in remaining:
                mark, colour = ("✗", "red") if f.severity == "error" else ("!", "yellow")
                note = " (host fact, not the env)" if f.id.startswith(HOST_FACT_PREFIXES) else ""
                out.print(f"  still reported: [{colour}]{mark} {escape(f.id)}[/]{note}: {escape(f.title)}")
            out.print(f"  undo with: doctor rollback {snap.id}")
        return finish("fixed", ExitCode.OK)


def _roll_back(snap, python, doc, say) -> tuple[str, int]:
    from doctor.fixes import FixError
    from doctor.fixes import snapshot as snapmod

    say(f"\nrolling back to snapshot [bold]{snap.id}[/]…")
    t0 = time.perf_counter()
    try:
        snapmod.restore(snap, python, log=lambda m: say(f"  [dim]$ {escape(m)}[/]"))
    except FixError as exc:
        snap.update(status="rollback-failed")
        doc["rollback_error"] = str(exc)
        say(f"[bold red]✗ the automatic rollback failed[/]: {escape(str(exc))}\n"
            f"  retry with: doctor rollback {snap.id} --yes")
        return "rollback-failed", ExitCode.PROBLEMS
    doc["timings"]["rollback_s"] = round(time.perf_counter() - t0, 2)
    snap.update(status="rolled-back", rollback_reason=doc.get("reason"))
    say(f"[bold yellow]rolled back[/]: `uv pip freeze` is identical to the snapshot; the fix was not kept "
        f"({escape(doc.get('reason') or '')})")
    return "rolled-back", ExitCode.PROBLEMS


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# --------------------------------------------------------------------------------------------------
# rollback


def run_rollback(args) -> int:
    from doctor.fixes import FixError
    from doctor.fixes import snapshot as snapmod

    python_arg = resolve_python(args.python) if args.python else None
    out = _console()
    if args.list:
        snaps = snapmod.list_all(python_arg)
        if not snaps:
            out.print(f"no snapshots in {escape(str(snapmod.snapshots_dir()))}")
            return ExitCode.OK
        for s in snaps:
            targets = sorted({t for st in s.meta.get("plan", {}).get("steps", []) for t in st.get("targets", [])})
            out.print(f"{s.id}  {s.meta.get('created', '?')}  [bold]{escape(s.meta.get('status', '?'))}[/]  "
                      f"{escape(s.meta.get('target', '?'))}")
            if s.meta.get("made_by") == "rollback":
                out.print(f"    the state a rollback to {escape(s.meta.get('before_rollback_to') or '?')} replaced")
            else:
                out.print(f"    fixes: {escape(', '.join(targets) or '-')}")
        return ExitCode.OK

    snap = snapmod.find(args.snapshot, python_arg)
    python = python_arg or snap.meta["target"]
    if not Path(python).exists():
        raise UsageError(f"snapshot {snap.id}: its target {python} no longer exists (give --python PATH)")
    _needs_confirmation_channel(args)
    with snapmod.target_lock(python):
        from doctor.fixes.packages import freeze

        saved = snap.freeze_path.read_text()
        now = freeze(python)
        out.print(f"[bold]verl-doctor rollback[/] · snapshot {snap.id} ({snap.meta.get('created')}, "
                  f"{snap.meta.get('status')}) → {escape(python)}")
        if now == saved and not any(not _restores_packages(r) for r in snap.meta.get("applied", [])):
            out.print("[green]nothing to do[/]: `uv pip freeze` already equals the snapshot's")
            return ExitCode.OK
        import difflib

        diff = [ln for ln in difflib.unified_diff(now.splitlines(), saved.splitlines(), lineterm="", n=0)
                if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        out.print(f"  restores {len(diff)} freeze line(s):")
        for ln in diff[:30]:
            out.print(f"    [{'green' if ln[0] == '+' else 'red'}]{escape(ln)}[/]")
        if not args.yes and not _confirm("Restore this snapshot?"):
            out.print("nothing was changed")
            return ExitCode.OK
        t0 = time.perf_counter()
        # A rollback changes the env too: snapshot what it replaces first, so it can be undone.
        before = snapmod.create(snapmod.new_id(), python, None, _freeze_versions(now), before_rollback_to=snap.id)
        out.print(f"  snapshot of the current state: {before.id} (undo this rollback: "
                  f"doctor rollback {before.id} --python {escape(python)})")
        try:
            snapmod.restore(snap, python, log=lambda m: out.print(f"  [dim]$ {escape(m)}[/]"))
        except FixError as exc:
            out.print(f"[bold red]✗ rollback failed[/]: {escape(str(exc))}")
            return ExitCode.PROBLEMS
        snap.update(status="rolled-back")
        before.update(status="replaced-by-rollback")
        out.print(f"[bold green]✓ restored[/] in {time.perf_counter() - t0:.1f} s: `uv pip freeze` is byte-identical "
                  "to the snapshot")
    return ExitCode.OK


def _freeze_versions(freeze_text: str) -> dict:
    """{name: {"version": v}} from `uv pip freeze` lines of the form name==version."""
    out = {}
    for line in freeze_text.splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            out[name.strip()] = {"version": version.strip()}
    return out


def _restores_packages(record: dict) -> bool:
    from doctor.fixes import STEP_KINDS

    kind = STEP_KINDS.get(record.get("kind") or "")
    return kind is None or kind.restores_packages
