"""`doctor explain ID`: meaning, cause, fix, the rule that reports it and sources of a finding (ruff-rule style)."""

from __future__ import annotations

import re

from doctor import knowledge
from doctor.errors import UsageError
from doctor.findings import definition, is_automatic
from doctor.rules import reported_by
from doctor.report.console import console_for, escape


_PLACEHOLDER = re.compile(r"{(\w+)}")


def _version_ids() -> dict[str, list[tuple[str, dict]]]:
    out: dict[str, list] = {}
    for stack in knowledge.stacks().values():
        for c in stack["constraints"]:
            out.setdefault(f"version.{c['dist']}", []).append((stack["name"], c))
    return out


def run_explain(finding_id: str | None) -> int:
    console = console_for()
    defs = knowledge.finding_defs()
    versions = _version_ids()
    rows = [(d["id"], d["severity"], d["title"]) for d in defs.values() if d["id"] != "version.*"]
    rows += [(vid, "(stack)", "a distribution outside the stack's known-good range") for vid in sorted(versions)]
    family = [r for r in rows if finding_id and "." not in finding_id and r[0].startswith(finding_id + ".")]
    if not finding_id or family:
        listed = family or rows
        width = max(len(r[0]) for r in listed) + 2
        for fid, sev, title in listed:
            # placeholders are filled when a finding fires; in a list they read as <name>
            shown = _PLACEHOLDER.sub(r"<\1>", title)
            console.print(f"{fid:{width}} {sev:8} {escape(shown)}")
        if family:
            console.print(f"[dim]{len(family)} finding(s) in the {finding_id} family · doctor explain ID[/]")
        return 0
    spec = definition(finding_id)
    if spec is None or (spec["id"] == "version.*" and finding_id not in versions):
        import difflib

        near = difflib.get_close_matches(finding_id, [r[0] for r in rows], n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(near)}?" if near else " (`doctor explain` lists them all)"
        raise UsageError(f"unknown finding ID {finding_id!r}{hint}")
    console.print(f"[bold]{finding_id}[/] · area {spec['area']} · severity {spec['severity']} · scope {spec['scope']}")
    console.print(f"\n[bold]What it means[/]\n  {escape(spec['meaning'])}")
    if finding_id in versions:
        console.print("\n[bold]Known-good ranges[/]")
        for stack, c in versions[finding_id]:
            only = f", only with {c['when']['dist']}{c['when']['spec']}" if c.get("when") else ""
            console.print(f"  {stack}: {c['dist']}{c['spec']} ({c['severity']}{only}) — {escape(c['reason'])}")
            console.print(f"    [dim]source: {escape(c['source'])}[/]")
    else:
        console.print(f"\n[bold]Why it happens[/]\n  {escape(spec['why'])}")
    fix = spec["fix"]
    auto = "yes" if is_automatic(spec) else "no (manual)"
    console.print(f"\n[bold]How to fix it[/]  [dim](doctor fix: {auto})[/]\n  {escape(fix['summary'])}")
    for cmd in fix.get("commands", []):
        console.print(f"  $ {escape(cmd)}")
    console.print("\n[bold]Reported by[/]")
    for who in reported_by(finding_id):
        console.print(f"  - {escape(who)}")
    if finding_id not in versions:
        console.print("\n[bold]Sources[/]")
        for s in spec.get("sources", []):
            console.print(f"  - {escape(s)}")
    return 0


def run(args) -> int:
    return run_explain(args.id)
