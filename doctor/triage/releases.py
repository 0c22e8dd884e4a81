"""The release that removed a name a traceback asks for (knowledge/release_changes.yaml: each entry
checked against the released packages). An import of a name, a module's attribute, a submodule or a
keyword argument that a library dropped is answered with that release and the last one that still
had it — the decisive detail of a version mismatch, which the message itself never says."""

from __future__ import annotations

import re

from doctor import knowledge

# what a failure asks for: (kind of name, module or callee, name)
_ASKS = [
    ("name", re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<module>[\w.]+)'")),
    ("module", re.compile(r"No module named '(?P<module>[\w.]+)'")),
    ("name", re.compile(r"module '(?P<module>[\w.]+)' has no attribute '(?P<name>\w+)'")),
    ("name", re.compile(r"type object '(?P<module>[\w.]+)' has no attribute '(?P<name>\w+)'")),
    ("name", re.compile(r"'(?P<module>[A-Z]\w+)' object has no attribute '(?P<name>\w+)'")),
    # (the argument quoted or not: a paste retyped by hand drops the quotes)
    ("kwarg", re.compile(r"(?P<module>[\w.]+?)(?:\.__init__)?\(\) got an unexpected keyword argument '?(?P<name>\w+)")),
    # a parameter the callee requires and the call does not pass: the callee gained it after the caller was written
    ("kwarg-missing", re.compile(r"(?P<module>[\w.]+?)(?:\.__init__)?\(\) missing \d+ required (?:positional|keyword-only) "
                                 r"arguments?: '(?P<name>\w+)'")),
]
_NAME_KINDS = {"removed", "renamed", "moved"}
_KWARG_KINDS = {"kwarg-removed", "kwarg-renamed"}


def _table() -> list[dict]:
    return knowledge.load("release_changes")


def _same_place(asked: str, entry_module: str) -> bool:
    """The module a message names and the one an entry names are one place: equal, or one inside the
    other within the same package ("transformers" and "transformers.generation.utils"), or a class
    named alone ('GenerationMixin' for transformers.generation.utils.GenerationMixin)."""
    if "." not in asked and asked[:1].isupper():
        return entry_module.rsplit(".", 1)[-1] == asked
    if asked.split(".")[0] != entry_module.split(".")[0]:
        return False
    return asked == entry_module or asked.startswith(entry_module + ".") or entry_module.startswith(asked + ".")


def older(version: str | None, than: str) -> bool:
    """version < than in PEP 440's order; False when there is no version or either does not parse. (One
    comparison for the triage's version questions: this release table and the model table.)"""
    from packaging.version import InvalidVersion, Version  # lazy: only a failure that names a version needs it

    try:
        return version is not None and Version(version) < Version(than)
    except InvalidVersion:
        return False


def removed_name(text: str, log_stack: dict[str, str]) -> dict | None:
    """The entry (with `asked`: what the failure asked for) of the first name the text asks for that a
    release removed — unless the log shows that library at a release that still had it."""
    for kind, rx in _ASKS:
        for m in rx.finditer(text):
            module, name = m["module"], m.groupdict().get("name")
            if kind == "kwarg-missing":
                continue     # the hand-checked table lists removals only
            # Python 3.9's message names only "__init__()": the argument's name alone decides, where one
            # library's entries have it
            anonymous = kind == "kwarg" and module == "__init__" and len(
                {x["dist"] for x in _table() if x["kind"] in _KWARG_KINDS and x["name"] == name}) == 1
            for e in _table():
                if kind == "module":
                    full = f"{e['module']}.{e['name']}"
                    hit = e["kind"] == "module-removed" and (module == full or module.startswith(full + "."))
                elif kind == "kwarg":
                    hit = e["kind"] in _KWARG_KINDS and e["name"] == name and (
                        anonymous or e["module"].rsplit(".", 1)[-1] == module.rsplit(".", 1)[-1])
                else:
                    hit = e["kind"] in _NAME_KINDS and e["name"] == name and _same_place(module, e["module"])
                if hit and not older(log_stack.get(e["dist"]), e["removed_in"]):
                    return {**e, "asked": m.group(0)}
    return None


