"""Recipes: known verl runs (YAML in the repository's top-level recipes/, shipped in the wheel; the
data they use in doctor/recipes/data/), their config lint, their preflight, the run loop, and the
console-log report."""
