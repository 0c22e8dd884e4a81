"""`recipes run NAME [--quick] [--out DIR] [--preflight-only]`: preflight, then the run loop.

Preflight (each failure is one line with its fix): `doctor check` of the target has no errors;
the recipe's config lints clean on the installed verl; NVML shows the recipe's GPU count and memory;
the model directory exists, is the expected architecture, has all its weight files and its tokenizer
loads in the target; the data files have verl's columns (pyarrow, in the target).

Run loop: `python -m verl.trainer.main_ppo <overrides>` in the target, with the recipe's env (a short
RAY_TMPDIR), in its own process group; the console is teed to DIR/console.log and its
`step:N - key:value - …` lines are parsed live (progress: step/total, ETA, last reward, throughput).
Ctrl-C (SIGINT) or SIGTERM kills that process group only — never `ray stop`, which would take every
Ray job of the machine with it. At the end the recipe's bands are evaluated → DIR/summary.json.
Exit: 0 every gating band met, 1 a band missed, 3 the run (or its preflight) failed, 130 interrupted.

VERL_DOCTOR_TRAINER_CMD replaces `python -m verl.trainer.main_ppo` (shell words; `{python}` is the
target interpreter): the overrides are appended. Tests inject tests/doubles/replay_trainer.py with it.
--skip-preflight starts the trainer without a preflight (the tests use it with that double on a
machine without GPUs); --preflight-fast runs the preflight's doctor check without the deep probes."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from doctor.errors import UsageError
from doctor.findings import is_host_fact
from doctor.recipes import catalog
from doctor.recipes.logparse import parse_step
from doctor.results import ExitCode
from doctor.uv import runnable

SCRIPTS = Path(__file__).parent / "scripts"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_TOTAL = re.compile(r"Total training steps:\s*(\d+)")
REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean")
THROUGHPUT_KEYS = ("perf/throughput",)
GIB = 1024 ** 3


# -- preflight ---------------------------------------------------------------------------------


@dataclass
class PreflightCheck:
    name: str
    ok: bool
    line: str
    fix: str | None = None


def _gpu_check(gpu: dict, hw: dict, recipe_name: str, config: dict | None = None,
               environ: dict | None = None) -> PreflightCheck:
    """Enough GPUs for the run, as the job will see them (rules/gpu.py recipe_gpus)."""
    from doctor.rules.gpu import recipe_gpus

    findings, seen = recipe_gpus(gpu, dict(os.environ if environ is None else environ), hw, recipe_name, config)
    if findings:
        return PreflightCheck("GPUs", False, findings[0].title, findings[0].fix.summary)
    return PreflightCheck("GPUs", True, seen)


def safetensors_problem(path: Path) -> str | None:
    """Why a .safetensors file is not whole, or None. The format is an 8-byte little-endian header
    length, a JSON header whose tensors' data_offsets end where the file must end: an interrupted
    download is shorter than that (read from the header alone, no tensor is loaded)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                return f"{path.name}: {size} bytes, shorter than a safetensors header"
            n = int.from_bytes(head, "little")
            if n > min(size - 8, 100 << 20):
                return f"{path.name}: header length {n} does not fit in {size} bytes"
            header = json.loads(fh.read(n))
    except (OSError, ValueError) as exc:
        return f"{path.name}: unreadable safetensors header ({exc.__class__.__name__})"
    ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__" and isinstance(t, dict)]
    want = 8 + n + max(ends, default=0)
    if size < want:
        return f"{path.name}: {size} bytes, its header needs {want} (truncated download?)"
    return None


def _weights_complete(d: Path) -> tuple[bool, str]:
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        idx = d / index_name
        if idx.is_file():
            try:
                files = sorted(set(json.loads(idx.read_text())["weight_map"].values()))
            except (OSError, ValueError, KeyError) as exc:
                return False, f"{index_name} is unreadable ({exc})"
            missing = [f for f in files if not (d / f).is_file() or (d / f).stat().st_size == 0]
            if missing:
                return False, f"{index_name} lists {len(files)} shard(s); missing or empty: {', '.join(missing[:4])}"
            broken = [why for f in files if f.endswith(".safetensors") and (why := safetensors_problem(d / f))]
            if broken:
                return False, "; ".join(broken[:3])
            return True, f"{len(files)} shard(s) from {index_name}"
    for single in ("model.safetensors", "pytorch_model.bin"):
        if (d / single).is_file() and (d / single).stat().st_size > 0:
            why = safetensors_problem(d / single) if single.endswith(".safetensors") else None
            return (False, why) if why else (True, single)
    return False, "no model.safetensors, pytorch_model.bin or shard index"


