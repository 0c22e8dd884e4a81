"""The typed results every command shares: severities, check statuses, exit codes, checks, fixes.

The enums are `str`/`int` subclasses, so the JSON documents and the exit statuses a user sees are
the plain values ("error", 1), and `==` against those values still holds."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable


class _Value(str, enum.Enum):
    """A str enum that prints, formats and hashes as its value: "error" and Severity.ERROR are the
    same text in a report and the same dict key."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    __hash__ = str.__hash__


class Severity(_Value):
    """How bad a finding is. Order: worst first."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _SEVERITY_ORDER.index(self)


_SEVERITY_ORDER = (Severity.ERROR, Severity.WARNING, Severity.INFO)


def worst(severities: Iterable[str]) -> Severity | None:
    """The worst of some severities, None for none."""
    return min((Severity(s) for s in severities), key=lambda s: s.rank, default=None)


class Status(_Value):
    """What became of one check: passed, found something (the worst severity), could not look
    (skipped, with why), or the doctor's own rule raised (crash, with a doctor.* finding)."""

    OK = "ok"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    SKIPPED = "skipped"
    CRASH = "crash"

    @classmethod
    def of(cls, severities: Iterable[str]) -> "Status":
        w = worst(severities)
        return cls.OK if w is None else cls(w.value)


class ExitCode(enum.IntEnum):
    """One meaning per code, for every command of `doctor` and `recipes`."""

    OK = 0            # nothing that needs attention (--strict: not even a warning)
    PROBLEMS = 1      # the command found problems: error findings, a missed band, a failed fix
    USAGE = 2         # bad usage or bad input: one line on stderr, nothing was done
    INCOMPLETE = 3    # something the command ran did not complete (a probe, a rule, the run) and no
                      # error was found in what it could see
    INTERRUPTED = 130  # Ctrl-C, TERM or HUP: everything the doctor started was stopped


@dataclass
class Check:
    """One line of a report: what was checked, in which area, and what came of it."""

    check: str
    area: str
    status: Status
    ids: list[str] = field(default_factory=list)
    why: str | None = None          # for skipped / crash: why it could not look

    def to_dict(self) -> dict:
        d = {"check": self.check, "area": self.area, "status": self.status.value, "ids": list(self.ids)}
        if self.why is not None:
            d["why"] = self.why
        return d


@dataclass
class Fix:
    """How to fix a finding: a summary, the commands, and whether `doctor fix` can apply it."""

    summary: str
    commands: list[str] = field(default_factory=list)
    automatic: bool = False

    def to_dict(self) -> dict:
        return {"summary": self.summary, "commands": list(self.commands), "automatic": self.automatic}
