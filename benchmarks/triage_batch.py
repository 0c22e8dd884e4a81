"""First-look score of `doctor triage` on a fresh batch of public pastes (issue 25: "Measured on the
first look"). Each case of tests/data/corpus/fresh-*/INDEX.yaml is run through the real command,
`python -m doctor triage --json FILE`, exactly as a user would run it, and judged against the
expectations written before the doctor ever saw the batch:

    python benchmarks/triage_batch.py [--batch fresh-2026-12-02] [--json] [--table]

Verdicts on a failure paste:
  named      an error finding names the cause: its ID is one of `expect_ids` (or `expect_ids` is empty:
             any finding but the generic ones, whose title only quotes the exception line) AND its
             title + fix contain every word group of `words`, AND it has a fix;
  half       right family or area, but generic or incomplete: an `expect_ids`/`half_ids` finding
             without the decisive words, or the words only in a generic finding;
  wrong      an error finding blames another cause (and none is named or half-named);
  generic    the failure is seen but only runtime.unrecognized-failure / runtime.app-error /
             trainer.step-failed (any severity) is given, without the words;
  no-failure the doctor reports no failure (no error finding);
  refused    exit 2 or no JSON on stdout.
On a harmless paste: ok, false-alarm (any error finding) or refused.

The corpus benchmark (benchmarks/triage_corpus.py) counts "right" as the expected finding ID with a
fix; this one needs the words too, because most fresh causes have no finding ID yet and an ID with
the wrong detail (another port, another library) is not a usable answer."""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "corpus"
GENERIC = {"runtime.unrecognized-failure", "runtime.app-error", "trainer.step-failed"}
FAILURE_VERDICTS = ("named", "half", "wrong", "generic", "no-failure", "refused")


def run_triage(path: Path) -> tuple[int, dict | None, float]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "doctor", "triage", "--json", str(path)],
                       capture_output=True, text=True, cwd=REPO)
    secs = time.perf_counter() - t0
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = None
    return p.returncode, doc if isinstance(doc, dict) else None, secs


def _text(f: dict) -> str:
    fix = f.get("fix") or {}
    return " ".join([f.get("title", ""), fix.get("summary", ""), *(fix.get("commands") or [])]).lower()


def _has_words(f: dict, groups: list[list[str]]) -> bool:
    t = _text(f)
    return all(any(w.lower() in t for w in g) for g in groups)


def _matches(fid: str, ids: list[str]) -> bool:
    return any(fid == i or (i.endswith(".*") and fid.startswith(i[:-1])) or
               (i == "version.transformers" and fid.startswith("version.")) for i in ids)


def judge(case: dict, rc: int, doc: dict | None) -> tuple[str, list[str]]:
    if doc is None or rc == 2:
        return "refused", []
    errors = [f for f in doc.get("findings", []) if f.get("severity") == "error"]
    if case["kind"] == "harmless":
        return ("false-alarm" if errors else "ok"), [f["id"] for f in errors]
    # the "cause not known" finding is a warning: it still reports the failure
    errors += [f for f in doc.get("findings", []) if f.get("severity") != "error" and f["id"] in GENERIC]
    got = [f["id"] for f in errors]
    if not errors:
        return ("generic" if doc.get("failed") else "no-failure"), got
    want, half, words = case.get("expect_ids") or [], case.get("half_ids") or [], case.get("words") or []
    for f in errors:
        # a generic finding quotes the exception line: the words it contains are the log's, not a diagnosis
        id_ok = _matches(f["id"], want) if want else f["id"] not in GENERIC
        if id_ok and _has_words(f, words) and (f.get("fix") or {}).get("summary"):
            return "named", got
    for f in errors:
        if _matches(f["id"], want) or _matches(f["id"], half) or (f["id"] not in GENERIC and _has_words(f, words)):
            return "half", got
    if all(f["id"] in GENERIC for f in errors):
        return "generic", got
    return "wrong", got


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", default=None, help="folder under tests/data/corpus (default: the newest fresh-*)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--table", action="store_true", help="print a markdown table per case")
    args = ap.parse_args()
    batch = CORPUS / args.batch if args.batch else sorted(CORPUS.glob("fresh-*"))[-1]
    summary, rows = run_batch(batch)
    fail = [r for r in rows if r["kind"] == "failure"]
    harm = [r for r in rows if r["kind"] == "harmless"]
    if args.json:
        print(json.dumps({"summary": summary, "cases": rows}, indent=1, ensure_ascii=False))
        return 0
    print(f"{batch.name}: named {summary['named']}/{len(fail)} ({summary['named_pct']} %) · half {summary['half']} · "
          f"wrong {summary['wrong']} · generic {summary['generic']} · no failure {summary['no-failure']} · "
          f"refused {summary['refused']} · harmless: {summary['false_alarms']}/{len(harm)} false alarms, "
          f"{summary['harmless_refused']} refused")
    if args.table:
        print("| case | verdict | doctor's answer (first error finding) |\n|---|---|---|")
        for r in rows:
            ans = (r["answer"] or ("exit 2, no JSON" if r["verdict"] == "refused" else f"status {r['status']}, no error"))
            print(f"| [{r['file']}]({r['url']}) | {r['verdict']} | `{', '.join(r['errors']) or '-'}` {ans[:110]} |")
    return 0


def run_batch(batch: Path) -> tuple[dict, list[dict]]:
    """Every case of one batch through the real command: (the summary counts, one row per case)."""
    cases = yaml.safe_load((batch / "INDEX.yaml").read_text())
    rows = []
    for c in cases:
        rc, doc, secs = run_triage(batch / c["file"])
        verdict, got = judge(c, rc, doc)
        f0 = next((f for f in (doc or {}).get("findings", []) if f.get("severity") == "error" or f["id"] in GENERIC), None)
        rows.append({"file": c["file"], "url": c["url"], "kind": c["kind"], "verdict": verdict, "rc": rc,
                     "status": (doc or {}).get("status"), "errors": got,
                     "answer": (f0 or {}).get("title", ""), "fix": ((f0 or {}).get("fix") or {}).get("summary", ""),
                     "seconds": round(secs, 2)})
    fail = [r for r in rows if r["kind"] == "failure"]
    harm = [r for r in rows if r["kind"] == "harmless"]
    counts = collections.Counter(r["verdict"] for r in fail)
    hcounts = collections.Counter(r["verdict"] for r in harm)
    summary = {"batch": batch.name, "failures": len(fail), "harmless": len(harm),
               **{v: counts.get(v, 0) for v in FAILURE_VERDICTS},
               "false_alarms": hcounts.get("false-alarm", 0), "harmless_refused": hcounts.get("refused", 0),
               "refused_total": counts.get("refused", 0) + hcounts.get("refused", 0),
               "named_pct": round(100 * counts.get("named", 0) / max(1, len(fail)), 1)}
    return summary, rows


if __name__ == "__main__":
    raise SystemExit(main())
