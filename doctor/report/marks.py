"""The one place that knows how a status is drawn: ✓ ok · ! warning · ✗ error · - skipped · ‼ crash,
and the ASCII marks for output that cannot encode them (PYTHONIOENCODING=ascii, LANG=C)."""

from __future__ import annotations

MARK = {"ok": ("✓", "green"), "info": ("i", "cyan"), "warning": ("!", "yellow"), "error": ("✗", "red"),
        "skipped": ("-", "dim"), "crash": ("‼", "magenta")}
ASCII_MARK = {"ok": "ok", "info": "i", "warning": "!", "error": "X", "skipped": "-", "crash": "!!"}


def mark_for(status: str, encoding: str | None = None) -> tuple[str, str]:
    """(mark, colour) of a status for an output of that encoding."""
    mark, colour = MARK[status]
    try:
        mark.encode(encoding or "utf-8")
    except (UnicodeEncodeError, LookupError):
        mark = ASCII_MARK[status]
    return mark, colour


def symbol(status: str, stream=None) -> str:
    """The mark alone, for plain (non-rich) output to `stream`."""
    return mark_for(status, getattr(stream, "encoding", None))[0]
