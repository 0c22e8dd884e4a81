"""The schema of every knowledge file, checked when the file loads.

A typo in the data (`sevrity:`, a severity that does not exist, a regex that does not compile) is
one line naming the file, the entry and the field — never a KeyError in the middle of a user's
check. The schemas are written as data below: a field is `name: spec` where spec is a type, a
tuple of allowed values, a nested schema (dict), or a list of one of those (`[spec]`); a name
ending in `?` is optional. Mappings whose keys are data (stack wheels, metric roles) are `Map`."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from doctor.errors import KnowledgeError  # defined beside UsageError: the CLI catches both without loading knowledge


@dataclass(frozen=True)
class Map:
    """A mapping with free keys, each value of one spec."""

    value: Any


@dataclass(frozen=True)
class Regex:
    """A string that must compile as a Python regular expression."""


SEVERITY = ("error", "warning", "info")
TEXT = str
NUMBER = (int, float)

# A fix is automatic when it has a plan (what `doctor fix` does); `automatic` is derived, never declared.
# install/reinstall/constraints may hold the finding's own values ({dist}, {locked}, {lockfile}: what its rule filled).
PLAN = {"kind": TEXT, "install?": [TEXT], "reinstall?": [TEXT], "constraints?": [TEXT], "reason": TEXT, "source": TEXT}
FIX = {"summary": TEXT, "commands?": [TEXT], "plan?": PLAN}
SCOPE = ("host", "environment")

SCHEMAS: dict[str, Any] = {
    "findings": [{
        # from-stack: the rule gives the severity (the stack constraint's).
        "id": TEXT, "area": TEXT, "scope": SCOPE, "severity": SEVERITY + ("from-stack",), "title": TEXT,
        "meaning": TEXT, "why": TEXT, "fix": FIX, "sources": [TEXT], "missing_dist?": TEXT,
        "severity_without_gpu?": SEVERITY,
        # What a {placeholder} reads when the rule that fires does not fill it.
        "defaults?": Map(TEXT),
        # Who reports an ID that no rule or signature emits (the triage, a fix step).
        "produced_by?": TEXT,
        # Root causes this finding is a consequence of: when one of them is reported too, this
        # finding is listed under it ("caused by") and not counted as a cause of its own.
        "consequence_of?": [TEXT],
    }],
    "release_changes": [{"dist": TEXT, "module": TEXT, "name": TEXT,
                         "kind": ("removed", "renamed", "moved", "kwarg-removed", "kwarg-renamed", "module-removed"),
                         "removed_in": TEXT, "last_with": TEXT, "replacement": (str, type(None)), "source": TEXT}],
    "signatures": [{"id": TEXT, "pattern": Regex(), "contexts": [("import", "log")], "fatal?": bool,
                    "symptom?": bool, "params?": Map(Any), "source": TEXT}],
    "triage": {
        "line_prefixes": [Regex()], "completion_markers": [TEXT],
        "failure_markers": [{"name": TEXT, "pattern": Regex()}],
        "benign_lines?": [{"pattern": Regex(), "source": TEXT}],
        "wait_lines?": [{"pattern": Regex(), "repeats": int, "source": TEXT}],
        "log_versions?": [{"pattern": Regex(), "dist?": TEXT, "prose?": bool, "source": TEXT}],
        "wrappers?": [{"type?": Regex(), "message?": Regex(), "source": TEXT}],
        "class_owners?": [{"pattern": Regex(), "dist": TEXT, "source": TEXT}],
        "failure_classes?": [{"id": TEXT, "when": {"type?": Regex(), "message?": Regex(), "owner?": Regex(), "within?": Regex(),
                                                   "frame?": Regex(), "text?": Regex(), "log?": Regex(), "errno?": [TEXT],
                                                   "signal?": [TEXT]},
                              "params?": Map(Any), "last?": bool, "decisive?": bool, "source": TEXT}],
    },
    "model_support": {
        "families": [{"family": TEXT, "model_types?": [TEXT], "architectures?": [TEXT], "rope_type?": TEXT,
                      "first": Map({"version": TEXT, "source": TEXT}),
                      "works_from?": Map({"version": TEXT, "source": TEXT}), "notes?": [TEXT]}],
        "tokenizer_classes": [{"names": [TEXT], "family": TEXT, "transformers": TEXT, "source": TEXT}]},
    "settings": {"shadow_checked": Map(TEXT),
                 "values": Map({"choices": [TEXT], "reader": TEXT, "source": TEXT})},
    "verl_vllm": [{"verl": TEXT, "accepts": Any, "error": TEXT, "source": TEXT}],
    "lock": {"ignore_extra": [{"dist": TEXT, "reason": TEXT}]},
    "python_env": {"setuptools_needed_by": [{"dist": TEXT, "source": TEXT}], "stack_modules": [TEXT],
                   "file_overlaps?": [{"dists": [TEXT], "last": TEXT, "advice": TEXT, "source": TEXT}],
                   "stray_top_level?": [TEXT]},
    "environment": {"allow": [TEXT], "secret_names": [TEXT], "secret_values": [TEXT], "not_secret_values?": [Regex()],
                    "url_credentials": TEXT},
    "system": {
        "shm": {"object_store_fraction": NUMBER, "object_store_max_bytes": int, "headroom": NUMBER,
                "min_bytes": int, "source": TEXT},
        "gpu": {"min_compute_capability_bf16": [int], "min_compute_capability_flash_attn": [int],
                "kernel_libraries": Map([TEXT]), "cuda_versioned_wheels": [TEXT], "min_driver_for_cuda": Map(TEXT),
                "source": TEXT},
        "closest_stack": {"weight": NUMBER, "pinned_weight": NUMBER, "pinned": [TEXT], "source": TEXT},
    },
    "config_rules": {
        "ignored_keys": [{"key": TEXT, "readers": Any, "effect": TEXT, "seen_ignored_in?": Any, "sources": [TEXT]}],
        "plus_keys": [{"key": TEXT, "verl_below": TEXT, "needs?": Any, "sources": [TEXT]}],
        "kl_in_reward_since": TEXT, "kl_inert_prefixes": [TEXT], "kl_sources": [TEXT],
        "gpu_memory_utilization": {"oom_line": NUMBER, "sources": [TEXT]},
        "log_prob_micro": {"threshold": int, "keys": [TEXT], "sources": [TEXT]},
        "tp_sources": [TEXT], "batch_sources": [TEXT], "batched_tokens_sources": [TEXT],
        "gsm8k_train_rows": int, "dataset_columns": [TEXT], "dataset_columns_source": TEXT,
    },
    "log_metrics": {"roles": Map(Any), "ppo_markers": [TEXT],
                    "other_trainers": [{"name": TEXT, "description": TEXT, "patterns": [Regex()], "source": TEXT}],
                    "eras": [{"era": TEXT, "pattern": Regex(), "source": TEXT}],
                    "validation_lines": {"initial": Regex(), "final": Regex()}},
    "ray": {"temp_root": Map(Any), "address_file": TEXT, "session_latest": TEXT, "socket_path": Map(Any),
            "liveness": Map(Any), "head_probe": Map(Any), "size_walk": Map(Any), "protobuf": Map(Any),
            "imports": {"modules": [TEXT], "finding": TEXT}, "smoke": Map(Any)},
    "dryrun": {"deadline_s": NUMBER, "next_on_gpu": TEXT,
               "steps": [{"id": TEXT, "title": TEXT, "where": ("driver", "ray", "task"), "follows": TEXT,
                          "optional?": bool, "trainer?": ("v0", "v1")}]},
    "stack": {
        # family: a name of families.yaml (checked by knowledge.stacks()).
        "name": TEXT, "family": TEXT, "default?": bool, "description": TEXT, "python": [TEXT], "platform": TEXT,
        # lock_note: why lockfiles/ has no lockfile of the stack yet (the doctor then names none).
        "lock_note?": TEXT, "exclude_newer": TEXT, "requirements": [TEXT],
        # also_good: versions outside `spec` (which the lock resolves within) known to work with this
        # stack — what the family's own users ran — never flagged; `spec` alone feeds the lockfile.
        "constraints": [{"dist": TEXT, "spec": TEXT, "severity": SEVERITY, "reason": TEXT, "source": TEXT,
                         "also_good?": {"spec": TEXT, "source": TEXT},
                         # when: the pin holds only beside this version of another dist (pairwise truth)
                         "when?": {"dist": TEXT, "spec": TEXT, "source": TEXT}}],
        # modules: the modules of the stack's trainer path the imports rule judges (default:
        # python_env.yaml stack_modules).
        "modules?": [TEXT],
        "flash_attn?": {"version": TEXT, "wheels": Map({"url": TEXT, "sha256?": (str, type(None))}), "note?": TEXT,
                        "source": TEXT},
    },
    "families": {
        "families": [{"name": TEXT, "description": TEXT, "verl": TEXT, "dists": Map(TEXT), "source": TEXT}],
        "releases": [{"verl": TEXT, "date": TEXT, "family": TEXT, "vllm": TEXT, "torch": TEXT, "transformers": TEXT,
                      "python": TEXT, "source": TEXT}],
        "common_modules": [TEXT],
    },
}


def _label(entry: Any, index: int) -> str:
    if isinstance(entry, dict):
        for key in ("id", "name", "dist", "key", "era", "verl"):
            if isinstance(entry.get(key), str):
                return f"entry {index} ({key} {entry[key]})"
    return f"entry {index}"


def _type_name(spec: Any) -> str:
    if isinstance(spec, tuple) and all(isinstance(t, type) for t in spec):
        return " or ".join(t.__name__ for t in spec)
    if isinstance(spec, type):
        return {"str": "text", "bool": "true/false", "int": "an integer"}.get(spec.__name__, spec.__name__)
    return "?"


def check(value: Any, spec: Any, where: str, patterns: list[str] | None = None) -> None:
    """Raise KnowledgeError(one line) where `value` does not match `spec`; every regular expression
    checked is appended to `patterns` (their needles are kept with the data: knowledge/patterns.py)."""
    if spec is Any:
        return
    if isinstance(spec, Regex):
        if not isinstance(value, str):
            raise KnowledgeError(f"{where}: must be a regular expression (text), got {type(value).__name__}")
        try:
            re.compile(value)
        except re.error as exc:
            raise KnowledgeError(f"{where}: the regular expression does not compile ({exc})")
        if patterns is not None:
            patterns.append(value)
        return
    if isinstance(spec, Map):
        if not isinstance(value, dict):
            raise KnowledgeError(f"{where}: must be a mapping, got {type(value).__name__}")
        for k, v in value.items():
            check(v, spec.value, f"{where}.{k}", patterns)
        return
    if isinstance(spec, list):
        if not isinstance(value, list):
            raise KnowledgeError(f"{where}: must be a list, got {type(value).__name__}")
        for i, item in enumerate(value):
            check(item, spec[0], f"{where}, {_label(item, i + 1)}", patterns)
        return
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise KnowledgeError(f"{where}: must be a mapping, got {type(value).__name__}")
        fields = {k.rstrip("?"): (v, not k.endswith("?")) for k, v in spec.items()}
        for key in value:
            if key not in fields:
                near = difflib.get_close_matches(str(key), list(fields), n=1)
                hint = f" (did you mean '{near[0]}'?)" if near else f" (known: {', '.join(fields)})"
                raise KnowledgeError(f"{where}: unknown field '{key}'{hint}")
        for key, (sub, required) in fields.items():
            if key not in value:
                if required:
                    raise KnowledgeError(f"{where}: missing field '{key}'")
                continue
            check(value[key], sub, f"{where}: field '{key}'" if ":" not in where else f"{where}.{key}", patterns)
        return
    if isinstance(spec, tuple) and not all(isinstance(t, type) for t in spec):  # allowed values
        if value not in spec:
            raise KnowledgeError(f"{where}: {value!r} is not one of {', '.join(map(str, spec))}")
        return
    if spec is NUMBER or spec is int:
        ok = isinstance(value, spec) and not isinstance(value, bool)
    else:
        ok = isinstance(value, spec)
    if not ok:
        raise KnowledgeError(f"{where}: must be {_type_name(spec)}, got {type(value).__name__} {value!r:.60}")


def validate(name: str, data: Any, path: str, patterns: list[str] | None = None) -> Any:
    """Check one loaded knowledge file against its schema; returns the data unchanged. `patterns`:
    see check()."""
    spec = SCHEMAS.get(name)
    if spec is None:
        raise KnowledgeError(f"{path}: no schema for knowledge file '{name}' (add one to doctor/knowledge/schema.py)")
    if name == "findings" and isinstance(data, list):
        for i, entry in enumerate(data):
            fix = entry.get("fix") if isinstance(entry, dict) else None
            if isinstance(fix, dict) and "automatic" in fix:
                raise KnowledgeError(f"{path}, {_label(entry, i + 1)}: field 'fix'.automatic is derived from "
                                     "fix.plan (a fix with a plan is automatic); do not declare it")
    check(data, spec, path, patterns)
    return data