def _model_checks(recipe: dict, res: dict) -> list[PreflightCheck]:
    m = recipe["model"]
    path = res["model_path"]
    dl = (f"huggingface-cli download {m['id']} --local-dir {m.get('path') or '~/models/' + m['id'].split('/')[-1]}"
          if m.get("id") else "put the model there")
    if not res["model_local"]:
        return [PreflightCheck("model", False, f"model {m.get('id') or m.get('path')} is not on this machine "
                      f"(looked in {m.get('path')}, the Hugging Face cache, $VERL_DOCTOR_MODEL_PATH)", dl)]
    d = Path(path)
    out = []
    try:
        arch = json.loads((d / "config.json").read_text()).get("architectures") or []
    except (OSError, ValueError) as exc:
        return [PreflightCheck("model", False, f"{d}/config.json is unreadable ({exc})", dl)]
    want = m.get("architecture")
    if want and want not in arch:
        out.append(PreflightCheck("model", False, f"{d} is {', '.join(arch) or 'no architecture'}, the recipe expects {want}",
                         f"point the recipe (or VERL_DOCTOR_MODEL_PATH) at a {want} checkpoint"))
    else:
        out.append(PreflightCheck("model", True, f"{d} ({', '.join(arch)})"))
    ok, detail = _weights_complete(d)
    out.append(PreflightCheck("weights", ok, f"{d}: {detail}", None if ok else f"re-download: {dl}"))
    return out


def _target_preflight(python: str, model_path: str | None, files: dict) -> dict:
    from doctor import knowledge
    from doctor.probes import TargetProbe, run_target_probe

    columns = knowledge.load("config_rules")["dataset_columns"]
    arg = json.dumps({"model_path": model_path, "files": files, "columns": columns})
    probe = TargetProbe("preflight", ("preflight.py",), 120, False, args=lambda: [arg], script_dir=SCRIPTS)
    r = run_target_probe(probe, python)
    return (r.data or {}) if r.ok else {"error": r.error}


def dry_run(recipe: dict, res: dict, python: str, show: bool = True) -> tuple[dict, list, list]:
    """The trainer's path on CPU (recipes/dryrun.py) with live progress on stderr: (facts, findings,
    checks). A rich status line on a terminal; otherwise one line per step as it starts."""
    from doctor.recipes.dryrun import run_dry_run
    from doctor.rules.dryrun import evaluate_dry_run

    status = None
    seen: list[str] = []

    def progress(title: str, seconds: float) -> None:
        if status is not None:
            status.update(f"dry run: {title} ({seconds:.0f} s)")
        elif show and (not seen or seen[-1] != title):
            seen.append(title)
            sys.stderr.write(f"[dry run] {seconds:5.1f} s  {title}\n")
            sys.stderr.flush()

    if show and sys.stderr.isatty():
        from rich.console import Console

        status = Console(stderr=True).status("dry run: starting the target")
        status.start()
    try:
        dry = run_dry_run(python, res, progress=progress)
        dry["recipe"] = catalog.command_ref(recipe)
    finally:
        if status is not None:
            status.stop()
    findings, checks = evaluate_dry_run(dry, catalog.command_ref(recipe), python)
    return dry, findings, checks


def _dry_run_check(dry: dict, findings: list, recipe: dict, python: str) -> PreflightCheck:
    from doctor.recipes.dryrun import next_on_gpu

    if dry.get("ok"):
        return PreflightCheck("trainer on CPU", True, f"verl's trainer path passes up to its first GPU call "
                              f"({dry.get('seconds')} s); next: {next_on_gpu(dry)}")
    if not dry.get("steps"):
        return PreflightCheck("trainer on CPU", False, f"the dry run could not run: {dry.get('error')}",
                              runnable(f"recipes run {catalog.command_ref(recipe)} --dry-run --python {python}"))
    errors = [f for f in findings if f.severity == "error"]
    head = errors[0] if errors else None
    return PreflightCheck("trainer on CPU", False, head.title if head else "a step failed",
                          (head.fix.commands[0] if head and head.fix.commands else None) or
                          runnable(f"recipes run {catalog.command_ref(recipe)} --dry-run --python {python}"))


