"""The `ray-quarantine` step: stale Ray session dirs and a dead `ray_current_cluster` are moved into
`<root>/ray/quarantine-<timestamp>/`, never deleted; the snapshot keeps the moves and `doctor
rollback` moves them back. No process is signalled and `ray stop` is never run: a live session (a
raylet names it and its socket accepts) is refused, as is anything outside `<root>/ray/`, and a
ray_current_cluster whose head still answers."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from doctor import knowledge
from doctor.fixes import ApplyContext, FixError, Step, StepKind, register
from doctor.probes.ray_state import head_answers, holders, ray_processes, session_info
from doctor.probes.ray_state import ray_state_facts


class RefusedError(Exception):
    """A path that must not be moved (live, outside the Ray dir, or unknown)."""


def _ray_dir(root: str | os.PathLike) -> Path:
    return Path(root) / knowledge.load("ray")["temp_root"]["subdir"]


def check_movable(path: Path, ray_dir: Path, procs: list[dict] | None = None, held: dict | None = None) -> None:
    cfg = knowledge.load("ray")
    if path.parent.resolve() != ray_dir.resolve():
        raise RefusedError(f"{path}: not directly under {ray_dir}")
    if not os.path.lexists(path):
        raise RefusedError(f"{path}: does not exist")
    if path.name == cfg["address_file"]:
        text = path.read_text(errors="replace").strip() if path.is_file() else ""
        state = head_answers(text, cfg["head_probe"]["connect_timeout_s"]) if text else {"answers": False}
        if state.get("answers"):
            raise RefusedError(f"{path}: the head it names ({text}) answers; it is not dead")
        return
    if not path.name.startswith("session_") or path.name == cfg["session_latest"]:
        raise RefusedError(f"{path}: not a session dir or {cfg['address_file']}")
    if path.is_symlink() or not path.is_dir():
        return  # garbage named session_*: movable
    info = session_info(path, ray_processes() if procs is None else procs, 0.0, cfg, held)
    if info.get("live") or info.get("processes"):
        pids = sorted({p["pid"] for p in info.get("processes") or []} | set(info.get("held_by") or []))
        why = (f"processes {pids} hold it" if pids else
               f"it belongs to {info.get('owner')} and their processes cannot be inspected from this user")
        raise RefusedError(f"{path}: live session ({why})")


def quarantine(paths, root) -> list[tuple[str, str]]:
    """Move each path (stale `session_*` dirs, a dead `ray_current_cluster`) into
    `<root>/ray/quarantine-<timestamp>/`. All paths are checked before anything moves; one refusal
    moves nothing. Returns [(src, dst)] for restore()."""
    ray_dir = _ray_dir(root)
    paths = [Path(p) for p in paths]
    procs = ray_processes()
    held = holders(ray_dir)   # one scan of every process's open files for all the paths
    for p in paths:
        check_movable(p, ray_dir, procs, held)
    if not paths:
        return []
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    qdir = ray_dir / f"quarantine-{stamp}"
    qdir.mkdir()
    moves: list[tuple[str, str]] = []
    try:
        for p in paths:
            dst = qdir / p.name
            os.rename(p, dst)  # same filesystem: atomic, nothing copied
            moves.append((str(p), str(dst)))
    except OSError:
        restore(moves)
        raise
    return moves


def restore(moves) -> list[tuple[str, str]]:
    """Undo quarantine(): move every dst back to its src (refuses to overwrite). Returns what moved
    back; the emptied quarantine dir is removed."""
    back = []
    for src, dst in reversed(list(moves)):
        if os.path.lexists(src):
            raise FileExistsError(f"{src} exists again; not overwriting it with {dst}")
        os.rename(dst, src)
        back.append((dst, src))
    for qdir in {os.path.dirname(d) for _, d in moves}:
        try:
            os.rmdir(qdir)
        except OSError:
            pass
    return back


def stale_targets(state: dict) -> list[str]:
    """What quarantine() should move, from the ray_state facts: stale session dirs and a dead
    ray_current_cluster."""
    out = [s["path"] for s in state.get("sessions") or [] if s.get("kind") == "dir" and not s.get("live")
           and not s.get("processes")]
    cc = state.get("current_cluster") or {}
    if cc.get("path") and cc.get("answers") is not True:
        out.append(cc["path"])
    return out


def _targets() -> tuple[str, list[str]]:
    # Read the state again at plan/apply time (cheap, local): the check may be minutes old.
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
        root, paths = _targets()
        try:
            moves = quarantine(paths, root)
        except RefusedError as exc:
            raise FixError(f"Ray quarantine refused: {exc}")
        for src, dst in moves:
            ctx.log(f"moved {src} → {dst}")
        return {"moves": moves}

    def undo(self, record: dict, ctx: ApplyContext) -> None:
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
