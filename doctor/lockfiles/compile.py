"""`doctor lock`: resolve a stack (knowledge/stacks/*.yaml) with uv into a hashed lockfile.

The resolution date is pinned with uv's --exclude-newer (from the stack data), and the header
holds only inputs (never the wall-clock time), so re-running on unchanged inputs reproduces the
file byte for byte."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from doctor import knowledge
from doctor.errors import UsageError
from doctor.uv import uv_bin
from doctor.probes import TARGET_PROBES, run_target_probe
from doctor.dists import checkout_of
from doctor.stacks import constraint_lines


def stack_inputs(stack: dict) -> tuple[str, str]:
    """The requirements and constraints files uv resolves, as text."""
    reqs = "\n".join(stack["requirements"]) + "\n"
    cons = constraint_lines(stack)   # the lock is resolved with every pin (its own set meets their conditions)
    return reqs, cons


def lock_path(out_dir: Path, stack: dict, python: str) -> Path:
    return out_dir / f"{stack['name']}-py{python}.txt"


def header(stack: dict, python: str, reqs: str, cons: str) -> str:
    digest = hashlib.sha256((reqs + "\0" + cons).encode()).hexdigest()[:16]
    fa = stack.get("flash_attn", {})
    wheel = fa.get("wheels", {}).get(python, {})
    lines = [
        f"# verl-doctor lockfile for stack {stack['name']}, Python {python}, {stack['platform']}",
        "# Made by `doctor lock` with: uv pip compile --generate-hashes",
        f"#   --python-version {python} --python-platform {stack['platform']}",
        f"#   --exclude-newer {stack['exclude_newer']} (the resolution date)",
        f"# Inputs: doctor/knowledge/stacks/{stack['name']}.yaml (requirements + constraints, sha256 {digest}…)",
        "# Install: uv pip sync --require-hashes THIS_FILE   (or pip install --require-hashes -r THIS_FILE)",
    ]
    if wheel.get("url"):
        lines += [f"# flash-attn {fa.get('version', '?')} is not in this file (PyPI has no wheel); on GPU machines:",
                  f"#   pip install --no-deps {wheel['url']}"]
    else:
        lines.append("# flash-attn is not in this file: the stack names no wheel of it for this Python")
    return "\n".join(lines) + "\n"


def compile_lock(stack: dict, python: str, out_dir: Path, progress=None) -> Path:
    if python not in stack["python"]:
        raise UsageError(f"stack {stack['name']} supports Python {', '.join(stack['python'])}, not {python}")
    reqs, cons = stack_inputs(stack)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot create the output directory ({exc.strerror or exc})")
    target = lock_path(out_dir, stack, python)
    with tempfile.TemporaryDirectory() as tmp:
        rq, cs, raw = Path(tmp, "requirements.in"), Path(tmp, "constraints.txt"), Path(tmp, "out.txt")
        rq.write_text(reqs)
        cs.write_text(cons)
        cmd = [
            uv_bin(), "pip", "compile", str(rq), "--constraint", str(cs),
            "--generate-hashes", "--no-header", "--no-annotate", "--quiet",
            "--python-version", python, "--python-platform", stack["platform"],
            "--exclude-newer", stack["exclude_newer"], "--output-file", str(raw),
        ]
        if progress:
            progress(f"resolving {stack['name']} for Python {python} with uv")
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "UV_NO_PROGRESS": "1"})
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["uv failed"])[-1]
            raise UsageError(f"uv could not resolve {stack['name']} for Python {python}: {last}")
        body = raw.read_text()
    _write_atomically(target, header(stack, python, reqs, cons) + body)
    return target


def _write_atomically(target: Path, text: str) -> None:
    """A failed or interrupted lock never leaves a half-written file behind."""
    tmp_target = target.with_suffix(".tmp")
    try:
        tmp_target.write_text(text)
        os.replace(tmp_target, target)
    except OSError as exc:
        tmp_target.unlink(missing_ok=True)
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}")


def main_lock(stack_names: list[str] | None, pythons: list[str] | None, out_dir: Path, echo=print) -> int:
    names = stack_names or [knowledge.default_stack()["name"]]
    for name in names:
        stack = knowledge.get_stack(name)
        for py in pythons or stack["python"]:
            path = compile_lock(stack, py, out_dir, progress=lambda m: echo(f"… {m}", file=sys.stderr))
            echo(str(path))
    return 0


def project_lock(python: str, project: Path, out_dir: Path, progress=None) -> tuple[Path, list[str]]:
    """`doctor lock --project PATH`: the working env of a project as a hashed lockfile — every
    installed distribution at the version it has now, resolved again by uv so that the file is
    consistent and hashed, the project's own code (editable installs and source trees inside PATH)
    left out: it is installed from the checkout, after the sync. Returns (file, excluded names)."""
    import json

    project = project.resolve()
    if not project.is_dir():
        raise UsageError(f"--project {project}: not a directory")
    r = run_target_probe(TARGET_PROBES["distributions"], python)
    if not r.ok or not r.data:
        raise UsageError(f"--python {python}: cannot read its distributions ({r.error})")
    pyver = ".".join(r.data["python"]["version"].split(".")[:2])
    pins, excluded, elsewhere = [], [], []
    for d in sorted(r.data["dists"].values(), key=lambda d: d["name"].lower()):
        where = checkout_of(d)
        if where and (Path(where).resolve() == project or project in Path(where).resolve().parents):
            excluded.append(d["name"])
        elif where:
            elsewhere.append(f"{d['name']} (from {where})")
        else:
            pins.append(f"{d['name']}=={d['version']}")
    if not excluded:
        raise UsageError(f"--project {project}: no distribution of this env is installed from it "
                         "(pip install -e PATH first, or name the checkout the env uses)")
    if elsewhere:
        raise UsageError(f"installed from other checkouts than --project {project}: {', '.join(elsewhere)}; a lock "
                         "cannot pin them (install them from an index, or lock the env of one project)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot create the output directory ({exc.strerror or exc})")
    target = out_dir / f"{project.name}-py{pyver}.txt"
    with tempfile.TemporaryDirectory() as tmp:
        rq, raw = Path(tmp, "requirements.in"), Path(tmp, "out.txt")
        rq.write_text("\n".join(pins) + "\n")
        if progress:
            progress(f"resolving the {len(pins)} installed distributions of {python} again with uv")
        proc = subprocess.run([uv_bin(), "pip", "compile", str(rq), "--generate-hashes", "--no-header", "--no-annotate",
                               "--quiet", "--python-version", pyver, "--python-platform", "linux",
                               "--output-file", str(raw)], capture_output=True, text=True,
                              env={**os.environ, "UV_NO_PROGRESS": "1"})
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["uv failed"])[-1]
            raise UsageError(f"uv could not resolve the env's own versions together ({last}): "
                             f"run `doctor check --python {python}` first (pip.conflict names what disagrees)")
        body = raw.read_text()
    digest = hashlib.sha256("\n".join(pins).encode()).hexdigest()[:16]
    head = "\n".join([
        f"# verl-doctor lockfile of project {project.name} ({project}), Python {pyver}, linux",
        f"# Made by `doctor lock --project` from the env of {python}: its {len(pins)} distributions at their",
        f"#   installed versions (sha256 {digest}…), resolved again with uv pip compile --generate-hashes",
        f"# Left out, the project's own code: {', '.join(excluded)} — after the sync: pip install --no-deps -e {project}",
        "# Install: uv pip sync --require-hashes THIS_FILE; check later: doctor check --lock THIS_FILE",
        json.dumps({"project": str(project), "excluded": excluded}).join(["# verl-doctor-project: ", ""]),
    ]) + "\n"
    _write_atomically(target, head + body)
    return target, excluded
