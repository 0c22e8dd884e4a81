"""Environment variables through an allowlist (knowledge/environment.yaml); secrets redacted."""

from __future__ import annotations

import fnmatch
import os
import re

from doctor import knowledge

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
