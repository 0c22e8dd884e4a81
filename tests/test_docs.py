"""Docs that are data: findings.md matches the knowledge; README's test command is what CI runs."""

from __future__ import annotations

import re

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