def preflight(recipe: dict, res: dict, python: str, say=None, fast: bool = False) -> list[PreflightCheck]:
    from doctor.engine import run_check
    from doctor.recipes.lint import lint_recipe

    say = say or (lambda msg: None)
    checks: list[PreflightCheck] = []
    say("doctor check of the target …")
    # fast (--preflight-fast): the check without its deep probes (imports, registry, Ray smoke; ~20 s
    # cold, cached afterwards) — the GPU, model and data checks below do not need them.
    result = run_check(python, fast=fast)
    # Host facts (findings.yaml scope: host) are not the environment's: `doctor fix` cannot change
    # them. gpu.none is the "GPUs" line below (with the recipe's numbers); the others get a "host"
    # line of their own. Environment errors about GPUs (kernels, the env's CUDA vs the driver) are
    # the environment's and stay on the "doctor check" line.
    host_errors = [f for f in result.findings if f.severity == "error" and is_host_fact(f) and f.id != "gpu.none"]
    errors = [f for f in result.findings if f.severity == "error" and not is_host_fact(f) and not f.caused_by]
    if errors:
        then = runnable(f"doctor fix --python {python}") if any(f.fix.automatic for f in errors) else \
            runnable(f"doctor explain {errors[0].id}")
        checks.append(PreflightCheck("doctor check", False, f"{len(errors)} error(s): " +
                            "; ".join(f"{f.id} ({f.title})" for f in errors[:4]),
                            f"{runnable(f'doctor check --python {python}')}   # then: {then}"))
    else:
        checks.append(PreflightCheck("doctor check", True, f"no errors in the environment ({len(result.findings)} finding(s))"))
    if host_errors:
        checks.append(PreflightCheck("host", False, f"{len(host_errors)} error(s) of this machine: " +
                                     "; ".join(f"{f.id} ({f.title})" for f in host_errors[:4]),
                                     runnable(f"doctor explain {host_errors[0].id}")))
    say("config lint …")
    lint = None
    try:
        lint = lint_recipe(python, recipe["_path"])
        bad = [f for f in lint.findings if f.severity == "error"]
        checks.append(PreflightCheck("config", not bad, f"verl {lint.compose.get('verl')}: " +
                            ("; ".join(f"{f.id}: {f.title}" for f in bad) if bad else
                             f"composes; {len(lint.findings)} warning(s)"),
                            runnable(f"recipes lint {catalog.command_ref(recipe)} --python {python}") if bad else None))
    except UsageError as exc:
        checks.append(PreflightCheck("config", False, str(exc), runnable(f"doctor check --python {python}")))
    config = lint.ctx.config if lint is not None and lint.ctx is not None else None
    checks.insert(1, _gpu_check(result.facts.get("gpu") or {}, recipe["hardware"], recipe["name"], config))
    checks.extend(_model_checks(recipe, res))
    if not fast:  # the trainer's own path on CPU (~50 s on 2 cores): deep, like the check's probes
        say("the trainer's path on CPU (dry run) …")
        dry, dry_findings, _ = dry_run(recipe, res, python, show=False)
        checks.append(_dry_run_check(dry, dry_findings, recipe, python))
    say("tokenizer and data in the target …")
    tp = _target_preflight(python, res["model_path"] if res["model_local"] else None, res["files"])
    if "error" in tp:
        checks.append(PreflightCheck("target", False, f"the preflight script failed in the target: {tp['error']}",
                            runnable(f"doctor check --python {python}")))
        return checks
    if tp.get("tokenizer") is not None:
        t = tp["tokenizer"]
        checks.append(PreflightCheck("tokenizer", t["ok"], f"{t.get('class')} ({t.get('vocab')} tokens)" if t["ok"] else
                            f"does not load from {res['model_path']}: {t.get('error')}",
                            None if t["ok"] else "re-download the model (tokenizer files missing?) or fix transformers"))
    for name, d in tp.get("data", {}).items():
        path = res["files"][name]
        if d.get("ok"):
            checks.append(PreflightCheck(f"data:{name}", True, f"{path}: {d['rows']} rows, verl's columns"))
        elif d.get("missing"):
            checks.append(PreflightCheck(f"data:{name}", False, f"{path}: missing verl column(s) {', '.join(d['missing'])} "
                                f"(has {', '.join(d['columns'])})",
                                "preprocess it like verl's examples/data_preprocess/gsm8k.py (or recipes data gsm8k --out DIR)"))
        else:
            checks.append(PreflightCheck(f"data:{name}", False, f"{path}: {d.get('error')}",
                                "recipes data gsm8k --out DIR   # a known-good copy"))
    return checks


# -- console parsing ---------------------------------------------------------------------------


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


class _Progress:
    """A rich progress bar on a terminal; one plain line per step otherwise (logs, tests)."""

    def __init__(self, total: int | None, enabled: bool):
        self.total, self.enabled = total, enabled
        self.t0: tuple[float, int] | None = None
        self.bar: Any = None
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

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


# -- the run -----------------------------------------------------------------------------------


