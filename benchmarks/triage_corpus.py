"""Triage coverage on the public-record corpus (tests/data/corpus): per family and overall, the
share of failure excerpts for which `doctor triage` names the expected finding with a fix, the
false alarms on the negative controls, and the speed on 10 MB of log.

    python benchmarks/triage_corpus.py [--json] [--misses]

Expected findings are the corpus tables' `finding` column (INDEX.yaml of import/ and runtime/),
mapped to the doctor's IDs by tests/data/corpus/EXPECT.yaml where the table suggested a name."""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "corpus"
sys.path.insert(0, str(REPO))

from doctor.triage import looks_like_a_log, spec, triage_text  # noqa: E402


def cases() -> list[dict]:
    alias = yaml.safe_load((CORPUS / "EXPECT.yaml").read_text())
    out = []
    for part in ("import", "runtime"):
        for e in yaml.safe_load((CORPUS / part / "INDEX.yaml").read_text()):
            want = e.get("finding")
            want = None if e["family"] == "negative" else alias["alias"].get(want, want)
            e = dict(e, expect_id=want, accept=[want, *alias.get("also", {}).get(want, [])])
            if e["expect_id"] in alias.get("out_of_scope", {}):
                e["out_of_scope"] = alias["out_of_scope"][e["expect_id"]]
            out.append(e)
    return out


def judge(case: dict) -> dict:
    text = (CORPUS / case["file"]).read_text(encoding="utf-8", errors="replace")
    t = triage_text(text, case["file"])
    ids = [f.id for f in t.findings if f.severity == "error"]
    errors = [f for f in t.findings if f.severity == "error"]
    if case["expect_id"] is None:
        ok = not errors
        got = ids
    else:
        hit = next((f for f in t.findings if f.id in case["accept"]), None)
        ok = hit is not None and bool(hit.fix.summary)
        if not ok and case.get("expect") == "partial":
            # cut before its decisive line: right when the failure is seen and nothing else is blamed
            ok = t.failed and all(f.id in case["accept"] or f.id.startswith("runtime.unrecognized") for f in errors)
        got = [f.id for f in t.findings]
    return {"file": case["file"], "family": case["family"], "expect": case["expect_id"], "got": got, "ok": ok,
            "log_like": looks_like_a_log(text.splitlines(), spec())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--misses", action="store_true")
    args = ap.parse_args()
    all_cases = cases()
    results = [judge(c) for c in all_cases if not c.get("out_of_scope")]
    fam = collections.defaultdict(lambda: [0, 0])
    for r in results:
        fam[r["family"]][0] += r["ok"]
        fam[r["family"]][1] += 1
    pos = [r for r in results if r["expect"] is not None]
    neg = [r for r in results if r["expect"] is None]
    # Speed on 10 MB: a real PPO run's log (tests/data/logs, repeated) that ends in a real failure —
    # the shape of a log a user triages — and, as the worst case, the whole corpus repeated (every
    # line in the failure region, every signature present).
    run_log = (REPO / "tests" / "data" / "logs" / "gemma-2-2b-it-gsm8k-ppo.log").read_text(errors="replace")
    run_log = run_log.split("Final validation metrics")[0]  # still running: no completion marker
    tail = (CORPUS / "runtime" / "gpu-oom" / "verl-2828.log").read_text()
    real = run_log * max(1, (10 << 20) // len(run_log)) + tail
    t0 = time.perf_counter()
    real_t = triage_text(real, "10MB")
    secs = time.perf_counter() - t0
    assert real_t.failed and real_t.findings
    big = "\n".join((CORPUS / c["file"]).read_text(errors="replace") for c in all_cases)
    worst = (big + "\n") * max(1, (10 << 20) // max(1, len(big)))
    t0 = time.perf_counter()
    triage_text(worst, "10MB-corpus")
    worst_secs = time.perf_counter() - t0
    doc = {"positives": len(pos), "right": sum(r["ok"] for r in pos), "negatives": len(neg),
           "false_alarms": sum(not r["ok"] for r in neg), "families": {k: v for k, v in sorted(fam.items())},
           "seconds_per_10MB": round(secs * (10 << 20) / len(real), 3),
           "seconds_per_10MB_worst_case": round(worst_secs * (10 << 20) / len(worst), 3),
           "out_of_scope": [c["file"] for c in all_cases if c.get("out_of_scope")],
           "misses": [r for r in results if not r["ok"]]}
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"right: {doc['right']}/{doc['positives']} ({100 * doc['right'] / max(1, doc['positives']):.1f} %) · "
          f"false alarms: {doc['false_alarms']}/{doc['negatives']} · {doc['seconds_per_10MB']} s per 10 MB of a run's "
          f"log ({doc['seconds_per_10MB_worst_case']} s for 10 MB of pure failure excerpts)")
    for k, (ok, n) in doc["families"].items():
        print(f"  {k:28} {ok}/{n}")
    if args.misses:
        for r in doc["misses"]:
            print(f"MISS {r['file']}: expected {r['expect']}, got {r['got']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
