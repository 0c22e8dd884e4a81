"""Helpers shared by rule families (pure)."""

from __future__ import annotations

import functools
import re

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from doctor import knowledge


def installed(facts: dict, dist: str) -> str | None:
    d = facts["distributions"].get(canonicalize_name(dist))
    return d["version"] if d else None


def satisfies(version: str, spec: str) -> bool:
    try:
        return Version(version) in SpecifierSet(spec, prereleases=True)
    except InvalidVersion:
        return False


@functools.lru_cache(maxsize=None)
def _signatures() -> list[tuple[str, re.Pattern, str]]:
    return [(s["id"], re.compile(s["pattern"]), s["source"]) for s in knowledge.load("signatures")
            if "import" in s["contexts"]]


def classify(message: str) -> str | None:
    """The finding ID an error message proves, by knowledge/signatures.yaml; None if unknown."""
    for fid, rx, _ in _signatures():
        if rx.search(message):
            return fid
    return None


def import_failures(facts: dict) -> list[tuple[str, dict, str | None]]:
    """(module, failure info, classified ID) for every failed import, in import order."""
    out = []
    for module, info in ((facts.get("imports") or {}).get("modules") or {}).items():
        if not info.get("ok"):
            out.append((module, info, classify(info.get("text") or info.get("message", ""))))
    return out


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


def exception_summary(lines: list[str]) -> list[str]:
    """From a traceback's text: the innermost frame and the exception line (the last ones)."""
    import re as _re

    frames = [ln.strip() for ln in lines if _re.match(r'\s*File "', ln)]
    excs = [ln.strip() for ln in lines if _re.match(r"\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Warning)\b", ln)]
    return ([f"innermost frame: {frames[-1]}"] if frames else []) + ([excs[-1]] if excs else [])


def failure_evidence(module: str, info: dict) -> str:
    chain = info.get("chain") or []
    where = f" (raised at {chain[-1]})" if chain else ""
    return f"import {module}: {info.get('message')}{where}"


def closest_stack(facts: dict) -> tuple[dict, int, int]:
    """The known stack whose constraints the target meets best (verl and vllm pins weigh most)."""
    w = knowledge.load("system")["closest_stack"]
    best = None
    for stack in knowledge.stacks().values():
        met = total = score = 0
        for c in stack["constraints"]:
            v = installed(facts, c["dist"])
            if v is None:
                continue
            total += 1
            if satisfies(v, c["spec"]):
                met += 1
                score += w["pinned_weight"] if c["dist"] in w["pinned"] else w["weight"]
        key = (score, bool(stack.get("default")))
        if best is None or key > best[0]:
            best = (key, stack, met, total)
    assert best is not None, "knowledge/stacks/ has no stack"
    return best[1], best[2], best[3]


def active_stack(facts: dict, ctx) -> dict:
    return ctx.stack or closest_stack(facts)[0]


def differs_from_reference(facts: dict, ctx) -> dict[str, tuple[str, str | None]]:
    """{dist: (installed, known-good or None)} for the stack's distributions that differ from the
    known-good set (ctx.reference): another version, or missing there though locked."""
    ref = (ctx.reference or {}).get("pins") or {}
    out: dict[str, tuple[str, str | None]] = {}
    for name, locked in ref.items():
        if user_project(facts, name):  # the user's own code differs by design (version.user-project)
            continue
        have = installed(facts, name)
        if have is None:
            out[name] = ("missing", locked)
            continue
        try:
            same = Version(have).public == Version(locked).public
        except InvalidVersion:
            same = have == locked
        if not same:
            out[name] = (have, locked)
    return out


# Where a message names a library: `from 'pydantic'`, a missing module, a path in site-packages, or a
# library's own version check ("tokenizers>=0.21,<0.22 is required … but found tokenizers==0.20.3").
_MODULE_IN_TEXT = re.compile(r"from '([A-Za-z_][\w]*)|No module named '([A-Za-z_]\w*)|(?:site|dist)-packages/([A-Za-z_]\w*)"
                             r"|but found ([A-Za-z][\w.-]*)==")


