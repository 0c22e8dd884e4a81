"""A bug-report bundle: what verl's issue template and maintainers ask for, in one redacted JSON
file — the doctor's check (versions, findings, facts, the machine's GPU/driver), the launch command
and the resolved run config (from a recipe, or the log's own lines), the end of the log with its
triage. `doctor check --facts BUNDLE` judges it again; `doctor triage BUNDLE` triages its log."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from doctor import __version__, knowledge
from doctor.errors import UsageError
from doctor.triage import read_log, triage_text

KIND = "verl-doctor-bundle"
TAIL_LINES = 300
_LAUNCH = re.compile(r"(?:^|\s)(?:python3?|torchrun)\b[^\n]*-m verl\.trainer\.\w+[^\n]*|^\+ [^\n]*verl\.trainer[^\n]*")


# The config pprint verl prints at start: "{'actor_rollout_ref': …", " 'algorithm': {…" (Ray-prefixed).
_CONFIG_LINE = re.compile(r"^\s*(?:\([^)]*pid=\d+[^)]*\)\s*)?\{?'(?:actor_rollout_ref|algorithm|data|trainer|critic|reward_model)'")


def redact_text(text: str, home: str | None = None) -> str:
    """Secrets out of free text (the same value patterns as the report's environment allowlist;
    user:password@ in URLs); with `home`, the user's home directory shown as ~."""
    policy = knowledge.load("environment")
    def hide(m: re.Match) -> str:
        # a long run of path characters is a path, not a token: keep what has a / and no digit-letter mix
        word = m.group(0)
        return word if "/" in word and not (re.search(r"\d", word) and re.search(r"[A-Za-z]{3}", word)
                                            and not re.search(r"[./]", word.strip("/"))) else "<redacted>"

    for rx in policy["secret_values"]:
        text = re.sub(rx, hide, text)
    text = re.sub(policy["url_credentials"], "***", text)
    if home:
        text = text.replace(home.rstrip("/") + "/", "~/").replace(home.rstrip("/"), "~")
    return text


def _redact_doc(obj, home: str | None):
    if isinstance(obj, str):
        return redact_text(obj, home)
    if isinstance(obj, list):
        return [_redact_doc(x, home) for x in obj]
    if isinstance(obj, dict):
        return {k: _redact_doc(v, home) for k, v in obj.items()}
    return obj


def make_bundle(check_doc: dict, *, log_path: str | None = None, recipe: dict | None = None,
                shorten_home: bool = False) -> dict:
    """The bundle document (already redacted)."""
    home = os.path.expanduser("~") if shorten_home else None
    bundle: dict = {"kind": KIND, "schema_version": 1, "doctor_version": __version__,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "check": check_doc,
                    "machine": {"gpu": (check_doc.get("facts") or {}).get("gpu"),
                                "system": (check_doc.get("facts") or {}).get("system")}}
    if recipe is not None:
        bundle["run"] = {"recipe": recipe["name"], "overrides": recipe["overrides"],
                         "launch_command": recipe["launch_command"]}
    if log_path:
        text = read_log(log_path)
        lines = text.splitlines()
        t = triage_text(text, log_path, python=check_doc.get("target", {}).get("python", "python"))
        launch = next((m.group(0).strip() for ln in lines[:2000] if (m := _LAUNCH.search(ln))), None)
        config = [ln for ln in lines[:3000] if _CONFIG_LINE.search(ln)]
        bundle["log"] = {"file": log_path, "lines": len(lines), "tail": lines[-TAIL_LINES:],
                         "triage": t.to_document(), "launch_command": launch, "config_lines": config[:400]}
    return _redact_doc(bundle, home)


def write_bundle(bundle: dict, out: Path) -> Path:
    if out.exists():
        raise UsageError(f"--out {out}: exists; give a new file name (a bundle never overwrites)")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: folder {out.parent} does not exist")
    try:
        with open(out, "x", encoding="utf-8") as fh:
            json.dump(bundle, fh, indent=1, default=str)
            fh.write("\n")
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write ({exc.strerror or exc})")
    return out


def bundle_target(text: str) -> tuple[str | None, str | None]:
    """(interpreter, Python 3.N) the bundle's check recorded, or (None, None) when the text is no bundle."""
    if not text.lstrip().startswith("{"):
        return None, None
    try:
        doc = json.loads(text)
    except ValueError:
        return None, None
    if not (isinstance(doc, dict) and doc.get("kind") == KIND):
        return None, None
    check = doc.get("check") or {}
    version = str(((check.get("facts") or {}).get("python") or {}).get("version") or "")
    return (check.get("target") or {}).get("python"), ".".join(version.split(".")[:2]) or None


def bundle_log_text(text: str) -> str | None:
    """The log tail of a bundle file's text, or None when the text is no bundle."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("kind") == KIND:
        return "\n".join((doc.get("log") or {}).get("tail") or []) + "\n"
    return None
