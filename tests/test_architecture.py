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
