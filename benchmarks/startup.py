"""Start-up and the warm path (issue 25): a person runs `doctor triage` on one paste at a time and
`doctor check` between every change, so what counts is the whole command against a bare Python start
of the same interpreter, measured in one run:

    `python -c pass` · `doctor --version` · `doctor triage SHORT_PASTE` · warm `doctor check --python T`
    · `doctor triage` of 10 MB of a real run's log

Paired rounds (every command once per round, rotating order), medians, ratios to the bare start. Two
modes, because Python's bytecode cache decides much of a start: "bytecode" (the doctor's modules
compiled once, as `pip install` leaves them) and "no bytecode" (PYTHONDONTWRITEBYTECODE=1, which
this project's machines set: every start compiles the doctor's sources again).

    python benchmarks/startup.py [--rounds 15] [--python TARGET] [--out docs/benchmarks.md]

TARGET defaults to the tests' `working` env (tests/envs.py), else the doctor's own interpreter."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHORT_PASTE = REPO / "tests" / "data" / "corpus" / "fresh-2026-12-03n" / "h2ogpt-1895.log"
RUN_LOG = REPO / "tests" / "data" / "logs" / "qwen2.5-0.5b-gsm8k-ppo-prompt512-resp256.log"
SECTION = "## Start-up and the warm path"
READING = [
    "- **bytecode** is how an install runs (pip compiles the modules; an editable install writes",
    "  `__pycache__` on its first start). **no bytecode** is this project's machines' default",
    "  (PYTHONDONTWRITEBYTECODE=1): every start compiles the doctor's own sources again — the bars hold in",
    "  the first mode; the second is reported, not tuned for (the doctor does not override that setting).",
    "- Before issue 25's start-up work (2026-12-03, measured by hand under load): `--version` 2.8×, a short",
    "  triage ~10×, a warm check ~14×. What moved them: knowledge files parsed and schema-checked once and",
    "  kept by their bytes (doctor/derived.py); knowledge regexes compiled only for a text that holds their",
    "  needle (knowledge/patterns.py); a plain printer off a terminal instead of importing rich",
    "  (report/console.py); pip.conflict deciding an extra's requirements without parsing them; no second",
    "  Python start for the triage's own interpreter version; --recipe's modules loaded only with --recipe.",
]
BARS = {"doctor --version": 3.0, "triage, short paste": 4.0, "warm check": 10.0}


def default_target() -> str:
    sys.path.insert(0, str(REPO / "tests"))
    import envs  # the tests' env builder: the env the benchmarks share (built once, from the uv cache)

    return str(envs.build("working"))


def commands(target: str, big_log: Path) -> dict[str, list[str]]:
    doctor = str(Path(sys.executable).parent / "doctor")
    return {
        "bare python": [sys.executable, "-c", "pass"],
        "doctor --version": [doctor, "--version"],
        "triage, short paste": [doctor, "triage", str(SHORT_PASTE)],
        "warm check": [doctor, "check", "--python", target],
        "triage, 10 MB log": [doctor, "triage", str(big_log)],
    }


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    return time.perf_counter() - t0


def measure(cmds: dict[str, list[str]], rounds: int, bytecode: Path | None) -> dict[str, list[float]]:
    """`bytecode`: a folder for every module's bytecode (PYTHONPYCACHEPREFIX), filled by the warm-up;
    None: PYTHONDONTWRITEBYTECODE=1 and no prefix — the stdlib's shipped .pyc are read, the doctor's
    sources (no __pycache__ beside them: checked by main) compiled on every start."""
    env = dict(os.environ)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if bytecode is not None:
        env["PYTHONPYCACHEPREFIX"] = str(bytecode)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    for cmd in cmds.values():  # warm-up: the bytecode written, the deep probes and the dist list cached
        timed(cmd, env)
    names = list(cmds)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            out[n].append(timed(cmds[n], env))
    return out


def table(results: dict[str, dict[str, list[float]]]) -> list[str]:
    lines = ["| command | bytecode: median (s) | × bare | no bytecode: median (s) | × bare | bar |",
             "|---|---|---|---|---|---|"]
    med = {mode: {n: statistics.median(v) for n, v in res.items()} for mode, res in results.items()}
    for n in med["bytecode"]:
        cells = []
        for mode in ("bytecode", "no bytecode"):
            m, bare = med[mode][n], med[mode]["bare python"]
            cells += [f"{m:.3f}", "1.0" if n == "bare python" else f"{m / bare:.1f}×"]
        bar = f"≤ {BARS[n]:g}×" if n in BARS else ("- (the whole command; the bar, ≤ 0.5 s, is the triage "
                                                   "itself: benchmarks/triage_corpus.py)" if "10 MB" in n else "-")
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {bar} |")
    return lines


def write_section(out: Path, body: list[str]) -> None:
    text = out.read_text(encoding="utf-8")
    block = "\n".join([SECTION, "", *body]) + "\n"
    if SECTION in text:
        start = text.index(SECTION)
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + block + (text[end:] if end != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n\n" + block
    out.write_text(text, encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--python", default=None, help="the warm check's target (default: the tests' working env)")
    ap.add_argument("--out", default=None, help="write the section into this markdown file (docs/benchmarks.md)")
    args = ap.parse_args()
    target = args.python or default_target()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "run-10MB.log"
        chunk = RUN_LOG.read_text(encoding="utf-8")
        big.write_text(chunk * (10 * 1024 * 1024 // len(chunk)), encoding="utf-8")
        cmds = commands(target, big)
        stale = sorted(str(p.relative_to(REPO)) for p in (REPO / "doctor").rglob("__pycache__"))
        if stale:  # they would be read in the "no bytecode" mode
            print(f"remove the doctor's __pycache__ folders first ({', '.join(stale[:3])} …)", file=sys.stderr)
            return 2
        results = {"bytecode": measure(cmds, args.rounds, Path(tmp) / "pyc"), "no bytecode": measure(cmds, args.rounds, None)}
    load = os.getloadavg()[0]
    body = [f"Measured {datetime.date.today()} by `python benchmarks/startup.py --rounds {args.rounds}` on "
            f"{os.cpu_count()} cores, Python {platform.python_version()} (load average {load:.1f} at the end). "
            f"Warm check target: {'the tests’ `working` env' if 'working' in target else target}. Paired rounds, "
            "rotating order, medians; each command ran once before the rounds (bytecode written, deep probes and the "
            "distribution list cached).", "", *table(results), "", *READING]
    print("\n".join(body))
    if args.out:
        write_section(Path(args.out), body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
