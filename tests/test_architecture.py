"""The import rules of docs/architecture.md, held by reading every module's imports (AST).

Data flows one way: probes (facts) → rules (pure) → fixes → report. Rules never import probes,
commands, subprocess or the file system; nothing but the CLIs imports `doctor.commands`; no module
imports another package's private name."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PKG = REPO / "doctor"
IO_MODULES = {"subprocess", "os", "shutil", "pathlib", "socket", "tempfile", "glob", "io"}


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, names, line) for every import in a file, relative imports resolved."""
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path.relative_to(path.parents[2])
    pkg = ".".join(rel.with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([mod] if mod else []))
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def modules(under: str) -> list[Path]:
    return sorted(p for p in (PKG / under).rglob("*.py") if "scripts" not in p.parts)


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{line}"


def impure(paths: list[Path]) -> list[str]:
    bad = []
    for path in paths:
        for mod, names, line in imports(path):
            top = mod.split(".")[0]
            if top in IO_MODULES or mod.startswith(("doctor.probes", "doctor.commands", "doctor.fixes",
                                                    "doctor.engine", "doctor.report", "doctor.cache")):
                bad.append(f"{where(path, line)} imports {mod}")
        text = path.read_text()
        if "open(" in text.replace("# open(", ""):
            bad.append(f"{where(path, 0)} calls open()")
    return bad


def test_rules_are_pure():
    bad = impure(modules("rules"))
    assert not bad, "rules must be pure functions of facts:\n" + "\n".join(bad)


def test_only_the_clis_import_commands():
    allowed = {PKG / "cli.py", PKG / "recipes" / "cli.py"}
    bad = [f"{where(p, line)} imports {mod}" for p in PKG.rglob("*.py") if p not in allowed
           and "commands" not in p.relative_to(PKG).parts
           for mod, _, line in imports(p) if mod.startswith("doctor.commands")]
    assert not bad, "\n".join(bad)


def test_no_private_names_across_modules():
    bad = []
    for p in PKG.rglob("*.py"):
        if "scripts" in p.parts:
            continue
        for mod, names, line in imports(p):
            if mod.startswith("doctor") and mod != ".".join(p.relative_to(REPO).with_suffix("").parts):
                bad += [f"{where(p, line)}: from {mod} import {n}" for n in names
                        if n.startswith("_") and not n.startswith("__")]
    assert not bad, "\n".join(bad)


def test_probe_scripts_are_stdlib_only():
    """They run inside the target interpreter, which may lack everything but the standard library."""
    import sys

    stdlib = set(sys.stdlib_module_names)
    bad = []
    for p in sorted((PKG / "probes" / "scripts").glob("*.py")) + sorted((PKG / "recipes" / "scripts").glob("*.py")):
        tree = ast.parse(p.read_text())
        for node in tree.body:  # module level only: the target's own packages are imported inside functions
            for mod in ([a.name for a in node.names] if isinstance(node, ast.Import) else
                        [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []):
                if mod.split(".")[0] not in stdlib and mod != "__future__":
                    bad.append(f"{where(p, node.lineno)} imports {mod} at module level")
    assert not bad, "\n".join(bad)


def test_a_rule_module_that_imports_a_probe_is_caught(tmp_path):
    # The check itself can fail: a rules file importing subprocess is reported.
    bad = tmp_path / "doctor" / "rules"
    bad.mkdir(parents=True)
    (bad / "x.py").write_text("import subprocess\nfrom doctor.probes import run_target_probe\n")
    found = impure([bad / "x.py"])
    assert len(found) == 2 and "imports subprocess" in found[0] and "imports doctor.probes" in found[1]


# -- layers ------------------------------------------------------------------------------------
# docs/architecture.md draws these. A module may import its own layer and the layers below it,
# never one above; rules/ (layer 2) imports only layers 0-1 and other rules. Longest prefix wins.
LAYERS: dict[str, int] = {
    # 0 base: errors, exit codes, uv, where the shipped folders are, the knowledge data, typed facts
    "doctor": 0, "doctor.errors": 0, "doctor.results": 0, "doctor.uv": 0, "doctor.paths": 0, "doctor.knowledge": 0,
    "doctor.units": 0, "doctor.facts": 0, "doctor.processes": 0,
    # 1 domain: findings, the installed distributions, stacks, the known-good set, signatures, logs
    "doctor.findings": 1, "doctor.dists": 1, "doctor.lockfiles": 1, "doctor.stacks": 1, "doctor.reference": 1,
    "doctor.signatures": 1, "doctor.logparse": 1, "doctor.failure": 1,
    # 2 rules: pure functions from facts to findings
    "doctor.rules": 2,
    # 3 services: probes, the engine, fixes, triage, recipes, container, bundle
    "doctor.probes": 3, "doctor.cache": 3, "doctor.engine": 3, "doctor.triage": 3, "doctor.lockfiles.compile": 3,
    "doctor.fixes": 3, "doctor.recipes": 3, "doctor.container": 3, "doctor.bundle": 3, "doctor.target": 3,
    "doctor.emitters": 3,
    # 4 top: what the user runs and sees
    "doctor.report": 4, "doctor.commands": 4, "doctor.cli": 4, "doctor.__main__": 4, "doctor.recipes.cli": 4,
}


def layer_of(module: str) -> int | None:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None)
    return LAYERS[best] if best is not None else None