def trainer_command(python: str) -> tuple[list[str], bool]:
    inj = os.environ.get("VERL_DOCTOR_TRAINER_CMD")
    if inj:
        return [w.replace("{python}", python) for w in shlex.split(inj)], True
    return [python, "-m", "verl.trainer.main_ppo"], False


def _kill_group(pgid: int, proc: subprocess.Popen, grace: float = 10.0) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)  # stragglers of the group (Ray workers the trainer started)
    except (ProcessLookupError, PermissionError):
        pass


def launch(cmd: list[str], env: dict, out: Path, total: int | None, show: bool) -> dict:
    """Run the trainer; tee its console to out/console.log; parse steps live. Returns the outcome."""
    log_path = out / "console.log"
    full_env = dict(os.environ)
    full_env.update(env)
    if full_env.get("RAY_TMPDIR"):
        Path(full_env["RAY_TMPDIR"]).mkdir(parents=True, exist_ok=True)
    steps: dict[int, dict] = {}
    interrupted = {"signal": None}
    progress = _Progress(total, show)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=full_env, start_new_session=True, bufsize=1, text=True, errors="replace")
    except OSError as exc:
        progress.stop()
        return {"exit_code": None, "error": f"cannot start {cmd[0]}: {exc.strerror or exc}", "steps": steps,
                "interrupted": None, "elapsed_s": 0.0}
    pgid = proc.pid

    def on_signal(signum, frame):
        if interrupted["signal"] is None:
            interrupted["signal"] = signal.Signals(signum).name
            threading.Thread(target=_kill_group, args=(pgid, proc), daemon=True).start()

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
            _kill_group(pgid, proc)
    return {"exit_code": rc, "error": None, "steps": steps, "interrupted": interrupted["signal"],
            "elapsed_s": round(time.monotonic() - t0, 2), "total": total}


def _report_summary(log_path: Path, out: Path) -> dict | None:
    """The console-log report (recipes report's metrics, summary and HTML) of the run."""
    from doctor.recipes import logparse, report

    try:
        log = logparse.parse_file(log_path)
        summary = report.summarize(log)
        report.write_outputs(log, summary, out)
        return summary
    except Exception as exc:  # noqa: BLE001 - the report is an extra; the verdict does not depend on it
        return {"error": f"{type(exc).__name__}: {exc}"}


def _triage(log_path: Path) -> None:
    """The failed run's cause, on stderr (stdout stays the verdict, or the JSON)."""
    from rich.console import Console

    from doctor.report.text import render_triage
    from doctor.triage import read_log, triage_text

    print("\n── doctor triage of console.log ──", file=sys.stderr)
    render_triage(triage_text(read_log(str(log_path)), str(log_path)),
                  Console(stderr=True, highlight=False, soft_wrap=True))


def _print_preflight(checks: list[PreflightCheck], stream) -> None:
    for c in checks:
        mark = "✓" if c.ok else "✗"
        stream.write(f"  {mark} {c.name}: {c.line}\n")
        if not c.ok and c.fix:
            stream.write(f"      fix: {c.fix}\n")
    stream.flush()


def _dry_run_only(recipe: dict, res: dict, python: str, args) -> int:
    """`recipes run NAME --dry-run`: exit 0 the CPU path passes, 1 a step failed, 3 it could not run."""
    from doctor.recipes.dryrun import next_on_gpu, render_text

    dry, findings, checks = dry_run(recipe, res, python, show=True)  # on stderr: --json keeps stdout
    code = ExitCode.OK if dry.get("ok") else ExitCode.PROBLEMS if dry.get("steps") else ExitCode.INCOMPLETE
    if args.json:
        sys.stdout.write(json.dumps({"recipe": recipe["name"], "python": python, "status": "passed" if dry.get("ok") else
                                     "failed" if dry.get("steps") else "could-not-run", "exit_code": int(code),
                                     "next_on_gpu": next_on_gpu(dry), "dry_run": dry,
                                     "findings": [f.to_dict() for f in findings],
                                     "checks": [c.to_dict() for c in checks]}, indent=1, default=str) + "\n")
    else:
        render_text(dry, findings, recipe["name"], python)
    return code


