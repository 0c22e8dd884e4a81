"""Which library release first runs a model family (knowledge/model_support.yaml), read from a log:
the model type, architecture or tokenizer class a failure names, and the family a failed run's log
names beside a library release that predates it."""

from __future__ import annotations

import functools
import re

from doctor import knowledge
from doctor.triage.releases import older


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    return knowledge.load("model_support")


def _need(entry: dict, lib: str) -> str | None:
    """The release of `lib` that runs the family: the documented working one, else the first."""
    return ((entry.get("works_from") or {}).get(lib) or (entry.get("first") or {}).get(lib) or {}).get("version")


def _first(entry: dict, lib: str, default: str) -> str:
    """The first release of `lib` that ships the family (the table's `first`), else `default`."""
    return ((entry.get("first") or {}).get(lib) or {}).get("version", default)


def support_text(model_type: str | None = None, tokenizer_class: str | None = None,
                 rope_type: str | None = None) -> str:
    """One sentence naming the transformers release a model type, rope type or tokenizer class needs;
    '' when the table does not know it."""
    if tokenizer_class:
        for t in _table()["tokenizer_classes"]:
            if tokenizer_class in t["names"]:
                return (f"{tokenizer_class} ({t['family']}) needs transformers {t['transformers']} or later: "
                        f"upgrade transformers. ")
    for entry in _table()["families"]:
        if (model_type and model_type in (entry.get("model_types") or [])) or \
                (rope_type and rope_type == entry.get("rope_type")):
            need = _need(entry, "transformers")
            if need:
                return f"{entry['family']} ({model_type or rope_type}) needs transformers {need} or later: upgrade transformers. "
    first = _first_with_module(model_type) if model_type else None
    if first and model_type:
        minor = ".".join(first.split(".")[:2])   # the history examined one release per minor: name the minor
        return (f"{model_type} needs transformers {minor} or later ({first}, the first release examined with "
                f"transformers.models.{_module_dir(model_type)}: knowledge/api_history): upgrade transformers. ")
    return ""


def _module_dir(model_type: str) -> str:
    return model_type.replace("-", "_")


def _first_with_module(model_type: str) -> str | None:
    """The first transformers release (of the API history's) with the model type's own module, where
    not every release examined has it: a model type added within the history's window."""
    if "transformers" not in knowledge.api_history_dists():
        return None
    h = knowledge.api_history("transformers")
    ranges = h.get("modules", {}).get(f"transformers.models.{_module_dir(model_type)}")
    return h["releases"][ranges[0][0]] if ranges and ranges[0][0] > 0 else None


def model_type_key(message: str | None) -> str | None:
    """The model type a bare KeyError names (`KeyError: 'mistral'`, a paste without frames), where a
    transformers release is known to have added it; else None (any other key)."""
    m = re.fullmatch(r"'(?P<key>[a-z][a-z0-9_-]{1,40})'", (message or "").strip())
    return m["key"] if m and support_text(m["key"]) else None


def _family_names(entry: dict) -> list[str]:
    names = [re.escape(entry["family"]).replace(r"\-", "[-_ ]?")]
    names += [re.escape(a) for a in entry.get("architectures") or []]
    names += [re.escape(m) for m in entry.get("model_types") or [] if "_" in m or any(c.isdigit() for c in m)]
    return names


@functools.lru_cache(maxsize=1)
def _pattern() -> tuple[re.Pattern, list[dict]]:
    """One pass over the log for every family (a group per family: f0, f1, …)."""
    entries = [e for e in _table()["families"] if not e.get("rope_type")]
    alts = [f"(?P<f{i}>" + "|".join(_family_names(e)) + ")" for i, e in enumerate(entries)]
    return re.compile(r"(?i)(?<![\w.])(?:" + "|".join(alts) + r")(?![\w.])"), entries


# an import of a model's module, or of a model's class, that the installed transformers does not have yet
# — or a framework refusing a model type it registers only with a transformers that has it ("model_type:
# 'gpt-oss' not in [...]" from ms-swift under transformers 4.54)
_MODEL_MODULE = re.compile(r"No module named '?transformers\.models\.(?P<dir>\w+)|"
                           r"cannot import name '(?P<cls>[A-Z]\w+)' from 'transformers'|"
                           r"model_type:? '(?P<mtype>[\w.-]+)'[^\n]{0,40}?(?:\bnot in\b|is not registered|is not supported)")


def module_too_new(text: str, log_stack: dict[str, str]) -> dict | None:
    """A model family's transformers module missing (`No module named 'transformers.models.qwen2'`)
    where the table knows the release that added it: the installed transformers predates the family —
    unless the log shows one at least that new (then the module is missing for another reason)."""
    m = _MODEL_MODULE.search(text)
    if m is None:
        return None
    what = f"transformers.models.{m['dir']}" if m["dir"] else m["cls"] or f"model type {m['mtype']}"
    mtype = (m["mtype"] or "").replace("-", "_")
    for entry in _table()["families"]:
        if m["dir"] in (entry.get("model_types") or []) or m["cls"] in (entry.get("architectures") or []) or \
                mtype in (entry.get("model_types") or []):
            need, have = _need(entry, "transformers"), log_stack.get("transformers")
            if not need or (have and not older(have, need)):
                return None   # (a version that does not parse says nothing either way: no answer)
            return {"family": entry["family"], "lib": "transformers", "need": need,
                    "first": _first(entry, "transformers", need),
                    "have": have or f"older than that (it has no {what})"}
    return None


def too_new(text: str, log_stack: dict[str, str]) -> dict | None:
    """The family a log names whose needed release of an engine (vllm, sglang, transformers) is newer
    than the release the log shows: {family, lib, have, need, first}; the most specific family
    (Qwen3-MoE over Qwen3) where several match."""
    if len(text) > 400_000:  # a model is named in the banners at the start or the failure at the end
        text = text[:200_000] + "\n" + text[-200_000:]
    rx, entries = _pattern()
    seen = {k for m in rx.finditer(text) for k, v in m.groupdict().items() if v}
    named = [entries[int(k[1:])] for k in sorted(seen, key=lambda k: int(k[1:]))]
    named = [e for e in named if not any(o is not e and o["family"].lower().startswith(e["family"].lower())
                                         for o in named)]
    for entry in named:
        for lib in ("vllm", "sglang", "transformers"):
            have, need = log_stack.get(lib), _need(entry, lib)
            if have and need and older(have, need):
                return {"family": entry["family"], "lib": lib, "have": have, "need": need,
                        "first": _first(entry, lib, need)}
    return None
