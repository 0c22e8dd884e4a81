"""`recipes run`'s preflight (each failure is one line with its fix): `doctor check` of the target has
no errors; the recipe's config lints clean on the installed verl; NVML shows the recipe's GPU count
and memory; the model directory exists, is the expected architecture, has all its weight files and
its tokenizer loads in the target; the data files have verl's columns (pyarrow, in the target); the
trainer's own path on CPU (the dry run) passes."""

from __future__ import annotations

import json
import shlex
import os
from dataclasses import dataclass
from pathlib import Path

from doctor import knowledge
from doctor.engine import CheckResult, run_check
from doctor.findings import Finding, is_host_fact
from doctor.probes import ProbeResult
from doctor.facts import GpuFacts
from doctor.probes import TargetProbe, run_target_probe
from doctor.recipes import catalog
from doctor.recipes.dryrun import next_on_gpu
from doctor.rules.gpu import recipe_gpus
from doctor.uv import runnable

SCRIPTS = Path(__file__).parent / "scripts"


@dataclass
class PreflightCheck:
    name: str
    ok: bool
    line: str
    fix: str | None = None
    note: bool = False   # not a failure, but nothing was checked either (drawn "!", never ✓)


def _gpu_check(gpu: GpuFacts | dict, hw: dict, recipe_name: str, config: dict | None = None,
               environ: dict | None = None) -> PreflightCheck:
    """Enough GPUs for the run, as the job will see them (rules/gpu.py recipe_gpus)."""
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


def hub_cli(python: str) -> str:
    """The target env's own `huggingface-cli` (a new shell has none on PATH: it lives in the training
    env's bin/), else the module form through the target's Python."""
    here = Path(python).parent / "huggingface-cli"
    return shlex.quote(str(here)) if here.exists() else f"{shlex.quote(python)} -m huggingface_hub.commands.huggingface_cli"


def _model_checks(recipe: dict, res: dict, python: str) -> list[PreflightCheck]:
    m = recipe["model"]
    path = res["model_path"]
    dl = (f"{hub_cli(python)} download {m['id']} --local-dir {m.get('path') or '~/models/' + m['id'].split('/')[-1]}"
          if m.get("id") else "put the model there")
    if not res["model_local"]:
        if m.get("id") and res["model_path"] == m["id"]:  # a Hub id: verl's trainer downloads it at start (recipes show)
            return [PreflightCheck("model", True, f"{m['id']} is not on this machine: the run downloads it from the "
                                   f"Hugging Face Hub at start (needs the network; to have it here first: {dl})",
                                   note=True)]
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
    columns = knowledge.load("config_rules")["dataset_columns"]
    arg = json.dumps({"model_path": model_path, "files": files, "columns": columns})
    probe = TargetProbe("preflight", ("preflight.py",), 120, False, args=lambda: [arg], script_dir=SCRIPTS)
    r = run_target_probe(probe, python)
    return (r.data or {}) if r.ok else {"error": r.error}


