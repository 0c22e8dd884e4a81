"""Paired, repeated timings on one full-stack venv (the tests' `working` env, the default lock):

  warm `doctor check` (deep probes cached) · cold deep `doctor check --no-cache` · `doctor check --fast`
  · `python -m torch.utils.collect_env` in the same env · `doctor lock` (warm uv cache)

Each round runs every command once, in a rotating order (pairs see the same machine load).
Prints medians and ratios and writes docs/benchmarks.md.
Usage: python benchmarks/run.py [--rounds 5] [--python PATH] [--out docs/benchmarks.md]"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIG_LOG = REPO / "tests" / "data" / "logs" / "qwen2.5-0.5b-gsm8k-ppo-prompt512-resp256.log"


def parse_seconds(rounds: int) -> list[float]:
    """The log parser alone, in process (the command above adds interpreter start-up)."""
    from doctor.logparse import parse_file

    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        parse_file(BIG_LOG)
        out.append(time.perf_counter() - t0)
    return out
sys.path.insert(0, str(REPO / "tests"))


READING = "## Reading the numbers"


def busy_jiffies() -> int:
    """CPU time the whole machine spent busy, in clock ticks (/proc/stat's first line)."""
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def probe_alone(probe, target: str) -> tuple[float, float]:
    """(wall s, CPU s of the machine) for one probe run alone: on an idle machine the CPU delta is the
    probe's, its children's and the daemons' it starts (Ray's) — which rusage would miss."""
    from doctor.probes import run_target_probe

    j0 = busy_jiffies()
    result = run_target_probe(probe, target)
    return result.seconds, (busy_jiffies() - j0) / os.sysconf("SC_CLK_TCK")


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, proc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", help="full-stack target (default: the tests' working env)")
    ap.add_argument("--out", default=str(REPO / "docs" / "benchmarks.md"))
    args = ap.parse_args()
    if args.python:
        target = args.python
    else:
        import envs

        target = str(envs.build("working"))
    cache = tempfile.mkdtemp(prefix="vd-bench-cache-")
    env = dict(os.environ, VERL_DOCTOR_CACHE_DIR=cache)
    doctor = [sys.executable, "-m", "doctor"]
    lockdir = tempfile.mkdtemp(prefix="vd-bench-lock-")
    cmds = {
        "warm check": doctor + ["check", "--json", "--python", target],
        "cold deep check": doctor + ["check", "--json", "--no-cache", "--python", target],
        "fast check": doctor + ["check", "--json", "--fast", "--python", target],
        "collect_env": [target, "-m", "torch.utils.collect_env"],
        "doctor lock": doctor + ["lock", "--python", "3.11", "--out", lockdir],
        "recipes report (573 kB log)": [sys.executable, "-m", "doctor.recipes.cli", "report", str(BIG_LOG),
                                        "--out", tempfile.mkdtemp(prefix="vd-bench-report-"), "--json"],
    }
    subprocess.run(cmds["warm check"], capture_output=True, env=env)  # fill the cache once
    subprocess.run(cmds["doctor lock"], capture_output=True, env=env)  # warm uv's cache
    times: dict[str, list[float]] = {k: [] for k in cmds}
    probe_times: list[dict] = []
    names = list(cmds)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            secs, proc = timed(cmds[name], env)
            if proc.returncode not in (0, 1):
                print(f"{name} failed ({proc.returncode}): {proc.stderr[-500:]}", file=sys.stderr)
                return 2
            times[name].append(secs)
            if name == "cold deep check":
                probe_times.append(json.loads(proc.stdout)["timings"]["probes"])
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{n} {times[n][-1]:.2f}s" for n in names), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    parse = parse_seconds(max(args.rounds, 10))
    # Each deep probe alone, on an otherwise idle machine (3 runs each): the "slowest single probe"
    # the cold check is compared with. In the check they run in parallel and share the cores.
    from doctor.probes import TARGET_PROBES

    alone, alone_cpu = {}, {}
    for n, p in TARGET_PROBES.items():
        if p.deep:
            runs = [probe_alone(p, target) for _ in range(3)]
            alone[n] = statistics.median(r[0] for r in runs)
            alone_cpu[n] = statistics.median(r[1] for r in runs)
    slowest_alone = max(alone, key=alone.get)
    # The floor for the parallel check: no schedule beats the slowest probe, nor the CPU all the
    # deep probes need (children included: the registry child, Ray's daemons) spread over the cores.
    cores = os.cpu_count() or 1
    floor = max(alone[slowest_alone], sum(alone_cpu.values()) / cores)
    slowest = {}
    for pt in probe_times:
        name, secs = max(((n, s) for n, s in pt.items()), key=lambda x: x[1])
        slowest.setdefault(name, []).append(secs)
    slow_name = max(slowest, key=lambda n: len(slowest[n]))
    slow_med = statistics.median(v for vs in slowest.values() for v in vs)
    rows = [
        ("warm `doctor check` vs collect_env", f"{med['collect_env'] / med['warm check']:.1f}× faster", "≥ 8×"),
        ("warm `doctor check`", f"{med['warm check']:.2f} s", "≤ 0.5 s"),
        ("cold deep check / its slowest probe in the same run", f"{med['cold deep check'] / slow_med:.2f}× ({slow_name} {slow_med:.1f} s)", "≤ 1.2×"),  # noqa: E501
        ("cold deep check / the slowest probe run alone", f"{med['cold deep check'] / alone[slowest_alone]:.2f}× ({slowest_alone} {alone[slowest_alone]:.1f} s)", "≤ 1.2×"),  # noqa: E501
        ("cold deep check / its floor on this machine (max of the slowest probe alone and the deep probes' "
         f"CPU seconds / {cores} cores)", f"{med['cold deep check'] / floor:.2f}× (floor {floor:.1f} s)", "-"),
        ("`doctor lock` (one stack, one Python, warm uv cache)", f"{med['doctor lock']:.2f} s", "≤ 10 s"),
        ("log parser on the 573 kB log (in process)", f"{statistics.median(parse) * 1000:.0f} ms", "≤ 200 ms"),
        ("`recipes report` on it (whole command, incl. start-up and report.html)",
         f"{med['recipes report (573 kB log)']:.2f} s", "-"),
    ]
    lines = [
        "# Benchmarks", "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/run.py --rounds {args.rounds}` on this project's",
        f"CI machine kind: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, Python {platform.python_version()},",
        f"{platform.platform()}. Target: the tests' `working` env (default lock, verl 0.4.1 + vllm 0.6.3.post1).",
        "Paired rounds (every command once per round, rotating order); medians over the rounds.", "",
        "| command | median (s) | all runs (s) |", "|---|---|---|",
    ]
    for k, v in times.items():
        lines.append(f"| {k} | {med[k]:.2f} | {', '.join(f'{x:.2f}' for x in v)} |")
    lines += ["", "| target | measured | goal |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    lines += ["", "Per-probe medians: inside the cold deep check (in parallel), and each alone on the idle machine",
              "(wall seconds, and CPU seconds of the whole machine while it ran: its children and Ray's daemons count):", "",
              "| probe | in the check (s) | alone (s) | alone, CPU (s) |", "|---|---|---|---|"]
    for n in probe_times[0]:
        solo = f"{alone[n]:.2f} | {alone_cpu[n]:.2f}" if n in alone else "- | -"
        lines.append(f"| {n} | {statistics.median(pt[n] for pt in probe_times):.2f} | {solo} |")
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    old = out.read_text() if out.exists() else ""
    if READING in old:  # the hand-written reading of the numbers is kept (update it by hand)
        text += "\n" + READING + old.split(READING, 1)[1]
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