def module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_violations(paths: list[Path]) -> list[str]:
    bad = []
    for p in paths:
        src = module_of(p)
        own = layer_of(src)
        if own is None:
            bad.append(f"{where(p, 1)}: {src} has no layer (add it to LAYERS and docs/architecture.md)")
            continue
        for mod, names, line in imports(p):  # every import, function-local ones too
            if not mod.startswith("doctor"):
                continue
            targets = [f"{mod}.{n}" if layer_of(f"{mod}.{n}") is not None and (PKG.parent / f"{mod}.{n}".replace(".", "/")).with_suffix(".py").exists()
                       or (PKG.parent / f"{mod}.{n}".replace(".", "/")).is_dir() else mod for n in names or [""]]
            for t in dict.fromkeys(targets):
                lt = layer_of(t)
                if lt is None:
                    continue
                if lt > own:
                    bad.append(f"{where(p, line)}: {src} (layer {own}) imports {t} (layer {lt})")
                elif own == 2 and lt == 2 and not t.startswith("doctor.rules"):
                    bad.append(f"{where(p, line)}: rules import {t}")
    return bad


def test_layers_hold_at_any_depth():
    bad = layer_violations([p for p in PKG.rglob("*.py") if "scripts" not in p.parts and "_shipped" not in p.parts])
    assert not bad, "imports against the layers of docs/architecture.md:\n" + "\n".join(bad)


def test_an_upward_import_inside_a_function_is_caught(tmp_path):
    fake = PKG / "rules" / "_layer_probe_tmp.py"
    fake.write_text("def f():\n    from doctor.triage import triage_text\n    return triage_text\n")
    try:
        bad = layer_violations([fake])
    finally:
        fake.unlink()
    assert len(bad) == 1 and "imports doctor.triage (layer 3)" in bad[0]


def _function_local_doctor_imports() -> tuple[int, list[tuple[Path, int, str]]]:
    total, local = 0, []
    for p in PKG.rglob("*.py"):
        if "scripts" in p.parts or "_shipped" in p.parts:
            continue
        lines = p.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("doctor"):
                    local.append((p, node.lineno, lines[node.lineno - 1]))
                elif isinstance(node, ast.Import) and any(a.name.startswith("doctor") for a in node.names):
                    local.append((p, node.lineno, lines[node.lineno - 1]))
        total += sum(1 for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("doctor")
                     or isinstance(n, ast.Import) and any(a.name.startswith("doctor") for a in n.names))
    return total, sorted(set(local))


def test_function_local_imports_are_few_and_say_why():
    """The graph is read at the top of each file: a doctor.* import inside a function is the
    exception (start-up time, a registration loop), at most 15 %, each with its reason on the line."""
    total, local = _function_local_doctor_imports()
    assert total and len(local) / total <= 0.15, f"{len(local)} of {total} doctor.* imports sit inside functions"
    unexplained = [f"{where(p, n)}: {text.strip()}" for p, n, text in local if "#" not in text]
    assert not unexplained, "a function-local import says why on its line:\n" + "\n".join(unexplained)
