"""The plain printer (doctor/report/console.py) prints what rich prints for output that is not a
terminal — the same text for the real reports: `doctor triage` on every pasted log of the corpus, and
`doctor check` on recorded facts (a CPU env with findings, the H200's). Markup edge cases are checked
against rich's own parser too."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from rich.markup import escape as rich_escape

from doctor.engine import recheck_facts
from doctor.report.console import PlainConsole, console_for, escape
from doctor.report.text import render, render_triage
from doctor.triage import triage_text

DATA = Path(__file__).resolve().parents[1] / "data"


def _both(draw) -> tuple[str, str]:
    rich_out, plain_out = io.StringIO(), io.StringIO()
    draw(Console(file=rich_out, force_terminal=False, highlight=False, soft_wrap=True, emoji=False))
    draw(PlainConsole(plain_out))
    return rich_out.getvalue(), plain_out.getvalue()


def test_triage_reports_print_the_same_text_as_rich():
    logs = sorted((DATA / "corpus").rglob("*.log"))
    assert len(logs) > 300
    for log in logs:
        t = triage_text(log.read_text(encoding="utf-8", errors="replace"), str(log))
        want, got = _both(lambda c: render_triage(t, c, python="/env/bin/python"))
        assert got == want, log


@pytest.mark.parametrize("facts_file", ["facts-working.json", "h200-py312-facts.json"])
def test_check_reports_print_the_same_text_as_rich(tmp_path, facts_file):
    doc = tmp_path / "check.json"
    doc.write_text(json.dumps({"schema_version": 1, "facts": json.loads((DATA / facts_file).read_text())}))
    result = recheck_facts(str(doc))
    for verbose in (False, True):
        want, got = _both(lambda c: render(result, c, verbose=verbose))
        assert got == want and got.count("\n") > 5


@pytest.mark.parametrize("text", [
    "plain", "[bold]b[/] and [dim]d[/dim]", "a \\[bold] literal", "two \\\\[bold]x[/] slashes", "[x=1]y[/]",
    "list[int] and dict[str, int]", "path C:\\dir\\", "[@click]z[/]", "[#ff0000]red[/]", "emoji :x: kept",
])
def test_markup_reads_as_rich_reads_it(text):
    want, got = _both(lambda c: c.print(text))
    assert got == want
    assert escape(text) == rich_escape(text)
    want, got = _both(lambda c: c.print(escape(text)))   # a log line quoted into a report
    assert got == want and (got == text + "\n" or text.endswith("\\"))


def test_a_terminal_gets_rich_and_a_pipe_the_plain_printer(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    assert isinstance(console_for(io.StringIO()), PlainConsole)

    class Tty(io.StringIO):
        def isatty(self):
            return True
    assert isinstance(console_for(Tty()), Console)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert isinstance(console_for(io.StringIO()), Console)
