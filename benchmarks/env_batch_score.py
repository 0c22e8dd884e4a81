"""First-look score of `doctor check` on the fresh env batch (benchmarks/env_batch/CASES.yaml, built by
benchmarks/build_env_batch.py under /tmp/envbatch): each env checked as a user would, with the case's
settings in the environment, `doctor check --json --no-gpu --no-cache --python ENV/bin/python`.

    python benchmarks/env_batch_score.py [--root /tmp/envbatch] [--only NAME …] [--json]

The cause a correct answer names is the case's changed distribution or setting (its `token`: the
dist from `change`, or the variable of a setting). Verdicts on a case that breaks something:
  named   an error finding that is not caused by another one (a headline) names the token
  half    the token is named, but only in a warning/info, a finding caused by another one, or
          in the evidence of a headline that blames something else
  missed  nothing names it
On a control (breaks: []): ok (no error beyond the machine's own and the baseline's) or false-alarm.
Beside each: what `uv pip check` said (recorded by the build)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "benchmarks" / "env_batch" / "CASES.yaml"
HOST = {"gpu.none", "system.shm-small"}


def token(case: dict) -> str:
    if case["kind"] == "setting":
        return re.search(r"\{(\w+):", case["change"]).group(1)
    m = re.search(r"(?:uninstall|install)(?: --no-deps)? ([A-Za-z0-9_.-]+?)(?:==|\s|$)", case["change"])
    return m.group(1)


def judge(case: dict, doc: dict) -> tuple[str, list[str]]:
    tok = token(case).lower()
    alt = {tok, tok.replace("-", "_"), tok.replace("_", "-")}
    findings = doc.get("findings", [])
    heads = [f for f in findings if f["severity"] == "error" and not f.get("caused_by") and f["id"] not in HOST]
    if not case.get("breaks"):
        return ("false-alarm" if heads else "ok"), [f["id"] for f in heads]

    def says(f, evidence=True):
        text = " ".join([f["title"], *(f["evidence"] if evidence else [])]).lower()
        return any(a in text for a in alt)
    if any(says(f, evidence=False) or says(f) and f["id"].startswith(("setting.", "stack.culprit")) for f in heads):
        return "named", [f["id"] for f in heads]
    if any(says(f) for f in findings):
        return "half", [f["id"] for f in heads]
    return "missed", [f["id"] for f in heads]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/envbatch")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cases = yaml.safe_load(CASES.read_text())
    rows = []
    for c in cases:
        if args.only and c["name"] not in args.only:
            continue
        env_dir = Path(args.root) / c["name"]
        meta = json.loads((env_dir / "case.json").read_text())
        env = {**os.environ, **(meta.get("env") or {})}
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "doctor", "check", "--json", "--no-gpu", "--no-cache",
                            "--python", str(env_dir / "bin" / "python")], capture_output=True, text=True, env=env,
                           cwd=REPO, timeout=900)
        secs = time.perf_counter() - t0
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            doc = {"findings": []}
        verdict, heads = judge(c, doc)
        # the cause is THE headline: every headline error is the one that names it
        tok = token(c).lower()
        only = verdict == "named" and all(tok in (f["title"] + " ".join(f["evidence"])).lower()
                                          or tok.replace("-", "_") in (f["title"] + " ".join(f["evidence"])).lower()
                                          for f in doc.get("findings", []) if f["id"] in heads)
        rows.append({"name": c["name"], "kind": c["kind"], "token": token(c), "verdict": verdict, "rc": p.returncode,
                     "headlines": heads, "only_headline": only,
                     "uv_pip_check": "clean" if str(c.get("uv_pip_check", "")).startswith("clean") else "flags", "seconds": round(secs, 1)})
        print(f"{c['name']}: {verdict} ({', '.join(heads) or '-'})", file=sys.stderr)
    broken = [r for r in rows if r["verdict"] in ("named", "half", "missed")]
    count = {v: sum(r["verdict"] == v for r in rows) for v in ("named", "half", "missed", "ok", "false-alarm")}
    if args.json:
        print(json.dumps({"summary": count, "cases": rows}, indent=1))
        return 0
    only = sum(r["only_headline"] for r in rows)
    print(f"named {count['named']}/{len(broken)} (the only headline in {only}) · half {count['half']} · "
          f"missed {count['missed']} · controls ok {count['ok']}, false alarms {count['false-alarm']}")
    print("| case | kind | cause | doctor | headline errors | uv pip check |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['kind']} | {r['token']} | {r['verdict']} | {', '.join(r['headlines']) or '-'} | "
              f"{r['uv_pip_check']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
