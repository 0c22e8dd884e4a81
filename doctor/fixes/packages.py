"""Package steps, carried out by uv: ONE `uv pip install` for every package finding of a plan
(the stack's constraints passed as a constraints file), or `uv pip sync --require-hashes` to a
lockfile. Both are undone by restoring the snapshot's freeze (snapshot.restore)."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

from doctor.fixes import ApplyContext, FixError, Step, StepKind, fill, register
from doctor.uv import runnable
from doctor.uv import uv_bin
from doctor.lockfiles.compile import stack_inputs
from doctor.stacks import constraint_lines
from doctor.facts import Facts
from doctor.paths import state_dir
from doctor.names import canonical_name

_CHANGE = re.compile(r"^ ([+-]) ([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?(?:==| @ )(\S+)")


def uv() -> str:
    return uv_bin()


def uv_env() -> dict:
    return {**os.environ, "UV_NO_PROGRESS": "1"}


def run_uv(args: list[str], *, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([uv(), *args], capture_output=True, text=True, env=uv_env(), timeout=timeout)


def _tail(proc: subprocess.CompletedProcess, n: int = 6) -> str:
    lines = [ln for ln in (proc.stderr or "").strip().splitlines()
             if ln.strip() and not ln.startswith("Using Python")]
    return " | ".join(ln.strip() for ln in lines[-n:]) or f"exit {proc.returncode}"


def freeze(python: str) -> str:
    """`uv pip freeze --python TARGET` (uv venvs have no pip); the text the snapshot keeps."""
    proc = run_uv(["pip", "freeze", "--python", python], timeout=120)
    if proc.returncode != 0:
        raise FixError(f"uv pip freeze failed for {python}: {_tail(proc)}")
    return proc.stdout


def sync_to(python: str, requirements_file: Path, *, require_hashes: bool = False) -> subprocess.CompletedProcess:
    args = ["pip", "sync", "--python", python, str(requirements_file)]
    if require_hashes:
        args.insert(2, "--require-hashes")
    return run_uv(args)


def parse_changes(uv_stderr: str) -> list[str]:
    """uv's ' - name==old' / ' + name==new' lines → 'name old → new', '+ name new', '- name old'."""
    removed: dict[str, str] = {}
    added: dict[str, str] = {}
    for line in uv_stderr.splitlines():
        m = _CHANGE.match(line)
        if m:
            (added if m.group(1) == "+" else removed)[m.group(2).lower()] = m.group(3)
    out = []
    for name in sorted(set(removed) | set(added)):
        old, new = removed.get(name), added.get(name)
        if old and new:
            out.append(f"{name} {old} → {new}" if old != new else f"{name} {new} (reinstalled)")
        elif new:
            out.append(f"+ {name} {new}")
        else:
            out.append(f"- {name} {old}")
    return out


def _install_args(step: Step, constraints: str) -> list[str]:
    d = step.data
    args = ["pip", "install", "--python", step.data["python"]]
    if d.get("exclude_newer"):
        args += ["--exclude-newer", d["exclude_newer"]]
    if constraints:
        args += ["--constraint", constraints]
    for lock in d.get("lock_constraints", []):  # the known-good set a finding was judged against
        args += ["--constraint", lock]
    for r in d.get("reinstall", []):
        args += ["--reinstall-package", r]
    return args + list(d["requirements"])


class PackagesKind(StepKind):
    name = "packages"
    restores_packages = True

    def prepare(self, step: Step, ctx: ApplyContext) -> None:
        with tempfile.TemporaryDirectory(prefix="doctor-fix-") as tmp:
            cons = Path(tmp, "constraints.txt")
            cons.write_text(step.data["constraints"])
            proc = run_uv(_install_args(step, str(cons))[:2] + ["--dry-run"] + _install_args(step, str(cons))[2:])
        if proc.returncode != 0:
            raise FixError(f"uv cannot resolve {' '.join(step.data['requirements'])} within "
                           f"{step.data.get('stack') or 'the constraints'}: {_tail(proc)}")
        step.changes = parse_changes(proc.stderr) or ["nothing (already satisfied)"]

    def apply(self, step: Step, ctx: ApplyContext) -> dict:
        assert ctx.snapshot_dir is not None, "package steps apply after a snapshot"
        cons = Path(ctx.snapshot_dir) / "constraints.txt"
        cons.write_text(step.data["constraints"])
        args = _install_args(step, str(cons))
        ctx.log(shlex.join(["uv", *args]))
        proc = run_uv(args)
        if proc.returncode != 0:
            raise FixError(f"uv pip install failed: {_tail(proc)}")
        return {"kind": self.name, "command": shlex.join([uv(), *args]), "changes": parse_changes(proc.stderr),
                "undo": "restore the snapshot's freeze"}


class SyncLockKind(StepKind):
    name = "sync-lock"
    restores_packages = True

    def prepare(self, step: Step, ctx: ApplyContext) -> None:
        proc = run_uv(["pip", "sync", "--dry-run", "--require-hashes", "--python", step.data["python"],
                       step.data["lockfile"]])
        if proc.returncode != 0:
            raise FixError(f"uv cannot sync to {step.data['lockfile']}: {_tail(proc)}")
        step.changes = parse_changes(proc.stderr) or ["nothing (already in sync)"]

    def apply(self, step: Step, ctx: ApplyContext) -> dict:
        ctx.log(step.commands[0])
        proc = sync_to(step.data["python"], Path(step.data["lockfile"]), require_hashes=True)
        if proc.returncode != 0:
            raise FixError(f"uv pip sync failed: {_tail(proc)}")
        return {"kind": self.name, "command": step.commands[0], "changes": parse_changes(proc.stderr),
                "undo": "restore the snapshot's freeze"}


