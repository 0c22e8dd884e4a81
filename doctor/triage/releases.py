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
            for e in _table():
                if kind == "module":
                    full = f"{e['module']}.{e['name']}"
                    hit = e["kind"] == "module-removed" and (module == full or module.startswith(full + "."))
                elif kind == "kwarg":
                    # Python 3.9's message names only "__init__()": the argument's name alone decides,
                    # where one library's entries have it
                    anonymous = module == "__init__" and len({x["dist"] for x in _table()
                                                              if x["kind"] in _KWARG_KINDS and x["name"] == name}) == 1
                    hit = e["kind"] in _KWARG_KINDS and e["name"] == name and (
                        anonymous or e["module"].rsplit(".", 1)[-1] == module.rsplit(".", 1)[-1])
                else:
                    hit = e["kind"] in _NAME_KINDS and e["name"] == name and _same_place(module, e["module"])
                if hit and not older(log_stack.get(e["dist"]), e["removed_in"]):
                    return {**e, "asked": m.group(0)}
    return None


def release_text(e: dict) -> str:
    """One sentence for a fix: what left which release, what to pin, what replaces it."""
    what = {"kwarg-removed": f"the keyword argument {e['name']} of {e['module']}",
            "kwarg-renamed": f"the keyword argument {e['name']} of {e['module']}",
            "module-removed": f"the module {e['module']}.{e['name']}"}.get(e["kind"], f"{e['module']}.{e['name']}")
    verb = "was renamed" if "renamed" in e["kind"] else "was moved" if e["kind"] == "moved" else "was removed"
    instead = f"; use {e['replacement']} instead" if e.get("replacement") else ""
    return (f"{what} {verb} in {e['dist']} {e['removed_in']} (the last release with it: {e['last_with']}): pin "
            f"`{e['dist']}<{e['removed_in']}` (e.g. {e['dist']}=={e['last_with']}) for the code that uses it, or update "
            f"that code{instead}. ")
