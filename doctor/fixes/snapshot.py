"""Snapshots: the state of a target saved before `doctor fix` changes anything, and its restore.

Layout (state dir: $VERL_DOCTOR_STATE_DIR, else $XDG_STATE_HOME/verl-doctor, else
~/.local/state/verl-doctor):

    snapshots/<YYYYmmdd-HHMMSS>-<hex>/
        snapshot.json    id, created, target, stack, lockfile, distributions {name: version},
                         the plan, status, and one undo record per applied step (in order)
        freeze.txt       `uv pip freeze --python TARGET`, byte for byte
        constraints.txt  the constraints the packages step passed to uv (when there is one)
    locks/<sha256 of the env prefix>.lock   one `doctor fix`/`rollback` per target at a time

Restoring undoes the non-package steps in reverse order from their records, then runs
`uv pip sync` on freeze.txt and checks that the freeze afterwards is byte-identical."""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import fcntl
import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from doctor import __version__
from doctor.errors import UsageError
from doctor.paths import state_dir
from doctor.fixes import STEP_KINDS, ApplyContext, FixError
from doctor.fixes import packages
from doctor.fixes import ray_sessions as _ray_sessions  # noqa: F401 - its kind must be known to undo it


def snapshots_dir() -> Path:
    return state_dir() / "snapshots"


def env_prefix(python: str) -> str:
    """The environment a target interpreter belongs to (venv/bin/python → venv), resolved."""
    return os.path.realpath(Path(python).absolute().parent.parent)


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


@dataclass
class Snapshot:
    id: str
    path: Path
    meta: dict

    @property
    def freeze_path(self) -> Path:
        return self.path / "freeze.txt"

    def save(self) -> None:
        tmp = self.path / f".snapshot.json.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(self.meta, indent=1, ensure_ascii=False) + "\n")
        os.replace(tmp, self.path / "snapshot.json")

    def update(self, **fields) -> None:
        self.meta.update(fields)
        self.meta.setdefault("history", []).append({"at": _now(), **{k: v for k, v in fields.items() if k == "status"}})
        self.save()

    def record_applied(self, record: dict) -> None:
        self.meta.setdefault("applied", []).append(record)
        self.save()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def create(snap_id: str, python: str, plan, distributions: dict, *, before_rollback_to: str | None = None) -> Snapshot:
    """Write the snapshot before anything changes; returns it (status "created").

    plan is None for the snapshot `doctor rollback` takes before it restores another one
    (before_rollback_to: that one's ID), so that a rollback can be undone too."""
    text = packages.freeze(python)  # first: if uv cannot read the env, nothing is written
    path = snapshots_dir() / snap_id
    path.mkdir(parents=True, exist_ok=False)
    path.joinpath("freeze.txt").write_text(text)
    meta = {
        "id": snap_id,
        "created": _now(),
        "target": python,
        "prefix": env_prefix(python),
        "doctor_version": __version__,
        "made_by": "rollback" if before_rollback_to else "fix",
        "before_rollback_to": before_rollback_to,
        "stack": plan.stack if plan else None,
        "lockfile": plan.lockfile if plan else None,
        "distributions": {name: d["version"] for name, d in sorted(distributions.items())},
        "freeze_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "plan": plan.to_dict() if plan else {"steps": []},
        "status": "created",
        "applied": [],
        "history": [{"at": _now(), "status": "created"}],
    }
    snap = Snapshot(snap_id, path, meta)
    snap.save()
    return snap


def load(path: Path) -> Snapshot:
    try:
        meta = json.loads((path / "snapshot.json").read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"snapshot {path} is unreadable ({exc.__class__.__name__})")
    return Snapshot(meta["id"], path, meta)


def list_all(python: str | None = None) -> list[Snapshot]:
    root = snapshots_dir()
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        if (p / "snapshot.json").is_file():
            try:
                s = load(p)
            except UsageError:
                continue
            if python is None or s.meta.get("prefix") == env_prefix(python):
                out.append(s)
    return sorted(out, key=lambda s: (s.meta.get("created", ""), s.id))


def find(ref: str | None, python: str | None = None) -> Snapshot:
    """A snapshot by ID, unique ID prefix or path; None → the latest one taken by `doctor fix` (for
    --python's env if given): a bare `doctor rollback` undoes the last fix, even after a rollback.
    The snapshots a rollback takes of what it replaces are named by ID."""
    if ref is None:
        snaps = [s for s in list_all(python) if s.meta.get("made_by", "fix") == "fix"]
        if not snaps:
            where = f" for {python}" if python else ""
            raise UsageError(f"no snapshots{where} in {snapshots_dir()} (doctor fix writes one before changing anything)")
        return snaps[-1]
    as_path = Path(ref).expanduser()
    if (as_path / "snapshot.json").is_file():
        return load(as_path)
    if (snapshots_dir() / ref / "snapshot.json").is_file():
        return load(snapshots_dir() / ref)
    hits = [s for s in list_all() if s.id.startswith(ref)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise UsageError(f"snapshot {ref!r} is ambiguous: {', '.join(s.id for s in hits)}")
    raise UsageError(f"no snapshot {ref!r} in {snapshots_dir()} (doctor rollback --list shows them)")


def restore(snap: Snapshot, python: str, log=lambda msg: None) -> None:
    """Undo the applied steps: non-package kinds in reverse order from their records, then the
    package set from freeze.txt. Raises FixError unless the freeze afterwards is byte-identical."""
    ctx = ApplyContext(target=python, snapshot_dir=snap.path, log=log)
    for record in reversed(snap.meta.get("applied", [])):
        kind = STEP_KINDS.get(record.get("kind"))
        if kind is not None and not kind.restores_packages:
            kind.undo(record, ctx)
    saved = snap.freeze_path.read_text()
    log(f"uv pip sync --python {python} {snap.freeze_path}")
    proc = packages.sync_to(python, snap.freeze_path)
    if proc.returncode != 0:
        raise FixError(f"uv pip sync to the snapshot's freeze failed: {packages._tail(proc)}")
    now = packages.freeze(python)
    if now != saved:
        diff = [ln for ln in difflib.unified_diff(saved.splitlines(), now.splitlines(), "snapshot", "now", lineterm="", n=0)
                if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        raise FixError(f"after the restore the freeze still differs from the snapshot: {'; '.join(diff[:10])}")


def lock_path(python: str) -> Path:
    return state_dir() / "locks" / (hashlib.sha256(env_prefix(python).encode()).hexdigest()[:24] + ".lock")


@contextlib.contextmanager
def target_lock(python: str):
    """One `doctor fix`/`rollback` per environment at a time; a second one fails at once (exit 2)."""
    prefix = env_prefix(python)
    path = lock_path(python)
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip()
            raise UsageError(f"another doctor fix/rollback is changing {prefix} ({holder or 'lock ' + str(path)}); "
                             "wait for it to finish")
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} since {_now()}\n")
        fh.flush()
        yield path
    finally:
        fh.close()
