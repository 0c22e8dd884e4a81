"""The recipe catalog: load and validate recipe YAML, resolve its data/model paths, and the
`recipes list|show|data` commands.

The recipes are the repository's top-level recipes/ (one copy; a wheel ships it inside the
package, doctor/paths.py finds either). The data they use (the GSM8K sample, model configs) is
package data in doctor/recipes/data/. Lookup order for a NAME: $VERL_DOCTOR_RECIPES_DIR, then
recipes/. A path to a .yaml file is loaded as is."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from doctor.errors import UsageError
from doctor.paths import recipes_dir

PKG_DATA = Path(__file__).parent / "data"
RECIPES_DIR = recipes_dir()
DATASETS: dict[str, dict[str, Any]] = {"gsm8k": {
    "dir": PKG_DATA / "gsm8k", "files": ["train.parquet", "test.parquet", "LICENSE", "SOURCE.md"],
    "train": "train.parquet", "val": "test.parquet"}}
MODEL_CONFIGS = PKG_DATA / "models"
COMPARISONS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
               "<": lambda a, b: a < b, "==": lambda a, b: a == b}
STATUSES = ("measured", "claimed")
AGGS = ("last", "max", "min", "mean", "median", "count")
PRINTED_SEED = "seed-article-printed.overrides"


def search_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("VERL_DOCTOR_RECIPES_DIR"):
        dirs.append(Path(os.environ["VERL_DOCTOR_RECIPES_DIR"]))
    dirs.append(RECIPES_DIR)
    return dirs


def names() -> list[str]:
    seen: dict[str, Path] = {}
    for d in search_dirs():
        for p in sorted(d.glob("*.yaml")):
            seen.setdefault(p.stem, p)
    return sorted(seen)


def find(name_or_file: str) -> Path:
    p = Path(name_or_file)
    if name_or_file.endswith((".yaml", ".yml")) or os.sep in name_or_file:
        if not p.is_file():
            raise UsageError(f"{name_or_file}: no such recipe file")
        return p
    for d in search_dirs():
        cand = d / f"{name_or_file}.yaml"
        if cand.is_file():
            return cand
    raise UsageError(f"unknown recipe {name_or_file!r} (known: {', '.join(names())})")


def _need(cond: bool, path: Path, what: str) -> None:
    if not cond:
        raise UsageError(f"{path}: malformed recipe: {what}")


def validate(doc, path: Path) -> dict:
    _need(isinstance(doc, dict), path, "top level must be a mapping")
    for key in ("name", "description", "stack", "hardware", "model", "data", "overrides"):
        _need(key in doc, path, f"missing '{key}'")
    _need(isinstance(doc["name"], str) and bool(doc["name"]), path, "'name' must be a string")
    hw = doc["hardware"]
    _need(isinstance(hw, dict) and isinstance(hw.get("gpus"), int) and hw["gpus"] > 0, path,
          "'hardware.gpus' must be a positive integer")
    _need(isinstance(hw.get("min_memory_gib", 0), (int, float)), path, "'hardware.min_memory_gib' must be a number")
    m = doc["model"]
    _need(isinstance(m, dict) and bool(m.get("path") or m.get("id")), path, "'model' needs 'path' or 'id'")
    _need(isinstance(doc["data"], (str, dict)), path, "'data' must be 'builtin:NAME' or {train, val}")
    if isinstance(doc["data"], str):
        _need(doc["data"].startswith("builtin:") and doc["data"][8:] in DATASETS, path,
              f"'data' {doc['data']!r}: known builtin datasets: {', '.join('builtin:' + k for k in DATASETS)}")
    else:
        _need(bool(doc["data"].get("train")) and bool(doc["data"].get("val")), path, "'data' needs 'train' and 'val'")
    ov = doc["overrides"]
    _need(isinstance(ov, list) and all(isinstance(o, str) and "=" in o for o in ov), path,
          "'overrides' must be a list of 'key=value' strings")
    _need(isinstance(doc.get("env", {}), dict), path, "'env' must be a mapping")
    quick = doc.get("quick") or {}
    _need(isinstance(quick, dict) and isinstance(quick.get("max_steps", 1), int), path, "'quick.max_steps' must be an integer")
    for where, bands in (("bands", doc.get("bands") or []), ("quick.bands", quick.get("bands") or [])):
        _need(isinstance(bands, list), path, f"'{where}' must be a list")
        for i, b in enumerate(bands):
            _need(isinstance(b, dict) and {"metric", "comparison", "value", "source"} <= set(b), path,
                  f"{where}[{i}] needs metric, comparison, value, source")
            _need(b["comparison"] in COMPARISONS, path, f"{where}[{i}].comparison must be one of {', '.join(COMPARISONS)}")
            _need(isinstance(b["value"], (int, float)), path, f"{where}[{i}].value must be a number")
            _need(b.get("status", "claimed") in STATUSES, path, f"{where}[{i}].status must be measured or claimed")
            _need(b.get("agg", "last") in AGGS, path, f"{where}[{i}].agg must be one of {', '.join(AGGS)}")
    return doc


def load(name_or_file: str) -> dict:
    path = find(name_or_file)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise UsageError(f"{path}: malformed recipe YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    doc = validate(doc, path)
    doc["_path"] = str(path)
    return doc


_OVERRIDE_KEY = re.compile(r"^(?:~|\+\+|\+)?[A-Za-z_][\w.\-/@]*$")


def override_problem(line: str) -> str | None:
    """What is wrong with one Hydra override line (key=value), in words; None if it looks right.
    Checked before Hydra sees it, so the message names the line instead of a grammar error."""
    key, eq, value = line.partition("=")
    if not eq:
        return None if line.startswith("~") and _OVERRIDE_KEY.match(line) else "not key=value"
    if not key.strip():
        return "no key before '='"
    if not _OVERRIDE_KEY.match(key.strip()):
        return f"{key.strip()!r} is not a config key (letters, digits and _ . - / @, optionally after + ++ ~)"
    depth, quote = [], None
    pairs = {"[": "]", "{": "}", "(": ")"}
    for ch in value:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in pairs:
            depth.append(pairs[ch])
        elif ch in pairs.values():
            if not depth or depth.pop() != ch:
                return f"unbalanced {ch!r} in the value"
    if quote:
        return f"unclosed {quote} quote in the value"
    if depth:
        return f"unclosed {depth[-1].translate(str.maketrans(']})', '[{('))!r} in the value"
    return None


def read_overrides_file(path: str) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--overrides-file {path}: no such file")
    data = p.read_bytes()
    if b"\0" in data:
        raise UsageError(f"--overrides-file {path}: is a binary file, not Hydra overrides (one key=value per line)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--overrides-file {path}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start})") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            line = line[:-1].rstrip()
        problem = override_problem(line)
        if problem:
            raise UsageError(f"--overrides-file {path}: line {n} is not a Hydra override ({problem}): {line[:60]}")
        out.append(line)
    return out


def dataset_files(name: str) -> dict:
    d = DATASETS[name]
    return {"train": str(d["dir"] / d["train"]), "val": str(d["dir"] / d["val"])}


def command_ref(recipe: dict) -> str:
    """How a printed command names the recipe: its name when it ships, else its file (shell-quoted)."""
    import shlex

    path = Path(recipe.get("_path") or "")
    return recipe["name"] if path.parent == RECIPES_DIR else shlex.quote(str(path.resolve()))


def resolve_model_path(recipe: dict) -> tuple[str, bool]:
    """(path or hub id to pass to verl, whether it is a local directory)."""
    m = recipe["model"]
    env = os.environ.get("VERL_DOCTOR_MODEL_PATH")
    if env:
        return env, Path(env).is_dir()
    if m.get("path"):
        p = Path(os.path.expandvars(os.path.expanduser(m["path"])))
        if p.is_dir():
            return str(p), True
    if m.get("id"):
        hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub" / \
            ("models--" + m["id"].replace("/", "--")) / "snapshots"
        snaps = sorted(hub.glob("*/config.json")) if hub.is_dir() else []
        if snaps:
            return str(snaps[-1].parent), True
        return m["id"], False
    return str(Path(os.path.expanduser(m["path"]))), False


def model_config(model_path: str) -> tuple[dict | None, str | None]:
    """The model's config.json: from its directory, else the shipped copy for a known model name."""
    p = Path(model_path) / "config.json"
    if p.is_file():
        try:
            return json.loads(p.read_text()), str(p)
        except (OSError, ValueError):
            pass
    base = Path(model_path.rstrip("/")).name.lower()
    for cand in sorted(MODEL_CONFIGS.glob("*.config.json")):
        if cand.name[: -len(".config.json")].split("--")[-1].lower() == base:
            return json.loads(cand.read_text()), f"{cand} (shipped copy: {model_path} is not a local model directory)"
    return None, None


