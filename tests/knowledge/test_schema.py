"""Every shipped knowledge file validates against doctor/knowledge/schema.py, and a typo in one is a
single line that names the file, the entry and the field (in-process and through the real CLI)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import REPO
from doctor import knowledge
from doctor.knowledge.schema import SCHEMAS, KnowledgeError, validate


def test_every_shipped_file_validates():
    names = sorted(p.stem for p in knowledge.KNOWLEDGE_DIR.glob("*.yaml"))
    assert set(names) <= set(SCHEMAS), f"knowledge files without a schema: {set(names) - set(SCHEMAS)}"
    for name in names:
        knowledge.load(name)
    assert len(knowledge.stacks()) >= 2


@pytest.mark.parametrize("edit, message", [
    (lambda d: d[0].update(sevrity=d[0].pop("severity")),
     "findings.yaml, entry 1 (id stack.verl-rejects-vllm): unknown field 'sevrity' (did you mean 'severity'?)"),
    (lambda d: d[2].update(severity="fatal"),
     "entry 3 (id {id2}): field 'severity': 'fatal' is not one of error, warning, info, from-stack"),
    (lambda d: d[1].pop("title"), "entry 2 (id {id1}): missing field 'title'"),
    (lambda d: d[0]["fix"].update(automatic=True), "field 'fix'.automatic is derived from fix.plan"),
    (lambda d: d[1].update(scope="machine"), "entry 2 (id {id1}): field 'scope': 'machine' is not one of host, environment"),
    (lambda d: d[0]["fix"]["plan"].pop("kind"), "missing field 'kind'"),
])
def test_a_typo_is_one_line_naming_file_entry_and_field(edit, message):
    data = yaml.safe_load((knowledge.KNOWLEDGE_DIR / "findings.yaml").read_text())
    ids = {f"id{i}": data[i]["id"] for i in range(3)}
    edit(data)
    with pytest.raises(KnowledgeError) as exc:
        validate("findings", data, "doctor/knowledge/findings.yaml")
    text = str(exc.value)
    assert "\n" not in text and message.format(**ids) in text, text


def test_a_regex_that_does_not_compile_is_named():
    data = yaml.safe_load((knowledge.KNOWLEDGE_DIR / "signatures.yaml").read_text())
    data[0]["pattern"] = "vllm version (?P<v"
    with pytest.raises(KnowledgeError) as exc:
        validate("signatures", data, "doctor/knowledge/signatures.yaml")
    assert "entry 1 (id stack.verl-rejects-vllm): field 'pattern'" in str(exc.value)
    assert "does not compile" in str(exc.value)


def test_the_cli_reports_a_broken_file_in_one_line(tmp_path):
    # A real copy of the package with one typo, run as a user would run it.
    shutil.copytree(REPO / "doctor", tmp_path / "doctor", ignore=shutil.ignore_patterns("__pycache__"))
    f = tmp_path / "doctor" / "knowledge" / "findings.yaml"
    f.write_text(f.read_text().replace("  severity: error\n", "  sevrity: error\n", 1))
    proc = subprocess.run([sys.executable, "-m", "doctor", "explain", "stack.verl-rejects-vllm"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "findings.yaml, entry 1 (id stack.verl-rejects-vllm): unknown field 'sevrity'" in lines[0]


def test_sources_that_name_a_file_of_this_repo_name_one_that_exists():
    """A user can open what a source cites: repo paths in knowledge sources exist in this repository."""
    import re

    cited = set()
    for path in list(knowledge.KNOWLEDGE_DIR.glob("*.yaml")) + list(knowledge.STACKS_DIR.glob("*.yaml")):
        for m in re.finditer(r"(?<![\w/.-])((?:docs|tests/data|doctor)/[\w./-]*\w)", path.read_text()):
            cited.add(m.group(1).rstrip("."))
    missing = sorted(p for p in cited if not (REPO / p).exists() and not any((REPO / p).parent.glob(
        (REPO / p).name + "*")))
    assert not missing, missing
    assert cited, "no repo paths found: the pattern is stale"