def culprits(facts: dict, ctx, info: dict) -> list[str]:
    """The distributions on a failing import's path that differ from the known-good set: those
    its frames ran in, and those its message names (`from 'pydantic'`, a .so path, a missing module)."""
    diff = differs_from_reference(facts, ctx)
    if not diff:
        return []
    names: list[str] = [canonicalize_name(d) for d in info.get("chain_dists") or []]
    for m in _MODULE_IN_TEXT.finditer(info.get("text") or info.get("message") or ""):
        top = next(g for g in m.groups() if g)
        names.append(canonicalize_name(top))
        names.append(canonicalize_name(top.replace("_", "-")))
    if info.get("missing_module"):
        names.append(canonicalize_name(info["missing_module"].split(".")[0]))
    return [str(n) for n in dict.fromkeys(n for n in names if n in diff)]


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"


def missing_stack_dists(facts: dict, stack: dict) -> list[str]:
    """The stack's distributions that are not installed: its top-level requirements, then the
    distributions of the modules the imports probe loads (pyarrow, triton, xformers: verl's and
    vLLM's own requirements), except those a finding of their own reports when missing
    (findings.yaml `missing_dist`)."""
    from packaging.requirements import Requirement

    own = {canonicalize_name(d["missing_dist"]) for d in knowledge.load("findings") if d.get("missing_dist")}
    names = [canonicalize_name(Requirement(text).name) for text in stack.get("requirements", [])]
    names += [canonicalize_name(m.split(".")[0]) for m in knowledge.load("python_env")["stack_modules"]]
    return [n for n in dict.fromkeys(names) if n not in own and n not in facts["distributions"]]


def fails_for_missing_dist(info: dict, missing: list[str]) -> bool:
    """An import that fails only because a missing distribution's top-level module is absent."""
    mod = (info.get("missing_module") or "").split(".")[0]
    return bool(mod) and info.get("type") == "ModuleNotFoundError" and canonicalize_name(mod) in missing


def stack_lockfile_for(facts: dict, stack: dict) -> str:
    """The shipped lockfile for the target's Python, or, when the stack has none for it, the one for
    the newest Python it is locked for (python.version-unverified says so)."""
    from doctor.lockfiles import stack_lockfile

    pyver = facts["markers"]["python_version"]
    return str(stack_lockfile(stack["name"], pyver if pyver in stack["python"] else stack["python"][-1]))


def cause_of(text: str, python: str, facts: dict | None = None, **known):
    """The root cause the signature table (its log entries) names in an error text that a probe
    captured — vLLM's registry child's stderr, the Ray smoke's error and logs, a dry-run step's
    exception — or None. The caller lists its own finding under it (caused_by). The installed
    versions (facts) fill the finding's {protobuf}, {ray}, … instead of the table's defaults."""
    from doctor.triage import causes_in_text

    if facts and facts.get("distributions"):
        known = {**{n.replace("-", "_"): d["version"] for n, d in facts["distributions"].items()}, **known}
    causes = causes_in_text(text, python, **known) if text.strip() else []
    return causes[0] if causes else None


def checkout_of(dist: dict) -> str | None:
    """The user's own checkout a distribution record (the distributions probe's) is installed from
    (pip install -e, a source tree on sys.path), or None."""
    return dist.get("project") or (dist.get("path") if dist.get("editable") else None)


def user_project(facts: dict, dist: str) -> str | None:
    """The user's own checkout a distribution is installed from, or None: that code is the
    project's, judged by what it does, never replaced."""
    return checkout_of(facts["distributions"].get(canonicalize_name(dist)) or {})


def user_projects(facts: dict) -> dict[str, str]:
    """name -> checkout, for every distribution of the target that is the user's own code."""
    return {n: p for n in facts.get("distributions") or {} if (p := user_project(facts, n))}