def resolve(recipe: dict, quick: bool = False) -> dict:
    """The recipe with its placeholders filled: the overrides verl gets, env, files."""
    if isinstance(recipe["data"], str):
        files = dataset_files(recipe["data"].split(":", 1)[1])
    else:
        files = {k: os.path.expanduser(recipe["data"][k]) for k in ("train", "val")}
    model_path, local = resolve_model_path(recipe)
    subst = {"train_files": files["train"], "val_files": files["val"], "model_path": model_path}
    overrides = []
    for o in recipe["overrides"]:
        for k, v in subst.items():
            o = o.replace("{" + k + "}", v)
        overrides.append(o)
    if quick:
        steps = (recipe.get("quick") or {}).get("max_steps")
        if not steps:
            raise UsageError(f"recipe {recipe['name']} has no quick mode (quick.max_steps)")
        overrides = [o for o in overrides if not o.startswith("trainer.total_training_steps=")]
        overrides.append(f"trainer.total_training_steps={steps}")
    bands = ((recipe.get("quick") or {}).get("bands") or []) if quick else (recipe.get("bands") or [])
    return {"overrides": overrides, "files": files, "model_path": model_path, "model_local": local,
            "env": {str(k): str(v) for k, v in (recipe.get("env") or {}).items()}, "bands": bands}


def _override_value(overrides: list[str], key: str):
    for o in overrides:
        if o.split("=", 1)[0].lstrip("+") == key:
            return o.split("=", 1)[1]
    return None


def data_use(overrides: list[str], rows: int) -> str | None:
    tb = _override_value(overrides, "data.train_batch_size")
    try:
        tb = int(tb)
    except (TypeError, ValueError):
        return None
    batches = rows // tb
    return (f"{rows} train rows ÷ train_batch_size {tb} = {batches} steps per epoch "
            f"({batches * tb / rows:.1%} of the rows; the last partial batch is dropped)")


# -- commands ----------------------------------------------------------------------------------


def write_dataset(dataset: str, out_dir: str) -> list[Path]:
    """`recipes data NAME --out DIR`: a shipped dataset's files, copied; their paths."""
    if dataset not in DATASETS:
        raise UsageError(f"unknown dataset {dataset!r} (known: {', '.join(DATASETS)})")
    d = DATASETS[dataset]
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for f in d["files"]:
            shutil.copyfile(d["dir"] / f, out / f)
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot write: {exc.strerror or exc}") from None
    return [out / f for f in d["files"]]
