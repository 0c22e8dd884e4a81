"""Environment variables through an allowlist (knowledge/environment.yaml); secrets redacted. And
what the settings that decide which code loads point at: the entries of PYTHONPATH, LD_LIBRARY_PATH
and LD_PRELOAD, with the packages and libraries each holds (the target inherits this environment)."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

from doctor import knowledge
from doctor.facts import LoadPathEntry, LoadPathsFacts

REDACTED = "<redacted>"


def redact(name: str, value: str, policy: dict | None = None) -> str:
    policy = policy or knowledge.load("environment")
    if any(fnmatch.fnmatchcase(name.upper(), pat) for pat in policy["secret_names"]):
        return REDACTED
    if any(re.fullmatch(rx, value) for rx in policy.get("not_secret_values", [])):
        return value
    if any(re.search(rx, value) for rx in policy["secret_values"]):
        return REDACTED
    return re.sub(policy["url_credentials"], "***", value)


def environment_facts(environ: dict | None = None) -> dict:
    policy = knowledge.load("environment")
    env = os.environ if environ is None else environ
    shown = {}
    for name in sorted(env):
        if any(fnmatch.fnmatchcase(name, pat) for pat in policy["allow"]):
            shown[name] = redact(name, env[name], policy)
    return shown


LOAD_PATH_VARS = ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD")
_MAX_LISTED = 200


def _entry(var: str, path: str) -> LoadPathEntry:
    p = Path(path)
    entry: LoadPathEntry = {"path": path, "exists": p.exists(), "packages": [], "libs": []}
    if var == "LD_PRELOAD":
        entry["libs"] = [p.name]
        return entry
    if not p.is_dir():
        return entry
    try:
        names = sorted(os.listdir(p))[:5000]
    except OSError:
        return entry
    for n in names:
        if ".so" in n and (n.endswith(".so") or ".so." in n):
            entry["libs"].append(n)
        elif var == "PYTHONPATH" and (n.endswith(".py") or (p / n / "__init__.py").is_file()):
            entry["packages"].append(n[:-3] if n.endswith(".py") else n)
    entry["libs"] = entry["libs"][:_MAX_LISTED]
    entry["packages"] = entry["packages"][:_MAX_LISTED]
    return entry


def load_path_facts(environ: dict | None = None) -> LoadPathsFacts:
    env = os.environ if environ is None else environ
    out = {}
    for var in LOAD_PATH_VARS:
        value = env.get(var, "")
        sep = " " if var == "LD_PRELOAD" and ":" not in value else ":"
        entries = [e for e in value.split(sep) if e.strip()]
        if entries:
            out[var] = [_entry(var, e.strip()) for e in entries]
    return out
