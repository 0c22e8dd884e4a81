"""Where the text reports are printed. On a terminal: rich's Console (colour, styles). Anywhere else —
a pipe, a file, `| tee`, CI — rich prints the same text without styles, and so does PlainConsole here,
which reads rich's markup grammar (rich.markup: RE_TAGS, escape) without importing rich: that import
was a sixth of a short `doctor triage` (issue 25's start-up bar). tests/report/test_console.py checks
that both print the same text for the real reports. Emoji codes (":x:") are printed as written on
both: a log line quoted in a report is shown as it was."""

from __future__ import annotations

import os
import re
import sys
from typing import IO, TYPE_CHECKING, Union

if TYPE_CHECKING:  # a type only: importing rich is what this module avoids
    from rich.console import Console

# rich.markup.RE_TAGS: a tag is "[" + a letter, #, / or @ … "]", escaped by an odd number of backslashes
_TAGS = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")
_ESCAPE = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def escape(markup: str) -> str:
    """rich.markup.escape: text that will not be read as markup."""
    markup = _ESCAPE.sub(lambda m: f"{m[1]}{m[1]}\\{m[2]}", markup)
    if markup.endswith("\\") and not markup.endswith("\\\\"):
        return markup + "\\"
    return markup


def plain(markup: str) -> str:
    """The text rich prints for `markup` without styles: tags dropped, escapes resolved."""
    if "[" not in markup:
        return markup
    out, position = [], 0
    for m in _TAGS.finditer(markup):
        full, escapes, _tag = m.groups()
        start, end = m.span()
        out.append(markup[position:start])
        position = end
        backslashes, escaped = divmod(len(escapes), 2)
        out.append("\\" * backslashes)
        if escaped:
            out.append(full[len(escapes):])
    out.append(markup[position:])
    return "".join(out)


class PlainConsole:
    """The part of rich's Console the reports use — print() and encoding — for output that is not a terminal."""

    def __init__(self, file: IO[str]):
        self.file = file

    @property
    def encoding(self) -> str:
        return (getattr(self.file, "encoding", None) or "utf-8").lower()

    def print(self, *objects: object, sep: str = " ", end: str = "\n") -> None:
        try:
            self.file.write(plain(sep.join(str(o) for o in objects)) + end)
            self.file.flush()
        except BrokenPipeError:  # `doctor … | head`: stop quietly, as rich's Console.on_broken_pipe does
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(1)


Printer = Union["Console", PlainConsole]


def _styled(stream: IO[str]) -> bool:
    """Would rich style this stream? A terminal, or colour forced (rich reads FORCE_COLOR, TTY_COMPATIBLE)."""
    if os.environ.get("FORCE_COLOR") or os.environ.get("TTY_COMPATIBLE") == "1":
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def console_for(file: IO[str] | None = None, stderr: bool = False) -> Printer:
    """The report's printer for `file` (default stdout, or stderr)."""
    stream = file or (sys.stderr if stderr else sys.stdout)
    if _styled(stream):
        from rich.console import Console  # noqa: F811 - the terminal's printer, imported only for one

        return Console(file=file, stderr=stderr, highlight=False, soft_wrap=True, emoji=False)
    return PlainConsole(stream)
