"""Cache of deep probe results, keyed by a fingerprint of the target: interpreter, the exact set
of installed distributions (name, version, location), the environment variables that change what
imports do, and the probe scripts themselves. Any change there is a different key."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from doctor.errors import UsageError
from doctor.probes import SCRIPTS

# Variables that change import behaviour, hence probe results.
FINGERPRINT_ENV = ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES",
                   "TMPDIR", "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "VLLM_TARGET_DEVICE")


def cache_dir() -> Path:
    base = os.environ.get("VERL_DOCTOR_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "verl-doctor"


def fingerprint(python: str, dist_facts: dict, doctor_version: str) -> str:
    h = hashlib.sha256()
    h.update(doctor_version.encode())
    h.update(os.path.realpath(python).encode() + b"\0" + python.encode())
    h.update(json.dumps(dist_facts.get("python", {}), sort_keys=True).encode())
    for key in sorted(dist_facts.get("dists", {})):
        d = dist_facts["dists"][key]
        h.update(f"{key}=={d['version']}@{d['path']}\n".encode())
    for name in FINGERPRINT_ENV:
        h.update(f"{name}={os.environ.get(name, '')}\n".encode())
    for script in sorted(SCRIPTS.glob("*.py")):
        h.update(script.read_bytes())
    return h.hexdigest()[:32]


def _path(key: str) -> Path:
    return cache_dir() / "probes" / f"{key}.json"


def load(key: str) -> dict | None:
    path = _path(key)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cache file {path} is unreadable ({exc.__class__.__name__}); remove it or run with --no-cache")


def store(key: str, results: dict) -> None:
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(results))
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs speed next time