def release_text(e: dict) -> str:
    """One sentence for a fix: what left which release, what to pin, what replaces it."""
    if "text" in e:
        return e["text"]          # the API history's answer (api_change) is already a sentence
    what = {"kwarg-removed": f"the keyword argument {e['name']} of {e['module']}",
            "kwarg-renamed": f"the keyword argument {e['name']} of {e['module']}",
            "module-removed": f"the module {e['module']}.{e['name']}"}.get(e["kind"], f"{e['module']}.{e['name']}")
    verb = "was renamed" if "renamed" in e["kind"] else "was moved" if e["kind"] == "moved" else "was removed"
    instead = f"; use {e['replacement']} instead" if e.get("replacement") else ""
    return (f"{what} {verb} in {e['dist']} {e['removed_in']} (the last release with it: {e['last_with']}): pin "
            f"`{e['dist']}<{e['removed_in']}` (e.g. {e['dist']}=={e['last_with']}) for the code that uses it, or update "
            f"that code{instead}. ")


# ---- the generated API history (knowledge/api_history/<dist>.json) ----------------------------------

def _position(releases: list[str], version: str | None) -> int | None:
    """The index of the newest examined release at or before `version` (None: unknown or older than all)."""
    if not version:
        return None
    pos = None
    for i, r in enumerate(releases):
        if r == version or older(r, version):
            pos = i
    return pos


def _present(ranges: list[list[int]]) -> list[int]:
    return sorted({i for a, b in ranges for i in range(a, b + 1)})


def _holding(last_name: str) -> list[tuple[str, str]]:
    """(dist, full name) of every class or callable whose last name is `last_name`. Each history's raw
    bytes are searched first: only a file that holds the name is parsed (they are megabytes)."""
    needle = f'.{last_name}"'.encode()
    out = []
    for dist in knowledge.api_history_dists():
        if needle in (knowledge.API_HISTORY_DIR / f"{dist}.json").read_bytes():
            h = knowledge.api_history(dist)
            out += [(dist, full) for full in {*h.get("classes", {}), *h.get("callables", {})}
                    if full.rsplit(".", 1)[-1] == last_name]
    return out


def _history_hits(kind: str, module: str, name: str) -> list[tuple[str, str, str, list[list[int]]]]:
    """(dist, what, table, ranges) for each history entry the ask names."""
    hits = []
    if kind in ("name", "module"):
        top = module.split(".")[0]
        dist = next((d for d in knowledge.api_history_dists() if d.replace("-", "_") == top), None)
        if dist is not None:
            h = knowledge.api_history(dist)
            if kind == "module":
                for mod, ranges in h.get("modules", {}).items():
                    if module == mod:
                        hits.append((dist, f"the module {mod}", "modules", ranges))
            elif name in h.get("names", {}).get(module, {}):
                hits.append((dist, f"{module}.{name}", "names", h["names"][module][name]))
            return hits
    owner = module.rsplit(".", 1)[-1]
    for dist, full in _holding(owner):
        h = knowledge.api_history(dist)
        table = "kwargs" if kind == "kwarg" else "attrs"
        ranges = h.get(table, {}).get(full, {}).get(name)
        if ranges:
            what = f"the keyword argument {name} of {full}" if kind == "kwarg" else f"the attribute {name} of {full}"
            hits.append((dist, what, table, ranges))
    return hits


def api_change(text: str, log_stack: dict[str, str], reader: str | None = None) -> dict | None:
    """What the generated API history says about a name the failure asks for: the release that added
    it (the code is newer than the installed library), the one that removed it (the code is older), or
    the only releases that had it — each from the released archives themselves. None when no history
    holds the name, or the log's own release of the library has it (then the cause is elsewhere)."""
    if not knowledge.api_history_dists():
        return None
    for kind, rx in _ASKS:
        for m in rx.finditer(text):
            module, name = m["module"], m.groupdict().get("name") or ""
            if kind == "name" and module[:1].isupper():
                kind_here = "attr"       # "'MatmulLtState' object has no attribute …": a class's attribute
            else:
                kind_here = kind
            hits = _history_hits("kwarg" if kind_here == "kwarg-missing" else kind_here, module, name)
            if any(d in log_stack for d, *_ in hits):
                # a class name several libraries have (LlamaDecoderLayer in transformers and vllm): the log's own
                hits = [h for h in hits if h[0] in log_stack]
            for dist, what, table, ranges in hits:
                h = knowledge.api_history(dist)
                answer = (_gained(dist, what, h["releases"], _present(ranges), log_stack.get(dist), reader)
                          if kind_here == "kwarg-missing" else
                          _answer(dist, what, h["releases"], _present(ranges), log_stack.get(dist), reader))
                if answer is not None:
                    fid_kind = "kwarg-removed" if table == "kwargs" else "attr" if table == "attrs" else \
                        "module-removed" if table == "modules" else "removed"
                    return {**answer, "kind": fid_kind, "reader": reader, "dist": dist, "module": module, "name": name or module,
                            "asked": m.group(0), "source": f"knowledge/api_history/{dist}.json ({h['source'][:120]})"}
    return None


