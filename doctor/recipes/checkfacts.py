"""The facts `doctor check --recipe NAME` adds to the environment's: what the rules judge about a
recipe (rules/config.py, rules/gpu.py recipe_gpu_count, rules/dryrun.py) and what `--facts`
replays. Each is gathered in the target by a probe of its own."""

from __future__ import annotations

from doctor.recipes import catalog
from doctor.recipes.dryrun import dry_run_fact
from doctor.recipes.lint import recipe_config_fact


def recipe_facts(python: str, recipe: dict, *, dry_run: bool, show: bool) -> dict:
    """{recipe, recipe_config, dryrun}: the recipe's name and hardware, its overrides composed with
    the installed verl's Hydra config, and verl's trainer path on CPU (None when not run: --fast)."""
    facts: dict = {"recipe": {"name": recipe["name"], "ref": catalog.command_ref(recipe), "hardware": recipe["hardware"]},
                   "recipe_config": recipe_config_fact(python, recipe)}
    facts["dryrun"] = dry_run_fact(recipe, catalog.resolve(recipe), python, show=show) if dry_run else None
    return facts