register(PackagesKind())
register(SyncLockKind())


def make_install_step(python: str, stack: dict | None, reqs: list[dict], targets: list[str],
                      reinstall: list[str], facts: Facts | None = None, lock_constraints: list[str] | None = None) -> Step:
    constraints = constraint_lines(stack, facts) if stack else ""
    requirements = _merge([r["requirement"] for r in reqs])
    step = Step(
        kind="packages",
        description=(f"install {', '.join(requirements)} in one uv resolution"
                     + (f" within {stack['name']}'s constraints" if stack else "")),
        commands=[],
        targets=list(dict.fromkeys(targets)),
        reasons=reqs,
        data={"python": python, "requirements": requirements, "constraints": constraints,
              "stack": stack["name"] if stack else None, "exclude_newer": (stack or {}).get("exclude_newer"),
              "reinstall": reinstall, "lock_constraints": list(lock_constraints or [])},
    )
    # The printed command names a real file with the stack's constraints (a dry run's plan runs as
    # printed in a new shell); an applied fix uses the snapshot's own copy (bind_constraints_path).
    step.commands = [runnable(shlex.join(["uv", *_install_args(step, str(constraints_file(stack, constraints)) if stack else "")]))]
    return step


def constraints_file(stack: dict, text: str | None = None) -> Path:
    """The stack's constraints (or the ones that apply to one env: `text`) as a file the printed fix
    command can name: written under the doctor's state dir (not the target), one file per content."""
    full = stack_inputs(stack)[1]
    text = full if text is None else text
    suffix = "" if text == full else "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    path = state_dir() / "constraints" / f"{stack['name']}{suffix}.txt"
    try:
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    except OSError:
        pass  # a read-only home: the command still shows where the constraints would be
    return path


def make_sync_step(python: str, lockfile: str, targets: list[str]) -> Step:
    return Step(
        kind="sync-lock",
        description=f"sync the target to {lockfile} (exact hashed artifacts; removes what the lock lacks)",
        commands=[runnable(shlex.join(["uv", "pip", "sync", "--python", python, "--require-hashes", lockfile]))],
        targets=list(dict.fromkeys(targets)),
        reasons=[{"requirement": f"-r {lockfile}", "findings": list(dict.fromkeys(targets)),
                  "reason": "the lockfile is the whole truth: syncing to it fixes every package finding",
                  "source": lockfile}],
        data={"python": python, "lockfile": lockfile},
    )


def _merge(requirements: list[str]) -> list[str]:
    """One requirement per dist: 'setuptools<80' twice is once; different specs are intersected."""
    from packaging.requirements import Requirement

    by_name: dict[str, tuple[str, Requirement]] = {}
    for text in requirements:
        req = Requirement(text)
        key = canonical_name(req.name)
        if key not in by_name:
            by_name[key] = (text, req)
        elif req.specifier != by_name[key][1].specifier or req.extras != by_name[key][1].extras:
            prev = by_name[key][1]
            prev.specifier &= req.specifier
            prev.extras |= req.extras
            by_name[key] = (str(prev), prev)
    return [text for text, _ in by_name.values()]


def bind_constraints_path(step: Step, path: Path) -> None:
    """Put the snapshot's constraints path into the shown command (what the applied fix runs)."""
    stack = step.data.get("stack")
    if stack:
        old = str(state_dir() / "constraints" / f"{stack}.txt")
        step.commands = [c.replace(old, str(path)) for c in step.commands]


class ReinstallWinnerKind(StepKind):
    """Two wheels write the same paths (python.files-overlap): reinstall the one whose copy must win,
    at its installed version, without its dependencies. The freeze does not change, so restoring it
    would not undo this: the undo reinstalls the other wheel the same way, which puts its copy (the
    state before, byte for byte: uv links the same cached files) back on the shared paths."""

    name = "reinstall-winner"

    def make_step(self, finding, entry: dict, *, python: str, stack: dict | None) -> Step:
        last, version, other = (fill("{%s}" % k, finding) for k in ("last", "version", "other"))
        args = ["pip", "install", "--python", python, "--no-deps", "--reinstall-package", last, f"{last}=={version}"]
        return Step(kind=self.name, description=f"reinstall {last} {version} last: its copy of the shared paths wins over {other}'s",
                    commands=[runnable(shlex.join(["uv", *args]))], targets=[finding.id],
                    reasons=[{"requirement": f"{last}=={version}", "findings": [finding.id],
                              "reason": entry.get("reason", ""), "source": entry.get("source", "")}],
                    data={"python": python, "args": args, "other": other, "other_version": fill("{other_version}", finding)})

    def prepare(self, step: Step, ctx: ApplyContext) -> None:
        step.changes = [f"{step.reasons[0]['requirement'].replace('==', ' ')} (reinstalled, no other change)"]

    def apply(self, step: Step, ctx: ApplyContext) -> dict:
        ctx.log(step.commands[0])
        proc = run_uv(step.data["args"])
        if proc.returncode != 0:
            raise FixError(f"uv pip install failed: {_tail(proc)}")
        return {"kind": self.name, "command": step.commands[0], "changes": step.changes,
                "python": step.data["python"], "other": step.data["other"], "other_version": step.data["other_version"],
                "undo": f"reinstall {step.data['other']} {step.data['other_version']} the same way"}

    def undo(self, record: dict, ctx: ApplyContext) -> None:
        if not record.get("other") or not record.get("other_version"):
            return
        other = record["other"]
        proc = run_uv(["pip", "install", "--python", record["python"], "--no-deps", "--reinstall-package", other,
                       f"{other}=={record['other_version']}"])
        if proc.returncode != 0:
            raise FixError(f"uv could not reinstall {other} {record['other_version']}: {_tail(proc)}")


register(ReinstallWinnerKind())
