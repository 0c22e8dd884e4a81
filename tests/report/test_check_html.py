"""`doctor check --html FILE`: the self-contained report, read back with a real HTML parser (and
rendered by headless Chromium where .ci/run installed it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from conftest import envs, run_doctor

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SECRETS = {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz123456",
           "RAY_ADDRESS": "ray://admin:hunter2pass@10.0.0.1:10001"}


class Page(HTMLParser):
    """Finding blocks (data-finding-id → their text), and the embedded JSON document."""

    def __init__(self):
        super().__init__()
        self.findings: dict[str, str] = {}
        self.embedded = ""
        self._finding = None
        self._depth = 0
        self._in_json = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("id") == "doctor-check-json":
            self._in_json = True
        if self._finding is not None and tag == "div":
            self._depth += 1
        elif tag == "div" and "data-finding-id" in a:
            self._finding, self._depth = a["data-finding-id"], 1
            self.findings.setdefault(self._finding, "")   # one ID may be reported twice (two overlapping pairs)

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_json = False
        if self._finding is not None and tag == "div":
            self._depth -= 1
            if self._depth == 0:
                self._finding = None

    def handle_data(self, data):
        if self._in_json:
            self.embedded += data
        elif self._finding is not None:
            self.findings[self._finding] += data + "\n"


@pytest.mark.realenv
def test_html_report_holds_every_finding_with_its_evidence_and_the_json(tmp_path):
    py = str(envs.build("transformers5"))
    out = tmp_path / "report.html"
    proc = run_doctor("check", "--json", "--html", str(out), "--python", py, env=SECRETS)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)  # --json stays the only thing on stdout
    text = out.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    assert set(page.findings) == {f["id"] for f in doc["findings"]}
    for f in doc["findings"]:  # evidence that holds '<' and '>' (version specifiers) reads back intact
        for e in f["evidence"]:
            assert e in page.findings[f["id"]], (f["id"], e)
    assert "needs transformers>=4.45.2,<=4.47.1" in page.findings["version.transformers"]
    links = re.findall(r'<a href="(https://[^"]+)"', text)  # sources' URLs are links, not plain text
    cited = [u for f in doc["findings"] for s in f["sources"] for u in re.findall(r"https://\S+", s)]
    assert cited and links and all(any(u.startswith(link) for link in links) for u in cited[:3]), (cited[:3], links[:3])
    embedded = json.loads(page.embedded)
    assert embedded["findings"] == doc["findings"] and embedded["target"] == doc["target"]
    for secret in ("hf_abcdefghijklmnopqrstuvwxyz123456", "hunter2pass"):
        assert secret not in text
    assert ">transformers</td><td>5.0.0<" in text

    if CHROMIUM:  # a real browser builds the same DOM
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()],
                             capture_output=True, text=True, timeout=120).stdout
        assert 'data-finding-id="vllm.tokenizer-incompatible"' in dom and "doctor-check-json" in dom


def test_html_output_path_is_checked_before_any_probe_and_never_overwrites_a_users_file(tmp_path):
    mine = tmp_path / "notes.html"
    mine.write_text("<html>my own notes</html>")
    proc = run_doctor("check", "--fast", "--html", str(mine))
    assert proc.returncode == 2 and "not a verl-doctor report" in proc.stderr and "Traceback" not in proc.stderr
    assert mine.read_text() == "<html>my own notes</html>"
    proc = run_doctor("check", "--fast", "--html", str(tmp_path / "missing" / "r.html"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    # an earlier report of the doctor is replaced
    report = tmp_path / "r.html"
    assert run_doctor("check", "--fast", "--html", str(report)).returncode in (0, 1)
    report.write_text(report.read_text() + "<!-- the earlier report -->")
    assert run_doctor("check", "--fast", "--html", str(report)).returncode in (0, 1)
    assert "the earlier report" not in report.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left

