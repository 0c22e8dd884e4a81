"""Recipes: known verl runs (YAML in the repository's recipes/ and shipped in doctor/recipes/data/),
their config lint, their preflight, the run loop, and the console-log report."""
