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


def uv_bin() -> str:
    """uv is a dependency of the doctor (the PyPI `uv` package ships the binary)."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except Exception:  # noqa: BLE001 - fall back to PATH
        import shutil

        found = shutil.which("uv")
        if not found:
            raise UsageError("uv not found: install it with `pip install uv`")
        return found


# The committed lockfiles (top-level lockfiles/) ship inside the package through the link
# doctor/lockfiles -> ../lockfiles, so fix suggestions name a file that exists after `pip install`.
PACKAGED_LOCKFILES = Path(__file__).resolve().parent / "lockfiles"


def stack_lockfile(stack_name: str, python_version: str) -> Path:
    """The shipped lockfile of a stack for a Python version (it may not exist for that version)."""
    return PACKAGED_LOCKFILES / f"{stack_name}-py{python_version}.txt"


def get_stack(name: str | None) -> dict:
    stacks = knowledge.stacks()
    if name is None:
        return knowledge.default_stack()
    if name not in stacks:
        raise UsageError(f"unknown stack {name!r}; known: {', '.join(sorted(stacks))}")
    return stacks[name]


def stack_inputs(stack: dict) -> tuple[str, str]:
    """The requirements and constraints files uv resolves, as text."""
    reqs = "\n".join(stack["requirements"]) + "\n"
    cons = "\n".join(f"{c['dist']}{c['spec']}" for c in stack["constraints"]) + "\n"
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
        f"# flash-attn {fa.get('version', '?')} is not in this file (PyPI has no wheel); on GPU machines:",
        f"#   pip install --no-deps {wheel.get('url', '?')}",
    ]
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
    # Write atomically: a failed or interrupted lock never leaves a half-written file behind.
    tmp_target = target.with_suffix(".tmp")
    try:
        tmp_target.write_text(header(stack, python, reqs, cons) + body)
        os.replace(tmp_target, target)
    except OSError as exc:
        tmp_target.unlink(missing_ok=True)
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}")
    return target


def parse_lockfile(path: Path) -> dict[str, dict]:
    """name -> {"version", "hashes"} from a `uv pip compile --generate-hashes` / pip-tools file."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read lockfile {path}: {exc.__class__.__name__}: {exc}")
    # Join continuation lines ("pkg==1.0 \\\n    --hash=sha256:…").
    joined = text.replace("\\\n", " ")
    out: dict[str, dict] = {}
    for lineno, line in enumerate(joined.splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        req_text = " ".join(p for p in parts if not p.startswith("--"))
        hashes = [p.split("=", 1)[1] for p in parts[1:] if p.startswith("--hash=")]
        try:
            req = Requirement(req_text)
        except InvalidRequirement:
            raise UsageError(f"lockfile {path} does not parse at entry {lineno}: {req_text!r}")
        pins = [s for s in req.specifier if s.operator == "=="]
        if len(pins) != 1:
            raise UsageError(f"lockfile {path}: {req_text!r} is not pinned with ==")
        out[canonicalize_name(req.name)] = {"version": pins[0].version, "hashes": hashes}
    if not out:
        raise UsageError(f"lockfile {path} has no pinned packages")
    return out


def main_lock(stack_names: list[str] | None, pythons: list[str] | None, out_dir: Path, echo=print) -> int:
    names = stack_names or [knowledge.default_stack()["name"]]
    for name in names:
        stack = get_stack(name)
        for py in pythons or stack["python"]:
            path = compile_lock(stack, py, out_dir, progress=lambda m: echo(f"… {m}", file=sys.stderr))
            echo(str(path))
    return 0


def run(args) -> int:
    """`doctor lock` from parsed arguments."""
    names = sorted(knowledge.stacks()) if args.all else args.stack
    return main_lock(names, args.python, Path(args.out))