def run_recipe(args) -> int:
    from doctor.target import resolve_python

    recipe = catalog.load(args.name)
    res = catalog.resolve(recipe, quick=args.quick)
    python = resolve_python(args.python)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or Path("runs") / f"{recipe['name']}{'-quick' if args.quick else ''}-{stamp}")
    info = sys.stderr if args.json else sys.stdout
    if args.dry_run:
        return _dry_run_only(recipe, res, python, args)
    # "out" is set once the folder exists: a preflight that stops the run creates nothing.
    summary = {"recipe": recipe["name"], "mode": "quick" if args.quick else "full", "python": python,
               "out": None, "preflight": None}

    if args.skip_preflight:
        info.write(f"recipes run {recipe['name']}: preflight skipped (--skip-preflight)\n")
    else:
        info.write(f"recipes run {recipe['name']}: preflight\n")
        info.flush()
        checks = preflight(recipe, res, python, say=lambda m: None, fast=args.preflight_fast)
        _print_preflight(checks, info)
        summary["preflight"] = [asdict(c) for c in checks]
        failed = [c for c in checks if not c.ok]
        if failed:
            info.write(f"preflight failed: {'; '.join(c.name for c in failed)}"
                       f"{' — not starting the run' if not args.preflight_only else ''}\n")
            summary.update(status="preflight-failed", exit_code=ExitCode.INCOMPLETE,
                           reason="; ".join(f"{c.name}: {c.line}" for c in failed))
            if args.json:
                sys.stdout.write(json.dumps(summary, indent=1) + "\n")
            return ExitCode.INCOMPLETE
        info.write("preflight passed\n")
    if args.preflight_only:
        if args.json:
            sys.stdout.write(json.dumps({**summary, "status": "preflight-passed", "exit_code": 0}, indent=1) + "\n")
        return ExitCode.OK

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create: {exc.strerror or exc}") from None
    summary["out"] = str(out)
    base, injected = trainer_command(python)
    cmd = base + res["overrides"]
    total = None
    for o in res["overrides"]:
        if o.startswith("trainer.total_training_steps="):
            total = int(o.split("=", 1)[1])
    (out / "command.txt").write_text(" ".join(f"{k}={shlex.quote(v)}" for k, v in res["env"].items()) + " " +
                                     shlex.join(cmd) + "\n")
    info.write(f"running{' (trainer injected by VERL_DOCTOR_TRAINER_CMD)' if injected else ''}: "
               f"{shlex.join(base)} … ({len(res['overrides'])} overrides) → {out}/console.log\n")
    info.flush()
    outcome = launch(cmd, res["env"], out, total, show=not args.json)
    steps = outcome["steps"]
    bands = evaluate_bands(res["bands"], steps)
    if outcome["interrupted"]:
        status, code = "interrupted", ExitCode.INTERRUPTED
        reason = f"{outcome['interrupted']}: the trainer's process group was killed"
    elif outcome["error"] or outcome["exit_code"] != 0:
        status, code = "run-failed", ExitCode.INCOMPLETE
        reason = outcome["error"] or f"the trainer exited with code {outcome['exit_code']}"
    elif not steps:
        status, code = "run-failed", ExitCode.INCOMPLETE
        reason = "the trainer exited 0 but logged no step:N lines"
    elif any(b["gate"] and not b["passed"] for b in bands):
        status, code = "band-missed", ExitCode.PROBLEMS
        reason = "; ".join(f"{b['metric']} {b['agg']}={b['value']} not {b['comparison']} {b['expected']}"
                           for b in bands if b["gate"] and not b["passed"])
    else:
        status, code, reason = "passed", ExitCode.OK, None
    report = _report_summary(out / "console.log", out) if steps else None
    summary.update({"status": status, "exit_code": code, "reason": reason, "command": cmd, "env": res["env"],
                    "trainer_exit_code": outcome["exit_code"], "elapsed_s": outcome["elapsed_s"],
                    "steps": len(steps), "last_step": max(steps) if steps else None,
                    "total_steps": outcome.get("total"), "bands": bands,
                    "last_metrics": steps[max(steps)] if steps else None, "report": report})
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=1, default=str) + "\n")
    else:
        print(f"\n{len(steps)} step(s) in {outcome['elapsed_s']:.1f} s")
        for b in bands:
            mark = "✓" if b["passed"] else ("✗" if b["gate"] else "!")
            val = "never logged" if b["value"] is None else f"{b['value']:g}"
            print(f"  {mark} {b['metric']} [{b['agg']}] = {val}, expected {b['comparison']} {b['expected']:g}"
                  f"{'' if b['gate'] else ' (informational)'} — {b['status']}: {b['source']}")
        verdict = {"passed": "PASS", "band-missed": "BAND MISSED", "run-failed": "RUN FAILED",
                   "interrupted": "INTERRUPTED"}[status]
        print(f"verdict: {verdict}{': ' + reason if reason else ''} (exit {code}) · {out}/summary.json")
    if status == "run-failed":
        _triage(out / "console.log")
    return code
