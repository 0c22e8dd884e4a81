"""`recipes lint`: compose a recipe's (or a file's) Hydra overrides with the *installed* verl's own
config, inside the target interpreter (scripts/compose.py), then run the config rules
(doctor/rules/config.py) on the composed config."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from doctor import knowledge
from doctor.errors import UsageError
from doctor.findings import Finding
from doctor.results import Check
from doctor.probes import TargetProbe, run_target_probe
from doctor.rules.config import ConfigContext, config_context, evaluate_config, get, override_map, unknown_key_replacement
from doctor.recipes.catalog import model_config
from doctor.recipes.catalog import load, resolve

SCRIPTS = Path(__file__).parent / "scripts"
COMPOSE_BUDGET_S = 120


@dataclass
class LintResult:
    source: str
    python: str
    compose: dict
    findings: list[Finding] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    ctx: ConfigContext | None = None

    def to_dict(self) -> dict:
        c = self.compose
        return {"source": self.source, "python": self.python, "verl": c.get("verl"), "hydra": c.get("hydra"),
                "config_dir": c.get("config_dir"), "composed": c.get("config") is not None,
                "overrides": self.overrides, "rejected": c.get("rejected", []),
                "findings": [f.to_dict() for f in self.findings], "checks": [c.to_dict() for c in self.checks]}


def compose(python: str, overrides: list[str]) -> dict:
    readers = {e["key"]: e["readers"] for e in knowledge.load("config_rules")["ignored_keys"]}
    arg = json.dumps({"overrides": overrides, "readers": readers})
    probe = TargetProbe("compose", ("verl_config.py", "compose.py"), COMPOSE_BUDGET_S, False, args=lambda: [arg], script_dir=SCRIPTS)
    res = run_target_probe(probe, python)
    if not res.ok:
        raise UsageError(f"--python {python}: cannot compose verl's config there ({res.error})")
    data = res.data or {}
    if data.get("error") and data.get("config") is None:
        raise UsageError(f"--python {python}: {data['error']}")
    return data


def config_fact(python: str, overrides: list[str], source: str, model_path: str | None = None) -> dict:
    """The recipe_config fact: the overrides composed with the installed verl's own Hydra config (in
    the target), the keys verl's code reads, and the model's config.json."""
    data = compose(python, overrides)
    cfg = data.get("config")
    mp = model_path or get(cfg, "actor_rollout_ref.model.path") or override_map(overrides).get("actor_rollout_ref.model.path")
    model, model_src = model_config(str(mp)) if mp else (None, None)
    return {"source": source, "overrides": list(overrides), "verl": data.get("verl"), "hydra": data.get("hydra"),
            "config_dir": data.get("config_dir"), "config": cfg, "rejected": data.get("rejected", []),
            "keys": data.get("keys", []), "readers": data.get("readers", {}), "model": model, "model_source": model_src}


def lint_fact(python: str, fact: dict) -> LintResult:
    """The config rules on one recipe_config fact (rules/config.py evaluate_config)."""
    ctx = config_context(fact)
    findings, checks = evaluate_config(ctx)
    return LintResult(source=fact["source"], python=python, compose=fact, findings=findings, checks=checks,
                      overrides=fact["overrides"], ctx=ctx)


def lint_overrides(python: str, overrides: list[str], source: str, model_path: str | None = None) -> LintResult:
    return lint_fact(python, config_fact(python, overrides, source, model_path))


def recipe_config_fact(python: str, recipe: dict, extra: list[str] | None = None, quick: bool = False) -> dict:
    res = resolve(recipe, quick=quick)
    return config_fact(python, res["overrides"] + list(extra or []), f"recipe {recipe['name']}", res["model_path"])


def lint_recipe(python: str, name: str, extra: list[str] | None = None, quick: bool = False) -> LintResult:
    return lint_fact(python, recipe_config_fact(python, load(name), extra, quick))


def fixed_overrides(r: LintResult) -> tuple[list[str], list[dict]]:
    """The overrides with every one Hydra rejected replaced (config.unknown-key's fix), and the
    changes made. Other findings are judgements (batch sizes, memory) and are left to the user."""
    assert r.ctx is not None, "a lint result carries its config context"
    by_override = {x["override"]: unknown_key_replacement(x, r.ctx) for x in r.compose.get("rejected", [])}
    lines, changes = [], []
    for o in r.overrides:
        fix = by_override.get(o)
        if fix is None:
            lines.append(o)
            continue
        changes.append(fix)
        lines.append(f"# verl-doctor: was {o}  ({fix['why']})")
        if fix["replacement"] is None:
            lines.append(f"# verl-doctor: dropped {o}")
        else:
            if fix["note"]:
                lines.append(f"# verl-doctor: note: {fix['note']}")
            lines.append(fix["replacement"])
    return lines, changes


def write_fixed(r: LintResult, path: str) -> tuple[Path, list[dict]]:
    """Write the fixed overrides to a NEW file (never over the user's): one override per line, each
    change explained by the comment lines above it. Exit 2 when the path exists or is unwritable."""
    out = Path(path)
    lines, changes = fixed_overrides(r)
    header = [f"# Hydra overrides for verl {r.compose.get('verl')}, written by `recipes lint --write-fixed` from "
              f"{r.source}", "# (one override per line: recipes lint/run --overrides-file, or join them for main_ppo)"]
    try:
        with open(out, "x", encoding="utf-8") as fh:  # "x": never over an existing file
            fh.write("\n".join(header + lines) + "\n")
    except FileExistsError:
        raise UsageError(f"--write-fixed {path}: it exists; name a new file (the doctor never overwrites one)")
    except OSError as exc:
        raise UsageError(f"--write-fixed {path}: cannot write it ({exc.strerror or exc})")
    return out, changes




