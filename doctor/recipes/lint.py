"""`recipes lint`: compose a recipe's (or a file's) Hydra overrides with the *installed* verl's own
config, inside the target interpreter (scripts/compose.py), then run the config rules
(doctor/rules/config.py) on the composed config."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from doctor import knowledge
from doctor.errors import UsageError
from doctor.findings import Finding
from doctor.probes import SCRIPTS as PROBE_SCRIPTS
from doctor.probes import TargetProbe, run_target_probe
from doctor.rules.config import ConfigContext, evaluate_config, get, override_map

SCRIPTS = Path(__file__).parent / "scripts"
COMPOSE_BUDGET_S = 120


class _ComposeProbe(TargetProbe):
    def source(self) -> str:
        return (PROBE_SCRIPTS / "_prelude.py").read_text() + "\n" + (SCRIPTS / "compose.py").read_text()


@dataclass
class LintResult:
    source: str
    python: str
    compose: dict
    findings: list[Finding] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        c = self.compose
        return {"source": self.source, "python": self.python, "verl": c.get("verl"), "hydra": c.get("hydra"),
                "config_dir": c.get("config_dir"), "composed": c.get("config") is not None,
                "overrides": self.overrides, "rejected": c.get("rejected", []),
                "findings": [f.to_dict() for f in self.findings], "checks": self.checks}


def compose(python: str, overrides: list[str]) -> dict:
    readers = {e["key"]: e["readers"] for e in knowledge.load("config_rules")["ignored_keys"]}
    arg = json.dumps({"overrides": overrides, "readers": readers})
    probe = _ComposeProbe("compose", "compose.py", COMPOSE_BUDGET_S, False, args=lambda: [arg])
    res = run_target_probe(probe, python)
    if not res.ok:
        raise UsageError(f"--python {python}: cannot compose verl's config there ({res.error})")
    if res.data.get("error") and res.data.get("config") is None:
        raise UsageError(f"--python {python}: {res.data['error']}")
    return res.data


def lint_overrides(python: str, overrides: list[str], source: str, model_path: str | None = None) -> LintResult:
    from doctor.recipes.catalog import model_config

    data = compose(python, overrides)
    cfg = data.get("config")
    mp = model_path or get(cfg, "actor_rollout_ref.model.path") or override_map(overrides).get("actor_rollout_ref.model.path")
    model, model_src = model_config(str(mp)) if mp else (None, None)
    ctx = ConfigContext(verl=data.get("verl"), config=cfg, overrides=overrides, rejected=data.get("rejected", []),
                        keys=data.get("keys", []), readers=data.get("readers", {}), model=model,
                        model_source=model_src, source=source)
    findings, checks = evaluate_config(ctx)
    return LintResult(source=source, python=python, compose=data, findings=findings, checks=checks, overrides=overrides)


def lint_recipe(python: str, name: str, extra: list[str] | None = None, quick: bool = False) -> LintResult:
    from doctor.recipes.catalog import load, resolve

    recipe = load(name)
    res = resolve(recipe, quick=quick)
    return lint_overrides(python, res["overrides"] + list(extra or []), f"recipe {recipe['name']}", res["model_path"])


def render_text(r: LintResult, out=None) -> None:
    from rich.console import Console
    from rich.markup import escape

    from doctor.report.text import MARK, _finding

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
        mark, colour = MARK[chk["status"]]
        extra = f" [dim]({chk['why']})[/]" if chk["status"] == "skipped" else ""
        console.print(f"  [{colour}]{mark}[/] {escape(chk['check'])}{extra}")
        for fid in chk["ids"]:
            for f in by_id.pop(fid, []):
                _finding(console, f)
    errors = sum(f.severity == "error" for f in r.findings)
    warnings = sum(f.severity == "warning" for f in r.findings)
    colour = "red" if errors else "yellow" if warnings else "green"
    console.print(f"\n[bold {colour}]{errors} error(s), {warnings} warning(s)[/]")


def run_lint(args) -> int:
    from doctor.recipes.catalog import read_overrides_file
    from doctor.target import resolve_python

    if not args.name and not args.overrides_file:
        raise UsageError("give a recipe NAME (or YAML file) and/or --overrides-file F")
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
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=1, default=str) + "\n")
    else:
        render_text(result)
    return 1 if any(f.severity == "error" for f in result.findings) else 0