@dataclass
class Preflight:
    """The preflight's answer: the doctor's own check of the target with the recipe's facts (its
    composed config, GPU needs and dry run are rules' findings there), and the files the trainer
    will read (model, weights, tokenizer, data). `lines()` says what stops the run, one per part."""

    result: CheckResult
    model: list[PreflightCheck]    # the model folder and its weights (read here)
    files: list[PreflightCheck]    # tokenizer and data (read in the target)
    recipe: dict
    python: str

    def findings(self) -> list[Finding]:
        return self.result.findings

    def lines(self) -> list[PreflightCheck]:
        return [self._check_line(), *self._host_line(), self._gpu_line(), self._config_line(), *self.model,
                *([self._trainer_line()] if self.result.facts.get("dryrun") else []), *self.files]

    def _check_line(self) -> PreflightCheck:
        python = self.python
        # Host facts (findings.yaml scope: host) are not the environment's: `doctor fix` cannot change them; they
        # get the "host" line. Config and trainer findings have lines of their own: not counted twice here.
        errors = [f for f in self.result.findings if f.severity == "error" and not is_host_fact(f)
                  and f.area not in ("config", "trainer") and not f.caused_by]
        if not errors:
            return PreflightCheck("doctor check", True, f"no errors in the environment ({len(self.result.findings)} finding(s))")
        then = runnable(f"doctor fix --python {python}") if any(f.fix.automatic for f in errors) else \
            runnable(f"doctor explain {errors[0].id}")
        return PreflightCheck("doctor check", False, f"{len(errors)} error(s): " +
                              "; ".join(f"{f.id} ({f.title})" for f in errors[:4]),
                              f"{runnable(f'doctor check --python {python}')}   # then: {then}")

    def _host_line(self) -> list[PreflightCheck]:
        """Errors of this machine, not the env (gpu.none and the GPU count are the "GPUs" line)."""
        host = [f for f in self.result.findings if f.severity == "error" and is_host_fact(f)
                and f.id not in ("gpu.none", "gpu.too-few-for-recipe", "gpu.memory-short-for-rollout")]
        if not host:
            return []
        return [PreflightCheck("host", False, f"{len(host)} error(s) of this machine: " +
                               "; ".join(f"{f.id} ({f.title})" for f in host[:4]), runnable(f"doctor explain {host[0].id}"))]

    def _gpu_line(self) -> PreflightCheck:
        config = (self.result.facts.get("recipe_config") or {}).get("config")
        line = _gpu_check(self.result.facts.get("gpu") or {}, self.recipe["hardware"], self.recipe["name"], config,
                          self.result.facts.get("environment") or {})
        short = [f for f in self.result.findings if f.id == "gpu.memory-short-for-rollout"]
        if line.ok and short:  # enough GPUs, but not the memory the rollout will claim on them
            return PreflightCheck("GPUs", False, "; ".join(f.title for f in short), short[0].fix.summary)
        return line

    def _config_line(self) -> PreflightCheck:
        fact = self.result.facts.get("recipe_config")
        ref = catalog.command_ref(self.recipe)
        if fact is None:
            why = (self.result.probes.get("recipe_config") or ProbeResult("recipe_config", False)).error
            return PreflightCheck("config", False, str(why), runnable(f"doctor check --python {self.python}"))
        config = [f for f in self.result.findings if f.area == "config"]
        bad = [f for f in config if f.severity == "error"]
        return PreflightCheck("config", not bad, f"verl {fact.get('verl')}: " +
                              ("; ".join(f"{f.id}: {f.title}" for f in bad) if bad else f"composes; {len(config)} warning(s)"),
                              runnable(f"recipes lint {ref} --python {self.python}") if bad else None)

    def _trainer_line(self) -> PreflightCheck:
        dry = self.result.facts.get("dryrun") or {}
        again = runnable(f"recipes run {catalog.command_ref(self.recipe)} --dry-run --python {self.python}")
        if dry.get("ok"):
            return PreflightCheck("trainer on CPU", True, f"verl's trainer path passes up to its first GPU call "
                                  f"({dry.get('seconds')} s); next: {next_on_gpu(dry)}")
        if not dry.get("steps"):
            return PreflightCheck("trainer on CPU", False, f"the dry run could not run: {dry.get('error')}", again)
        errors = [f for f in self.result.findings if f.area == "trainer" and f.severity == "error"]
        head = errors[0] if errors else None
        return PreflightCheck("trainer on CPU", False, head.title if head else "a step failed",
                              (head.fix.commands[0] if head and head.fix.commands else None) or again)


def preflight(recipe: dict, res: dict, python: str, say=None, fast: bool = False) -> Preflight:
    say = say or (lambda msg: None)
    say("doctor check of the target: its stack, GPUs, the recipe's config"
        + (" …" if fast else " and the trainer's path on CPU (the dry run, ~50 s) …"))
    # fast (--preflight-fast): the check without its deep probes (imports, registry, Ray smoke; ~20 s
    # cold, cached afterwards) and without the dry run — the GPU, model and data checks do not need them.
    result = run_check(python, fast=fast, recipe=recipe, lenient_recipe=True)
    say(f"doctor check done ({len(result.findings)} finding(s)); the model's files …")
    model = _model_checks(recipe, res, python)
    files: list[PreflightCheck] = []
    say("the tokenizer and the data, read in the target …")
    tp = _target_preflight(python, res["model_path"] if res["model_local"] else None, res["files"])
    say("done")
    if "error" in tp:
        files.append(PreflightCheck("target", False, f"the preflight script failed in the target: {tp['error']}",
                                    runnable(f"doctor check --python {python}")))
        return Preflight(result, model, files, recipe, python)
    if tp.get("tokenizer") is not None:
        t = tp["tokenizer"]
        files.append(PreflightCheck("tokenizer", t["ok"], f"{t.get('class')} ({t.get('vocab')} tokens)" if t["ok"] else
                                    f"does not load from {res['model_path']}: {t.get('error')}",
                                    None if t["ok"] else "re-download the model (tokenizer files missing?) or fix transformers"))
    for name, d in tp.get("data", {}).items():
        path = res["files"][name]
        if d.get("ok"):
            files.append(PreflightCheck(f"data:{name}", True, f"{path}: {d['rows']} rows, verl's columns"))
        elif d.get("missing"):
            files.append(PreflightCheck(f"data:{name}", False, f"{path}: missing verl column(s) {', '.join(d['missing'])} "
                                        f"(has {', '.join(d['columns'])})",
                                        "preprocess it like verl's examples/data_preprocess/gsm8k.py (or recipes data gsm8k --out DIR)"))
        else:
            files.append(PreflightCheck(f"data:{name}", False, f"{path}: {d.get('error')}",
                                        "recipes data gsm8k --out DIR   # a known-good copy"))
    return Preflight(result, model, files, recipe, python)
