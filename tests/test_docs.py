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
