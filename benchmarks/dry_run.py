"""The dry run of the trainer (`recipes run RECIPE --dry-run`), timed: per-step medians over a few
rounds on one env (default: the tests' `working` env, the default lock), as a markdown table for
docs/benchmarks.md, beside the deep check of the same env in the same rounds (issue 27: the dry run
within 1.5x the deep check). Each round runs the deep check (`doctor check --no-gpu --no-cache`) and
then the dry run; the first round builds the stand-in tokenizer, later ones read it from the doctor's
cache (as every dry run after the first on one target does). Usage:
python benchmarks/dry_run.py [--rounds 3] [--python PATH] [--recipe NAME]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python")
    ap.add_argument("--recipe", default="gsm8k-2xA100")
    args = ap.parse_args()
    if args.python:
        python = args.python
    else:
        import envs

        python = str(envs.build("working"))
    per_step: dict[str, list[float]] = {}
    totals, walls = [], []
    checks = []
    for n in range(args.rounds):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "doctor", "check", "--no-gpu", "--no-cache", "--python", python],
                       capture_output=True, text=True, cwd=REPO)
        checks.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "doctor.recipes.cli", "run", args.recipe, "--dry-run", "--json",
                            "--python", python], capture_output=True, text=True, cwd=REPO, env=dict(os.environ))
        walls.append(time.perf_counter() - t0)
        doc = json.loads(p.stdout)
        if doc["status"] != "passed":
            print(f"round {n + 1}: {doc['status']} (exit {p.returncode})", file=sys.stderr)
            return 1
        totals.append(doc["dry_run"]["seconds"])
        for s in doc["dry_run"]["steps"]:
            per_step.setdefault(s["title"], []).append(s["seconds"])
        print(f"round {n + 1}: {walls[-1]:.1f} s", file=sys.stderr)
    print(f"`recipes run {args.recipe} --dry-run`, {args.rounds} rounds, {os.cpu_count()} cores\n")
    print("| step | median (s) | min–max (s) |\n|---|---|---|")
    for title, xs in per_step.items():
        print(f"| {title} | {statistics.median(xs):.1f} | {min(xs):.1f}–{max(xs):.1f} |")
    print(f"| **the dry run (the target's process)** | **{statistics.median(totals):.1f}** | {min(totals):.1f}–{max(totals):.1f} |")
    print(f"| the command, wall clock | {statistics.median(walls):.1f} | {min(walls):.1f}–{max(walls):.1f} |")
    print(f"| the deep check of the same env, wall clock (`doctor check --no-gpu --no-cache`) | "
          f"{statistics.median(checks):.1f} | {min(checks):.1f}–{max(checks):.1f} |")
    ratios = [w / c for w, c in zip(walls, checks)]
    print(f"\ndry run ÷ deep check, per round: {', '.join(f'{r:.2f}' for r in ratios)} "
          f"(median {statistics.median(ratios):.2f}; the first round builds the stand-in)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