def _answer(dist: str, what: str, releases: list[str], present: list[int], have: str | None,
            reader: str | None) -> dict | None:
    """The sentence of a fix: which releases of `dist` have `what`, against the release the log shows."""
    if not present:
        return None
    n = len(releases)
    pos = _position(releases, have)
    if have and pos is None:
        return None                      # older than every examined release: the history cannot say
    lo, hi = present[0], present[-1]
    if present != list(range(lo, hi + 1)):
        return None                      # removed and re-added: no one release to name
    if pos is not None and lo <= pos <= hi:
        return None                      # the log's release has it: not a version question
    other = (f"; or upgrade {reader}, which uses it, to a release made for the installed {dist}"
             if reader and reader.replace("_", "-") != dist else "; or update the code that uses it")
    seen = f" (the log shows {dist} {have})" if have else ""
    removed = pos > hi if pos is not None else lo == 0 and hi < n - 1
    added = pos < lo if pos is not None else lo > 0 and hi == n - 1
    if removed:
        gone = releases[hi + 1]
        # (`<=` the last release seen with it: a history that examined one release per minor cannot
        # say which patch between the two dropped it)
        return {"removed_in": gone, "last_with": releases[hi],
                "text": f"{what} is in {dist} {releases[hi]} and not in {gone}, the next release examined{seen}: pin "
                        f"`{dist}<={releases[hi]}`{other}. ",
                "evidence": f"{what}: in {dist} {releases[hi]}, not in {gone} (the next release examined)"}
    upper = f",<{releases[hi + 1]}" if hi < n - 1 else ""
    if added:
        until = f" (and dropped it again in {releases[hi + 1]})" if hi < n - 1 else ""
        return {"added_in": releases[lo],
                "text": f"{what} is in {dist} from {releases[lo]} on (not in {releases[lo - 1]}){until}{seen}: the code "
                        f"was written for a newer {dist} — upgrade {dist}, `pip install '{dist}>={releases[lo]}{upper}'`"
                        f"{other.replace('a release made for the installed', 'the release made for that')}. ",
                "evidence": f"{what}: in {dist} {releases[lo]}, not in {releases[lo - 1]} (the release examined before it)"}
    if lo > 0 and hi < n - 1:        # the log shows no release: only a window of releases has it
        return {"added_in": releases[lo], "removed_in": releases[hi + 1], "last_with": releases[hi],
                "text": f"{what} is only in {dist} {releases[lo]} to {releases[hi]} (not in {releases[lo - 1]}, not in "
                        f"{releases[hi + 1]}): install a release of that window, `pip install '{dist}>={releases[lo]}"
                        f"{upper}'`{other}. ",
                "evidence": f"{what}: in {dist} {releases[lo]} to {releases[hi]} only (of the releases examined)"}
    return None


def _gained(dist: str, what: str, releases: list[str], present: list[int], have: str | None,
            reader: str | None) -> dict | None:
    """A required parameter the call does not pass: the release that added it is where the caller's
    code stops fitting — pin below it, or update the caller."""
    if not present or present[0] == 0 or present != list(range(present[0], present[-1] + 1)):
        return None                      # in every release examined (not a version question), or re-added
    lo = present[0]
    pos = _position(releases, have)
    if pos is not None and pos < lo:
        return None                      # the log's release has no such parameter: something else is wrong
    who = f"{reader}'s code" if reader and reader.replace("_", "-") != dist else "the calling code"
    seen = f" (the log shows {dist} {have})" if have else ""
    return {"added_in": releases[lo], "last_with": releases[lo - 1],
            "text": f"{what} exists from {dist} {releases[lo]} on (not in {releases[lo - 1]}){seen} and the call does not "
                    f"pass it: {who} was written for an older {dist} — pin `{dist}<={releases[lo - 1]}`, "
                    f"or update that code to a release made for this {dist}. ",
            "evidence": f"{what}: in {dist} {releases[lo]}, not in {releases[lo - 1]} (the release examined before it)"}
