"""Failed imports as the imports probe records them, and how rules quote them (pure)."""

from __future__ import annotations

import re

from doctor.names import canonical_name

from doctor.signatures import classify, specificity


def chain_text(info: dict) -> str:
    """An import failure's text with the exceptions it was raised from (the probe's `causes`)."""
    causes = info.get("causes") or []
    return "\n".join([info.get("text") or info.get("message", "")] +
                     [f"{c.get('type')}: {c.get('message')}" for c in causes])


def import_failures(facts: dict) -> list[tuple[str, dict, str | None]]:
    """(module, failure info, classified ID) for every failed import, in import order; the whole
    exception chain is classified, not only its last message."""
    out = []
    for module, info in ((facts.get("imports") or {}).get("modules") or {}).items():
        if not info.get("ok"):
            out.append((module, info, classify(chain_text(info))))
    return out


def most_specific(info: dict) -> tuple[str, str]:
    """(type, message) of the most specific exception of the chain: the final one unless one it was
    raised from says more ("Please upgrade X to >= N" under "C extension not built")."""
    candidates = [(info.get("type") or "", info.get("message") or "")]
    candidates += [(c.get("type") or "", c.get("message") or "") for c in info.get("causes") or []]
    best = max(range(len(candidates)), key=lambda i: (specificity(*candidates[i]), -i))
    return candidates[best]


def failures_for(facts: dict, finding_id: str) -> list[tuple[str, dict]]:
    return [(m, i) for m, i, fid in import_failures(facts) if fid == finding_id]


def grouped_failure_evidence(failures: list[tuple[str, dict]], unlisted: tuple[str, ...] = ()) -> list[str]:
    """One line per distinct error (the first import that raised it), then the other imports that
    raised the same error — not the same line once per module (nor the ones ending in `unlisted`)."""
    by_msg: dict[str, list[tuple[str, dict]]] = {}
    for module, info in failures:
        by_msg.setdefault(info.get("message") or "", []).append((module, info))
    out = []
    for items in by_msg.values():
        out.append(failure_evidence(*items[0]))
        rest = [m for m, _ in items[1:] if not m.endswith(unlisted or ("\0",))]
        if rest:
            out.append("same error when importing: " + ", ".join(rest))
    return out


def failure_evidence(module: str, info: dict) -> str:
    chain = info.get("chain") or []
    where = f" (raised at {chain[-1]})" if chain else ""
    _, message = most_specific(info)   # the probe's messages already start with their type
    if message != info.get("message"):   # the chain's specific line first, then what it surfaced as
        return f"import {module}: {message} (then: {info.get('message')}){where}"
    return f"import {module}: {info.get('message')}{where}"


def fails_for_missing_dist(info: dict, missing: list[str]) -> bool:
    """An import that fails only because a missing distribution's top-level module is absent."""
    mod = (info.get("missing_module") or "").split(".")[0]
    return bool(mod) and info.get("type") == "ModuleNotFoundError" and canonical_name(mod) in missing


# "undefined symbol: ncclCommRegister" is NCCL's, "__nvJitLinkAddData_12_1" nvJitLink's: the library
# family a missing symbol belongs to, to tie a failure to a library file (a search path, a wheel overlap)
SYMBOL_FAMILY = re.compile(r"undefined symbol: _*(?:Z\w*?)?(nccl|cudnn|cublas|cusparse|nvJitLink|cufft|curand|"
                           r"cusolver|cuda|nvrtc|gomp|omp)", re.I)
SO_NAME = re.compile(r"(lib[\w+.-]+?\.so(?:\.[\d.]+)?)\b")


def lib_family(name: str) -> str:
    """libcudnn_ops_infer.so.8 → cudnn; libnccl.so.2 → nccl; libstdc++.so.6 → stdc++."""
    stem = name[3:] if name.startswith("lib") else name
    return re.split(r"[._\d]", stem, maxsplit=1)[0].lower()


def lib_families(text: str) -> set[str]:
    """The library families a failure's text names: by the .so files it mentions and the symbols it misses."""
    return {lib_family(lib) for lib in SO_NAME.findall(text)} | {m.group(1).lower() for m in SYMBOL_FAMILY.finditer(text)}
