"""probe.could-not-run: a probe that timed out or crashed leaves its rules without facts."""

from __future__ import annotations

from doctor.findings import make
from doctor.rules.registry import rule


@rule("every probe ran", "doctor", emits=("probe.could-not-run",))
def could_not_run(facts, ctx):
    for name, error in sorted(ctx.probe_errors.items()):
        yield make("probe.could-not-run", [f"{name}: {error}"], probe=name, reason=error, python=ctx.python)
