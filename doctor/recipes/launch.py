"""The trainer's run: `python -m verl.trainer.main_ppo <overrides>` in the target, with the recipe's
env (a short RAY_TMPDIR), in its own process group; the console is teed to DIR/console.log and its
`step:N - key:value - …` lines are parsed live (progress: step/total, ETA, last reward, throughput).
Ctrl-C (SIGINT), SIGTERM or SIGHUP kills that process group only — never `ray stop`, which would take
every Ray job of the machine with it.

VERL_DOCTOR_TRAINER_CMD replaces `python -m verl.trainer.main_ppo` (shell words; `{python}` is the
target interpreter): the overrides are appended. Tests inject tests/doubles/replay_trainer.py with it."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from doctor.logparse import parse_step
from doctor.processes import stop_group

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_TOTAL = re.compile(r"Total training steps:\s*(\d+)")
REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean")
THROUGHPUT_KEYS = ("perf/throughput",)


class _Progress:
    """A rich progress bar on a terminal; one plain line per step otherwise (logs, tests)."""

    def __init__(self, total: int | None, enabled: bool):
        self.total, self.enabled = total, enabled
        self.t0: tuple[float, int] | None = None
        self.bar: Any = None
        if enabled and sys.stderr.isatty():
            self.console = Console(stderr=True)
            self.bar = Progress(TextColumn("[bold]step"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                TextColumn("{task.fields[info]}"), console=self.console, transient=False)
            self.task = self.bar.add_task("run", total=total, info="")
            self.bar.start()

    def echo(self, line: str) -> None:
        if self.bar:
            self.bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        elif self.enabled:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def set_total(self, total: int) -> None:
        self.total = total
        if self.bar:
            self.bar.update(self.task, total=total)

    def step(self, step: int, done: int, metrics: dict) -> None:
        now = time.monotonic()
        if self.t0 is None:
            self.t0 = (now, done)
        reward = next((metrics[k] for k in REWARD_KEYS if k in metrics), None)
        thr = next((metrics[k] for k in THROUGHPUT_KEYS if k in metrics), None)
        info = (f"reward {reward:.3f}" if reward is not None else "reward -") + \
               (f" · {thr:.0f} tok/s/GPU" if thr is not None else "")
        if self.bar:
            self.bar.update(self.task, completed=done, info=info)
        elif self.enabled:
            eta = ""
            t_first, d_first = self.t0 or (now, done)
            if self.total and done > d_first:
                rate = (now - t_first) / (done - d_first)
                eta = f" · ETA {max(self.total - done, 0) * rate:.0f} s"
            total = f"/{self.total}" if self.total else ""
            sys.stderr.write(f"[recipes] step {step} ({done}{total}){eta} · {info}\n")
            sys.stderr.flush()

    def stop(self) -> None:
        if self.bar:
            self.bar.stop()


def trainer_command(python: str) -> tuple[list[str], bool]:
    inj = os.environ.get("VERL_DOCTOR_TRAINER_CMD")
    if inj:
        return [w.replace("{python}", python) for w in shlex.split(inj)], True
    return [python, "-m", "verl.trainer.main_ppo"], False


def launch(cmd: list[str], env: dict, out: Path, total: int | None, show: bool) -> dict:
    """Run the trainer; tee its console to out/console.log; parse steps live. Returns the outcome."""
    log_path = out / "console.log"
    full_env = dict(os.environ)
    full_env.update(env)
    if full_env.get("RAY_TMPDIR"):
        Path(full_env["RAY_TMPDIR"]).mkdir(parents=True, exist_ok=True)
    steps: dict[int, dict] = {}
    interrupted: dict[str, str | None] = {"signal": None}
    progress = _Progress(total, show)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=full_env, start_new_session=True, bufsize=1, text=True, errors="replace")
    except OSError as exc:
        progress.stop()
        return {"exit_code": None, "error": f"cannot start {cmd[0]}: {exc.strerror or exc}", "steps": steps,
                "interrupted": None, "elapsed_s": 0.0}

    def on_signal(signum, frame):
        if interrupted["signal"] is None:
            interrupted["signal"] = signal.Signals(signum).name
            threading.Thread(target=stop_group, args=(proc, signal.SIGTERM, 10.0), daemon=True).start()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            assert proc.stdout is not None  # started with stdout=PIPE
            for line in proc.stdout:
                log.write(line)
                log.flush()
                line = line.rstrip("\n")
                progress.echo(line)
                if total is None:
                    m = _TOTAL.search(_ANSI.sub("", line))
                    if m:
                        total = int(m.group(1))
                        progress.set_total(total)
                parsed = parse_step(line)
                if parsed:
                    step, metrics = parsed
                    steps.setdefault(step, {}).update(metrics)
                    progress.step(step, len(steps), steps[step])
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        progress.stop()
        if proc.poll() is None:
            stop_group(proc, signal.SIGTERM, 10.0)
    return {"exit_code": rc, "error": None, "steps": steps, "interrupted": interrupted["signal"],
            "elapsed_s": round(time.monotonic() - t0, 2), "total": total}
