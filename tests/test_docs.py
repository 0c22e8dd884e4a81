"""Docs that are data: findings.md matches the knowledge; README's test command is what CI runs."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO
from doctor.report.findings_doc import render


def test_findings_md_matches_the_knowledge_data():
    assert (REPO / "docs" / "findings.md").read_text() == render(), \
        "regenerate: python -m doctor.report.findings_doc > docs/findings.md"


def test_readme_opens_with_setup_check_and_test_commands_and_ci_runs_the_test_command():
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    setup, check, tests = (line.split("  #")[0].strip() for line in block[:3])
    assert "pip install -e" in setup and "doctor check" in check
    assert tests in (REPO / ".ci" / "run").read_text()


def _lock_pins(stack: str, python: str = "3.11") -> dict[str, str]:
    from doctor.lockfiles import parse_lockfile

    path = REPO / "lockfiles" / f"{stack}-py{python}.txt"
    return {n: d["version"] for n, d in parse_lockfile(path).items()} if path.is_file() else {}


def _agrees(claimed: str, pinned: str) -> bool:
    """'79' agrees with 79.0.1, '2.4.0 (cu121)' with 2.4.0; '2.4' does not agree with 2.5.1."""
    claimed = claimed.split(" ")[0].split("+")[0]
    return pinned == claimed or pinned.startswith(claimed + ".")


def test_the_versions_the_docs_state_are_the_locked_ones():
    # issue 28: README and docs/stacks.md said pyarrow 25 after the locks moved to 20.0.0
    drift = []
    table = (REPO / "docs" / "stacks.md").read_text()
    head = re.search(r"^\| stack \| (.+) \|$", table, re.M).group(1).split(" | ")
    for row in re.findall(r"^\| `([\w-]+)`[^|]* \| (.+) \|$", table, re.M):
        stack, cells = row[0], row[1].split(" | ")
        pins = _lock_pins(stack)
        for dist, cell in zip(head, cells):
            if pins and cell not in ("–", "-") and dist in pins and not _agrees(cell, pins[dist]):
                drift.append(f"docs/stacks.md {stack}: {dist} {cell}, the lock pins {pins[dist]}")
    readme = (REPO / "README.md").read_text()
    bullet = re.search(r"^- `verl041-vllm063post1` \(default\): (.+?)(?:\. Also|\n- )", readme, re.M | re.S).group(1)
    pins = _lock_pins("verl041-vllm063post1")
    for dist, ver in re.findall(r"([a-z][\w-]*) (\d[\w.]*)", bullet):
        if dist in pins and not _agrees(ver, pins[dist]):
            drift.append(f"README.md: {dist} {ver}, the lock pins {pins[dist]}")
    assert not drift, "\n".join(drift)


# -- every command the docs show (issue 28: "every docs code block") ---------------------------------------

def doc_commands() -> list[tuple[str, str]]:
    """(file, command) for each command a doc's code block shows: `$ ` lines in any block, every line of
    a bash/sh block. docs/findings.md is generated from the findings' fixes, whose filled-in commands
    tests/commands/test_printed_commands.py runs."""
    out = []
    for md in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        if md.name == "findings.md":
            continue
        lang = None
        for line in md.read_text().splitlines():
            if line.startswith("```"):
                lang = None if lang is not None else (line[3:].strip() or "text")
                continue
            if lang is None:
                continue
            if line.startswith("$ "):
                out.append((md.name, line[2:].strip()))
            elif lang in ("bash", "sh") and line.strip() and not line.lstrip().startswith("#"):
                out.append((md.name, line.strip()))
    return out


def test_every_command_the_docs_show_parses_and_names_what_exists():
    """Each doctor/recipes command parses with the doctor's own parsers; each `python X.py` names a
    file of the repo, each `python -m M` a module the doctor's venv has. (Running them is the job of
    the commands' own tests: several take minutes or need a GPU.)"""
    import importlib.util
    import shlex

    from doctor.cli import build_parser
    from doctor.recipes.cli import build_parser as recipes_parser

    import os
    import shutil

    # a new shell: no venv active, nothing of the doctor's venv on PATH (README's setup makes .venv/)
    new_shell_path = ":".join(d for d in os.environ.get("PATH", "").split(":") if ".venv" not in d)
    builtins = {"echo", "cd", "export", "unset", "source", ".", "set"}
    checked, problems = 0, []
    for name, command in doc_commands():
        try:   # the shell's own split: quotes kept together, &&, ||, ;, | between commands
            lex = shlex.shlex(command, posix=True, punctuation_chars=True)
            lex.whitespace_split, lex.commenters = True, "#"
            tokens = list(lex)
        except ValueError as exc:
            problems.append(f"{name}: {command}: {exc}")
            continue
        parts, cur = [], []
        for tok in tokens:
            if tok in ("&&", "||", ";", "|", "&"):
                parts.append(cur)
                cur = []
            else:
                cur.append(tok)
        for argv in [*parts, cur]:
            while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):   # VAR=value prog …
                argv = argv[1:]
            if not argv:
                continue
            prog = os.path.expanduser(argv[0])
            if "/" in prog:
                if not (Path(prog) if prog.startswith("/") else REPO / prog).exists() and ".cache/verl-doctor-tests" not in prog:
                    problems.append(f"{name}: {command}: {argv[0]} does not exist")
            elif prog not in builtins and shutil.which(prog, path=new_shell_path) is None:
                problems.append(f"{name}: {command}: a new shell has no `{prog}`")
            base = argv[0].rsplit("/", 1)[-1]
            if base in ("doctor", "recipes"):
                parser = build_parser() if base == "doctor" else recipes_parser()
                try:
                    parser.parse_args(argv[1:])
                except SystemExit:
                    problems.append(f"{name}: {command}: the arguments do not parse")
                checked += 1
            elif base.startswith("python") and len(argv) > 2 and argv[1] == "-m":
                mod = argv[2]
                if mod.split(".")[0] in ("doctor", "benchmarks") and importlib.util.find_spec(mod) is None:
                    problems.append(f"{name}: {command}: no module {mod}")
                checked += 1
            elif base.startswith("python") and len(argv) > 1 and argv[1].endswith(".py"):
                if not (REPO / argv[1]).is_file():
                    problems.append(f"{name}: {command}: no file {argv[1]}")
                checked += 1
    assert checked >= 20, checked
    assert not problems, "\n".join(problems)
