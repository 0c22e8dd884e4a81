"""Settings as causes (issue 24): environment variables that decide which code loads (PYTHONPATH,
LD_LIBRARY_PATH, LD_PRELOAD) or which implementation a library selects (VLLM_ATTENTION_BACKEND and
the value tables of knowledge/settings.yaml). A setting is named as the cause when a failing frame
or library was loaded through it, or when its value selects something not installed or not valid
here — with the command that re-checks the env without it, runnable in a new shell."""

from __future__ import annotations

import re

from doctor import knowledge
from doctor.findings import make
from doctor.rules.failures import SO_NAME, chain_text, import_failures, lib_families, lib_family
from doctor.rules.registry import cannot_look, rule

def _under(path: str, entry: str) -> bool:
    entry = entry.rstrip("/")
    return bool(entry) and (path == entry or path.startswith(entry + "/"))


def _frame_files(info: dict) -> list[str]:
    frames = list(info.get("chain") or [])
    for c in info.get("causes") or []:
        frames += c.get("chain") or []
    return [f.rsplit(":", 1)[0] for f in frames]


@rule("no search-path setting loads the code that fails", "settings", needs=("imports", "load_paths"),
      emits=("setting.loads-code", "setting.shadows-module", "setting.suspect"))
def load_paths(facts, ctx):
    paths = facts["load_paths"]
    if not paths:
        return  # none of PYTHONPATH, LD_LIBRARY_PATH, LD_PRELOAD is set: nothing loads through them
    failures = import_failures(facts)
    # (var, entry) → the failing imports that loaded code through it: one finding per entry
    hits: dict[tuple[str, str], list[tuple[str, dict, str]]] = {}
    for module, info, _ in failures:
        files = _frame_files(info)
        text = chain_text(info)
        libs = set(SO_NAME.findall(text))
        mentioned = re.findall(r"(/[^\s:'\"()]+)", text)   # "(/tmp/x/typing_extensions.py)" in the message
        fams = lib_families(text)
        for var, entries in paths.items():
            for e in entries:
                hit = next((f for f in files + mentioned if _under(f, e["path"])), None)
                lib_hit = next((lib for lib in libs if lib in e["libs"]), None)
                # LD_PRELOAD loads its library into every process: a failure in that library's family
                # (an NCCL symbol with a preloaded libnccl) came through it
                if var == "LD_PRELOAD" and lib_hit is None:
                    lib_hit = next((lib for lib in e["libs"] if lib_family(lib) in fams), None)
                if hit is None and lib_hit is None:
                    continue
                what = f"its code from {hit}" if hit else f"the library {lib_hit} from {e['path']}"
                hits.setdefault((var, e["path"]), []).append((module, info, what))
    for (var, entry), items in hits.items():
        module, info, what = items[0]
        label = module if len(items) == 1 else f"{module} (and {', '.join(m for m, _, _ in items[1:])})"
        evidence = [f"{var} entry {entry}", f"import {module}: {info.get('message')}", f"{module} loaded {what}"]
        if len(items) > 1:
            evidence.append("the same setting under: " + ", ".join(m for m, _, _ in items[1:]))
        yield make("setting.loads-code", evidence, var=var, entry=entry, module=label,
                   message=info.get("message", "?"), python=ctx.python)
    named = {(var, m) for (var, _), items in hits.items() for m, _, _ in items}
    # A stack module imported fine, but from a PYTHONPATH entry, over the env's own installed copy
    modules = (facts.get("imports") or {}).get("modules") or {}
    dists = facts.get("distributions") or {}
    tops = knowledge.load("settings")["shadow_checked"]
    for e in paths.get("PYTHONPATH", []):
        for top, dist in tops.items():
            info = modules.get(top) or {}
            if info.get("ok") and info.get("file") and _under(info["file"], e["path"]) and dist in dists:
                yield make("setting.shadows-module", [f"import {top} loaded {info['file']}",
                                                      f"the env's own {dist} {dists[dist]['version']} is not the one that runs"],
                           entry=e["path"], module=top, dist=dist, version=dists[dist]["version"],
                           python=ctx.python)
    # A compiled library fails while a library search path holds its own copy of that library family
    # (RPATH may still win: a suspect, not the cause)
    for module, info, _ in failures:
        fams = lib_families(chain_text(info))
        for e in paths.get("LD_LIBRARY_PATH", []):
            same = sorted(lib for lib in e["libs"] if lib_family(lib) in fams)
            if same and ("LD_LIBRARY_PATH", module) not in named:
                named.add(("LD_LIBRARY_PATH", module))
                yield make("setting.suspect", [f"import {module}: {info.get('message')}",
                                               f"LD_LIBRARY_PATH entry {e['path']} holds {', '.join(same[:4])}"],
                           var="LD_LIBRARY_PATH", entry=e["path"], module=module, libs=", ".join(same[:4]),
                           python=ctx.python)


@rule("settings select what this env has", "settings", needs=("environment",),
      emits=("setting.unusable-value",))
def selected_values(facts, ctx):
    env = facts["environment"] or {}
    checks = ((facts.get("imports") or {}).get("checks") or {})
    backend = checks.get("attention_backend")
    if env.get("VLLM_ATTENTION_BACKEND") and backend is None and facts.get("imports") is None:
        raise cannot_look("imports", "the imports probe did not run (vLLM's choice of backend was not exercised)")
    if backend and not backend.get("ok"):
        if backend.get("missing"):
            why = (f"vLLM's {backend.get('module')} needs {', '.join(backend['missing'])}, which is not installed "
                   "(it is imported when the engine starts)")
        else:
            why = backend.get("message") or "vLLM rejects it"
        yield make("setting.unusable-value", [f"VLLM_ATTENTION_BACKEND={backend['name']}", why],
                   var="VLLM_ATTENTION_BACKEND", value=backend["name"], why=why, python=ctx.python)
    # A setting that switches on an optional integration whose module is not installed
    # (VLLM_USE_MODELSCOPE=True makes vLLM import modelscope): the variable names the module it loads
    switched: dict[str, list[tuple[str, dict, str]]] = {}
    for module, info, _ in import_failures(facts):
        missing = (info.get("missing_module") or "").split(".")[0]
        if info.get("type") != "ModuleNotFoundError" or len(missing) < 4:
            continue
        for var, value in env.items():
            if missing.upper() in var.upper().replace("_", "") and value.strip().lower() not in ("", "0", "false", "no", "off"):
                switched.setdefault(var, []).append((module, info, missing))
                break
    for var, items in switched.items():
        module, info, missing = items[0]
        why = f"it makes {module} import {missing}, which is not installed"
        evidence = [f"{var}={env[var]}", f"import {module}: {info.get('message')}"]
        if len(items) > 1:
            evidence.append("the same under: " + ", ".join(m for m, _, _ in items[1:]))
        yield make("setting.unusable-value", evidence, var=var, value=env[var], why=why, python=ctx.python)
    for var, spec in knowledge.load("settings")["values"].items():
        value = env.get(var)
        if value is None or value == "<redacted>":
            continue
        if value not in spec["choices"]:
            why = f"{spec['reader']} accepts {', '.join(spec['choices'])}"
            yield make("setting.unusable-value", [f"{var}={value}", why, f"source: {spec['source']}"],
                       var=var, value=value, why=why, python=ctx.python)
