"""A run's pass bands (the recipe's `bands:`) judged on the steps its console logged."""

from __future__ import annotations

import statistics

from doctor.recipes import catalog


def _agg(values: list[float], how: str) -> float | None:
    if not values:
        return None
    return {"last": values[-1], "max": max(values), "min": min(values), "mean": statistics.fmean(values),
            "median": statistics.median(values), "count": float(len(values))}[how]


def evaluate_bands(bands: list[dict], steps: dict[int, dict]) -> list[dict]:
    out = []
    for b in bands:
        how = b.get("agg", "last")
        if b["metric"] == "steps":
            value: float | None = float(len(steps)) if steps else 0.0
        else:
            value = _agg([m[b["metric"]] for _, m in sorted(steps.items()) if b["metric"] in m], how)
        passed = value is not None and catalog.COMPARISONS[b["comparison"]](value, b["value"])
        out.append({"metric": b["metric"], "agg": how, "comparison": b["comparison"], "expected": b["value"],
                    "value": value, "passed": passed, "gate": b.get("gate", True), "source": b["source"],
                    "status": b.get("status", "claimed"), "why": None if value is not None else "metric never logged"})
    return out
