"""The reference run on CPU: verl's own trainer path up to its first GPU call (scripts/dryrun.py
runs it in the target), for `recipes run NAME --dry-run`, the run's preflight and `doctor check
--recipe`. The steps' facts go to rules/dryrun.py; this module runs the script, shows its progress
and writes the stand-in model's folder (removed afterwards)."""

from __future__ import annotations

import json
import sys
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from rich.console import Console

from doctor import knowledge
from doctor.paths import cache_dir
from doctor.recipes.catalog import command_ref
from doctor.probes import ProbeResult, TargetProbe, run_target_probe
from doctor.rules.dryrun import epochs_decide, evaluate_dry_run

SCRIPTS = Path(__file__).parent / "scripts"


def steps_known() -> list[dict]:
    return knowledge.load("dryrun")["steps"]


def _events(path: Path) -> list[dict]:
    out = []
    try:
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    except OSError:
        pass
    return out


def run_dry_run(python: str, res: dict, progress: Callable[[str, float], None] | None = None,
                scale: float = 1.0) -> dict:
    """The dry run's facts: {"ok", "steps": [...], "next_on_gpu", "stand_in", ...} or {"ok": False,
    "error"} when the script itself could not run. `res` is catalog.resolve()'s output; a model that
    is not on this machine is replaced by a tiny stand-in the target writes (labelled in the facts)."""
    k = knowledge.load("dryrun")
    work = Path(tempfile.mkdtemp(prefix="verl-doctor-dryrun-"))
    events = work / "events.jsonl"
    overrides = list(res["overrides"])
    stand_in = None
    if not res["model_local"]:
        stand_in = str(work / "stand-in-model")
        overrides = [o.replace(res["model_path"], stand_in) if o.split("=", 1)[1:] == [res["model_path"]] else o
                     for o in overrides]
    arg = json.dumps({"overrides": overrides, "events": str(events), "stand_in": stand_in,
                      "train_file": res["files"]["train"], "stand_in_cache": str(cache_dir() / "stand-in"),
                      "temp_prefix": knowledge.load("ray")["smoke"]["temp_prefix"],
                      "deadline_s": k["deadline_s"] * scale})
    probe = TargetProbe("dryrun", ("ray_private.py", "verl_config.py", "dryrun.py"), k["deadline_s"] * scale + 30, True,
                        args=lambda: [arg], script_dir=SCRIPTS)
    box: dict[str, ProbeResult] = {}
    worker = threading.Thread(target=lambda: box.setdefault("r", run_target_probe(probe, python)), daemon=True)
    t0 = time.monotonic()
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.25)
            if progress is not None:
                running = [e for e in _events(events) if e["state"] == "start"]
                progress(running[-1].get("title") or running[-1]["step"] if running else "starting the target",
                         time.monotonic() - t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r = box["r"]
    if not r.ok:
        return {"ok": False, "error": r.error, "steps": [], "seconds": round(r.seconds, 2)}
    data = dict(r.data or {})
    titles = {k["id"]: k["title"] for k in k["steps"]}
    order = {k["id"]: n for n, k in enumerate(k["steps"])}
    for st in data.get("steps") or []:
        st["title"] = titles.get(st["name"], st["title"])
    # The order verl's trainer reaches them in the knowledge's list (0.3 builds its dataset inside
    # _create_dataloader: reported where 0.4 builds it, before).
    data["steps"] = sorted(data.get("steps") or [], key=lambda st: order.get(st["name"], len(order)))
    data["ok"] = bool(data.get("reached_gpu"))
    data["seconds"] = round(r.seconds, 2)
    data["stand_in_for"] = res["model_path"] if stand_in else None
    return data


def step_summary(step: dict) -> str:
    """One line of what a step found, from its detail."""
    d = step.get("detail") or {}
    name = step["name"]
    if name == "stand-in" and d:
        how = "the doctor's cache" if d.get("cached") else "removed afterwards"
        return f"vocab {d.get('vocab')}, trained on {d.get('texts')} prompts of the recipe's data ({how})"
    if name == "config" and d:
        return f"{d.get('overrides')} override(s) on {d.get('config_dir')}/ppo_trainer.yaml"
    if name == "model" and d:
        return f"{d.get('class')}, {d.get('vocab')} tokens, eos {d.get('eos')!r}, pad {d.get('pad')!r}"
    if name == "ray" and d:
        env = ", ".join(sorted(k for k in (d.get("runtime_env") or {}) if not k.startswith("__")))
        return f"num_cpus={d.get('num_cpus') or 'all'}; runtime_env env_vars: {env or 'none'}"
    if name == "reward-manager" and d:
        return str(d.get("class"))
    if name == "dataset" and d:
        return ", ".join(f"{Path(k).name}: {v} rows" for k, v in d.items())
    if name == "dataloader" and d:
        line = (f"{d.get('train_rows')} rows ÷ {d.get('batch_size')} = {d.get('batches_per_epoch')} batches per epoch "
                f"({d.get('rows_dropped_per_epoch')} rows dropped)")
        if epochs_decide(d):
            return line + f", × {d.get('epochs')} epochs = {d.get('total_training_steps')} steps"
        return line + f"; trainer.total_training_steps={d.get('total_training_steps')} ends the run first"
    if name == "batch" and d:
        shapes = d.get("shapes") or {}
        return ", ".join(f"{k} {v}" for k, v in shapes.items() if len(v) > 1) or f"{len(d.get('keys') or [])} keys"
    if name == "reward" and d:
        if d.get("skipped"):
            return str(d["skipped"])
        return (f"{d.get('data_source')}: {str(d.get('function')).rsplit('.', 1)[-1]} scores the right answer "
                f"{d.get('right_answer')}, a wrong one {d.get('wrong_answer')}")
    return ""


def next_on_gpu(dry: dict) -> str | None:
    nxt = dry.get("next_on_gpu")
    if not nxt:
        return None
    return knowledge.load("dryrun")["next_on_gpu"].format(call=nxt.get("call") or "RayPPOTrainer.init_workers()",
                                                          gpus=nxt.get("resource_pool"), rollout=nxt.get("rollout"),
                                                          tp=nxt.get("tp"))


def dry_run_fact(recipe: dict, res: dict, python: str, show: bool = True) -> dict:
    """The `dryrun` fact: the trainer's path on CPU with live progress on stderr (`show`): a rich
    status line on a terminal, otherwise one line per step as it starts."""
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
        status = Console(stderr=True).status("dry run: starting the target")
        status.start()
    try:
        dry = run_dry_run(python, res, progress=progress)
        dry["recipe"] = command_ref(recipe)
    finally:
        if status is not None:
            status.stop()
    return dry


def dry_run(recipe: dict, res: dict, python: str, show: bool = True) -> tuple[dict, list, list]:
    """`recipes run --dry-run`: the trainer's path on CPU with live progress on stderr, judged by the
    dry run's rules (rules/dryrun.py): (facts, findings, checks)."""
    dry = dry_run_fact(recipe, res, python, show)
    findings, checks = evaluate_dry_run(dry, command_ref(recipe), python)
    return dry, findings, checks
