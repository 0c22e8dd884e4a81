"""What goes into an image's build context: the lockfile, the Dockerfile of containers/, the host's
CA bundle, and the doctor's own wheel (built from the installed package, carrying lockfiles/,
containers/ and recipes/)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from doctor import __version__, knowledge
from doctor.container.engine import BuildFailed
from doctor.errors import UsageError
from doctor.paths import FOLDERS, SHIPPED_DIR, containers_dir, folder
from doctor.uv import uv_bin
from doctor.knowledge import get_stack
from doctor.lockfiles import parse_lockfile, stack_lockfile


LABEL = "io.verl-doctor"
VENV = "/opt/venv"
_HEADER = re.compile(r"^# verl-doctor lockfile for stack (\S+), Python (\d+\.\d+)", re.M)


DEFAULT_PYTHON = "3.11"


DOCKERFILE = containers_dir() / "Dockerfile"     # the checkout's containers/, or the wheel's copy


PACKAGE_DIR = Path(__file__).resolve().parents[1]   # the doctor package as installed (or checked out)


def resolve_lock(stack_name: str | None, lock: str | None) -> tuple[Path, dict, str]:
    """(lockfile, stack, python version) from --stack or --lock."""
    if lock:
        path = Path(lock)
        if not path.is_file():
            raise UsageError(f"--lock {lock}: no such file")
        m = _HEADER.search(path.read_text(errors="replace")[:4000])
        name, python = (m.group(1), m.group(2)) if m else (stack_name, DEFAULT_PYTHON)
        stack = get_stack(name) if name in knowledge.stacks() else get_stack(stack_name) if stack_name else \
            {"name": name or "custom", "python": [python], "flash_attn": {}}
    else:
        stack = get_stack(stack_name)
        python = DEFAULT_PYTHON if DEFAULT_PYTHON in stack["python"] else stack["python"][-1]
        path = stack_lockfile(stack["name"], python)
        if not path.is_file():
            raise UsageError(f"no lockfile for stack {stack['name']} (Python {python}): run `doctor lock` first")
    entries = parse_lockfile(path)
    unhashed = sorted(n for n, e in entries.items() if not e["hashes"])
    if unhashed:
        raise UsageError(f"lockfile {path} has entries without --hash (e.g. {unhashed[0]}); "
                         "the image installs with --require-hashes: make it with `doctor lock`")
    return path, stack, python


def host_ca_bundle() -> Path | None:
    """The CA bundle the host trusts (networks that intercept TLS add their CA to it)."""
    for cand in (os.environ.get("SSL_CERT_FILE"), os.environ.get("PIP_CERT"),
                 "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


def uv_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("uv")
    except PackageNotFoundError:
        out = subprocess.run([uv_bin(), "--version"], capture_output=True, text=True).stdout.split()
        return out[1] if len(out) > 1 else "0.5.0"


def doctor_project(dest: Path) -> Path:
    """A buildable project of the doctor as it is installed here: its package files (all of them:
    code, knowledge, recipe data), the project folders lockfiles/, containers/ and recipes/ as the
    wheel ships them (doctor/_shipped/<name>, wherever doctor.paths finds them now) and a
    pyproject.toml from its own metadata. The same for an editable checkout and a `pip install .`
    into site-packages, so the doctor inside the image finds its locks and recipes."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        meta = metadata("verl-doctor")
        requires = [r for r in (meta.get_all("Requires-Dist") or []) if "extra ==" not in r]
    except PackageNotFoundError:  # run from a source tree on sys.path without installing it
        requires = []
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE_DIR, dest / "doctor", ignore=lambda d, names: (
        skip(d, names) | ({SHIPPED_DIR.name} if Path(d) == PACKAGE_DIR else set())))
    for name in FOLDERS:
        shutil.copytree(folder(name), dest / "doctor" / SHIPPED_DIR.name / name, ignore=skip)
    files = sorted(p.relative_to(dest).as_posix() for p in (dest / "doctor").rglob("*") if p.is_file())
    data = [f[len("doctor/"):] for f in files if not f.endswith(".py")]
    (dest / "pyproject.toml").write_text("\n".join([
        "[build-system]", 'requires = ["setuptools>=68", "wheel"]', 'build-backend = "setuptools.build_meta"', "",
        "[project]", 'name = "verl-doctor"', f'version = "{__version__}"', 'requires-python = ">=3.10"',
        f"dependencies = {json.dumps(requires)}", "",
        "[project.scripts]", 'doctor = "doctor.cli:main"', 'recipes = "doctor.recipes.cli:main"', "",
        "[tool.setuptools.packages.find]", 'include = ["doctor*"]', "",
        "[tool.setuptools.package-data]", f"doctor = {json.dumps(data)}", ""]))
    return dest


def build_doctor_wheel(out: Path) -> Path:
    """The doctor as a wheel, built by uv from doctor_project() (nothing is written into the package)."""
    with tempfile.TemporaryDirectory() as tmp:
        project = doctor_project(Path(tmp) / "project")
        env = {**os.environ, "UV_NO_PROGRESS": "1"}
        env.setdefault("SOURCE_DATE_EPOCH", "315532800")  # stable zip timestamps: same code, same wheel
        proc = subprocess.run([uv_bin(), "build", "--wheel", "--quiet", "--out-dir", str(Path(tmp) / "dist"),
                               str(project)], capture_output=True, text=True, env=env)
        wheels = sorted((Path(tmp) / "dist").glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise BuildFailed(f"building the doctor's wheel failed: {last}")
        out.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(wheels[0], out / wheels[0].name))


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's own Requires-Dist, without extras."""
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line]
