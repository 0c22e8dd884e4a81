"""Cache of deep probe results, keyed by a fingerprint of the target: interpreter, the exact set
of installed distributions (name, version, location), the environment variables that change what
imports do, and the probe scripts themselves. Any change there is a different key."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from pathlib import Path

from doctor import knowledge
from doctor.errors import UsageError
from doctor.facts import validate_probe
from doctor.paths import cache_dir
from doctor.probes import SCRIPTS

# Variables that change import behaviour, hence probe results: these, and every variable the
# environment facts read (knowledge/environment.yaml `allow`: VLLM_*, HF_*, TORCH_*, …) — a setting
# such as VLLM_USE_MODELSCOPE decides what `import vllm` does, so a check with it is not the
# check without it. Values are hashed, never stored.
FINGERPRINT_ENV = ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES",
                   "TMPDIR", "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "VLLM_TARGET_DEVICE",
                   "VLLM_ATTENTION_BACKEND")


def _settings() -> list[tuple[str, str]]:
    allow = knowledge.load("environment")["allow"]
    names = set(FINGERPRINT_ENV) | {n for n in os.environ if any(fnmatch.fnmatchcase(n, p) for p in allow)}
    return [(n, os.environ.get(n, "")) for n in sorted(names)]


def fingerprint(python: str, dist_facts: dict, doctor_version: str) -> str:
    h = hashlib.sha256()
    h.update(doctor_version.encode())
    h.update(os.path.realpath(python).encode() + b"\0" + python.encode())
    h.update(json.dumps(dist_facts.get("python", {}), sort_keys=True).encode())
    for key in sorted(dist_facts.get("dists", {})):
        d = dist_facts["dists"][key]
        h.update(f"{key}=={d['version']}@{d['path']}{_stamp(d['path'])}\n".encode())
    for name, value in _settings():
        h.update(f"{name}={value}\n".encode())
    for script in sorted(SCRIPTS.glob("*.py")):
        h.update(script.read_bytes())
    return h.hexdigest()[:32]


def _stamp(path: str) -> str:
    """A reinstall of the same version (`doctor fix` putting a wheel's files back) writes a new
    dist-info directory: its inode and mtime make that a new key, so the re-check looks again."""
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return ""
    return f":{st.st_ino}:{st.st_mtime_ns}"


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
    store_at(_path(key), results)


def store_at(path: Path, results: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(results))
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs speed next time


# --- the distribution list itself, for a warm check without starting the target at all ----------
# A stamp of every directory on the target's sys.path and every directory holding a dist-info
# (installers add/remove dist-info directories, which changes their parent's mtime), plus the
# interpreter file and the same env vars. Any install, uninstall or upgrade changes it.

def _dirs_stamp(python: str, data: dict) -> str:
    h = hashlib.sha256()
    h.update(python.encode())
    for path in [os.path.realpath(python)]:
        try:
            st = os.stat(path)
            h.update(f"{path}:{st.st_mtime_ns}:{st.st_ino}\n".encode())
        except OSError:
            h.update(f"{path}:missing\n".encode())
    dirs = set(data.get("python", {}).get("sys_path", []))
    dirs |= {os.path.dirname(d["path"]) for d in data.get("dists", {}).values() if d.get("path")}
    for d in sorted(dirs):
        try:
            st = os.stat(d)
            h.update(f"{d}:{st.st_mtime_ns}:{st.st_ino}\n".encode())
        except OSError:
            h.update(f"{d}:missing\n".encode())
    for name, value in _settings():
        h.update(f"{name}={value}\n".encode())
    h.update((SCRIPTS / "distributions.py").read_bytes())
    return h.hexdigest()


def _dists_path(python: str) -> Path:
    return cache_dir() / "dists" / (hashlib.sha256(python.encode()).hexdigest()[:32] + ".json")


def load_dists(python: str) -> dict | None:
    """The cached distributions probe output, if nothing on the target's path changed since."""
    path = _dists_path(python)
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
        stamp, data = saved["stamp"], saved["data"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cache file {path} is unreadable ({exc.__class__.__name__}); remove it or run with --no-cache")
    if validate_probe("distributions", data):  # another doctor's shape: probe again
        return None
    return data if _dirs_stamp(python, data) == stamp else None


def store_dists(python: str, data: dict) -> None:
    store_at(_dists_path(python), {"stamp": _dirs_stamp(python, data), "data": data})
