"""The facts `doctor check --recipe NAME` adds to the environment's: what the rules judge about a
recipe (rules/config.py, rules/gpu.py recipe_gpu_count, rules/dryrun.py) and what `--facts`
replays. Each is gathered in the target by a probe of its own."""

from __future__ import annotations

from doctor.errors import UsageError
from doctor.recipes import catalog
from doctor.recipes.dryrun import dry_run_fact
from doctor.recipes.lint import recipe_config_fact


def recipe_facts(python: str, recipe: dict, *, dry_run: bool, show: bool, errors: dict | None = None) -> dict:
    """{recipe, recipe_config, dryrun}: the recipe's name and hardware, its overrides composed with
    the installed verl's Hydra config, and verl's trainer path on CPU (None when not run: --fast).
    A config that cannot compose raises UsageError (`doctor check --recipe`: exit 2), unless
    `errors` is given: then recipe_config is None and errors["recipe_config"] says why (the
    preflight goes on to judge the rest)."""
    try:
        config = recipe_config_fact(python, recipe)
    except UsageError as exc:
        if errors is None:
            raise
        config, errors["recipe_config"] = None, str(exc)
    facts: dict = {"recipe": {"name": recipe["name"], "ref": catalog.command_ref(recipe), "hardware": recipe["hardware"]},
                   "recipe_config": config}
    facts["dryrun"] = dry_run_fact(recipe, catalog.resolve(recipe), python, show=show) if dry_run else None
    return facts
