"""The `ray-quarantine` step: stale Ray session dirs and a dead `ray_current_cluster` are moved into
`<root>/ray/quarantine-<timestamp>/` (doctor/ray_quarantine.py), never deleted; the snapshot keeps
the moves and `doctor rollback` moves them back. Live sessions are refused; `ray stop` is never run."""

from __future__ import annotations

from doctor.fixes import ApplyContext, FixError, Step, StepKind, register


def _targets() -> tuple[str, list[str]]:
    # Read the state again at plan/apply time (cheap, local): the check may be minutes old.
    from doctor.probes.ray_state import ray_state_facts
    from doctor.ray_quarantine import stale_targets

    state = ray_state_facts()
    return state["temp_root"]["root"], stale_targets(state)


class RayQuarantine(StepKind):
    name = "ray-quarantine"

    def make_step(self, finding, entry: dict, *, python: str, stack: dict | None) -> Step:
        return Step(kind=self.name, description="move stale Ray state aside (restorable; live sessions untouched)",
                    commands=["# mv <ray dir>/session_<stale>… <ray dir>/quarantine-<time>/ (doctor rollback moves it back)"],
                    targets=[finding.id],
                    reasons=[{"requirement": "quarantine", "findings": [finding.id],
                              "reason": entry.get("reason", ""), "source": entry.get("source", "")}])

    def prepare(self, step: Step, ctx: ApplyContext) -> None:
        root, paths = _targets()
        step.data.update(root=root, paths=paths)
        step.changes = [f"move {p} → {root}/ray/quarantine-<time>/" for p in paths] or ["nothing stale to move"]

    def apply(self, step: Step, ctx: ApplyContext) -> dict:
        from doctor.ray_quarantine import RefusedError, quarantine

        root, paths = _targets()
        try:
            moves = quarantine(paths, root)
        except RefusedError as exc:
            raise FixError(f"Ray quarantine refused: {exc}")
        for src, dst in moves:
            ctx.log(f"moved {src} → {dst}")
        return {"moves": moves}

    def undo(self, record: dict, ctx: ApplyContext) -> None:
        from doctor.ray_quarantine import restore

        for dst, src in restore(record.get("moves") or []):
            ctx.log(f"moved back {dst} → {src}")


register(RayQuarantine())


def merge(plan_steps: list[Step]) -> list[Step]:
    """One quarantine step for all Ray findings (stale sessions and the dead pointer move together)."""
    ray = [s for s in plan_steps if s.kind == RayQuarantine.name]
    if len(ray) <= 1:
        return plan_steps
    first = ray[0]
    for s in ray[1:]:
        first.targets += s.targets
        first.reasons += s.reasons
    return [s for s in plan_steps if s.kind != RayQuarantine.name or s is first]
