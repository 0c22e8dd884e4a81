"""The card's top-level folders (lockfiles/, containers/, recipes/) travel with the package: a
clean copy of the repository (the files git knows, nothing built) gives an sdist that carries them
and a wheel (from that sdist, as from PyPI, and straight from the tree, as `pip install .`) that
ships them as doctor/_shipped/<name>; the installed wheel, run from a folder with no checkout,
finds them through doctor.paths, and the wheel `doctor container build` makes of an installed
doctor carries them too. Needs the package registry (the build backend and the few dependencies,
from the tests' shared uv cache)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import REPO
from envs import uv, uv_env

pytestmark = pytest.mark.realenv

FOLDERS = ("lockfiles", "containers", "recipes")


def project_files(name: str) -> dict[str, bytes]:
    """relative path -> bytes of the checkout's top-level folder NAME (what the wheel must ship)."""
    root = REPO / name
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def _run(cmd: list, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("packaging")
    src = tmp / "src"
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO).stdout
    for rel in filter(None, listed.split("\0")):
        if (REPO / rel).is_file():  # a file deleted in the work tree is still listed
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    assert not (src / "doctor" / "_shipped").exists()
    env = uv_env()
    _run([uv(), "build", "--quiet", "-o", tmp / "dist", src], env=env)  # sdist, then the wheel from it
    _run([uv(), "build", "--quiet", "--wheel", "-o", tmp / "direct", src], env=env)  # `pip install .`
    (sdist,) = (tmp / "dist").glob("verl_doctor-*.tar.gz")
    (wheel,) = (tmp / "dist").glob("verl_doctor-*.whl")
    (direct,) = (tmp / "direct").glob("verl_doctor-*.whl")
    return {"tmp": tmp, "src": src, "sdist": sdist, "wheel": wheel, "direct": direct}


def test_the_sdist_carries_the_top_level_folders(built):
    with tarfile.open(built["sdist"]) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    for name in FOLDERS:
        for rel in project_files(name):
            assert f"{name}/{rel}" in names, f"{name}/{rel} not in the sdist"
    assert "setup.py" in names and "MANIFEST.in" in names
    assert not any(n.startswith("doctor/_shipped") for n in names)


@pytest.mark.parametrize("which", ["wheel", "direct"])
def test_the_wheel_ships_the_top_level_folders_byte_for_byte(built, which):
    with zipfile.ZipFile(built[which]) as zf:
        names = set(zf.namelist())
        for name in FOLDERS:
            files = project_files(name)
            assert files, f"{name}/ is empty in the checkout"
            for rel, data in files.items():
                assert zf.read(f"doctor/_shipped/{name}/{rel}") == data, f"{name}/{rel}"
    # One copy: nothing is left at the old places inside the package.
    assert not [n for n in names if n.startswith("doctor/lockfiles/") and n.endswith(".txt")]
    assert "doctor/container/Dockerfile" not in names
    assert not [n for n in names if n.startswith("doctor/recipes/data/recipes/")]
    # The recipes' data stays package data.
    assert "doctor/recipes/data/gsm8k/train.parquet" in names


@pytest.fixture(scope="module")
def installed(built) -> dict[str, Path]:
    """The wheel (from the sdist) in a fresh venv, and a folder with no checkout to run it from."""
    venv = built["tmp"] / "venv"
    env = uv_env()
    _run([uv(), "venv", "--quiet", "--python", sys.executable, venv], env=env)
    _run([uv(), "pip", "install", "--quiet", "--python", venv / "bin" / "python", built["wheel"]], env=env, timeout=600)
    elsewhere = built["tmp"] / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    run_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run_env["COLUMNS"] = "240"  # rich tables: whole recipe names
    return {"venv": venv, "cwd": elsewhere, "env": run_env}


def in_venv(installed, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return _run([installed["venv"] / "bin" / cmd[0], *cmd[1:]], cwd=installed["cwd"], env=installed["env"],
                timeout=timeout)


def test_the_installed_wheel_runs_recipes_and_lock_from_its_shipped_copy(installed):
    listed = in_venv(installed, "recipes", "list").stdout
    for name in (p.stem for p in (REPO / "recipes").glob("*.yaml")):
        assert name in listed, listed
    shown = in_venv(installed, "recipes", "show", "gsm8k-2xA100").stdout
    assert "gsm8k-2xA100" in shown and "algorithm.use_kl_in_reward=True" in shown
    assert "--stack" in in_venv(installed, "doctor", "lock", "--help").stdout

    probe = ("import json, doctor, doctor.paths as p; from doctor.lockfiles import stack_lockfile; "
             "from doctor.recipes import catalog; "
             "print(json.dumps({'pkg': str(p.PACKAGE_DIR), 'root': str(p.source_root()), "
             "'folders': {n: str(p.folder(n)) for n in p.FOLDERS}, "
             "'lock': str(stack_lockfile('verl041-vllm063post1', '3.11')), 'recipes': str(catalog.RECIPES_DIR)}))")
    where = json.loads(in_venv(installed, "python", "-c", probe).stdout)
    pkg = Path(where["pkg"])
    assert "site-packages" in pkg.parts, where  # the installed copy, not the checkout
    for name in FOLDERS:
        assert Path(where["folders"][name]) == pkg / "_shipped" / name, where
        assert (pkg / "_shipped" / name).is_dir()
    assert where["recipes"] == where["folders"]["recipes"]
    lock = Path(where["lock"])
    assert lock.parent == pkg / "_shipped" / "lockfiles" and lock.is_file()
    assert lock.read_bytes() == (REPO / "lockfiles" / lock.name).read_bytes()


def _shipped_in(wheel: Path) -> dict[str, set[str]]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    return {name: {n.split(f"doctor/_shipped/{name}/", 1)[1] for n in names if n.startswith(f"doctor/_shipped/{name}/")}
            for name in FOLDERS}


def test_the_image_wheel_of_an_installed_doctor_carries_the_folders(installed, tmp_path):
    # `doctor container build` puts this wheel into the image: the doctor there needs them too.
    out = tmp_path / "image-wheel"
    code = ("import sys; from pathlib import Path; from doctor.container import DOCKERFILE, build_doctor_wheel; "
            "assert DOCKERFILE.is_file(), DOCKERFILE; print(build_doctor_wheel(Path(sys.argv[1])))")
    wheel = Path(in_venv(installed, "python", "-c", code, str(out), timeout=300).stdout.strip())
    assert _shipped_in(wheel) == {name: set(project_files(name)) for name in FOLDERS}


def test_the_image_wheel_of_the_checkout_carries_the_folders(tmp_path):
    from doctor import paths
    from doctor.container import DOCKERFILE, build_doctor_wheel

    assert DOCKERFILE == REPO / "containers" / "Dockerfile"
    assert all(paths.folder(name) == REPO / name for name in FOLDERS)
    wheel = build_doctor_wheel(tmp_path)
    assert _shipped_in(wheel) == {name: set(project_files(name)) for name in FOLDERS}


# -- the [stack] extra ---------------------------------------------------------------------------


def stack_extra_expected() -> set[str]:
    """The default stack's requirements, each narrowed by its constraint, then the other constraints:
    what knowledge/stacks/ says the stack is (the one copy; pyproject's extra must say the same)."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    from doctor import knowledge

    stack = knowledge.default_stack()
    cons = {c["dist"]: SpecifierSet(c["spec"]) for c in stack["constraints"]}
    out, seen = set(), set()
    for text in stack["requirements"]:
        req = Requirement(text)
        spec = req.specifier & cons.get(req.name, SpecifierSet())
        out.add(str(Requirement(f"{req.name}{'[' + ','.join(sorted(req.extras)) + ']' if req.extras else ''}{spec}")))
        seen.add(req.name)
    out |= {str(Requirement(f"{d}{s}")) for d, s in cons.items() if d not in seen}
    return out


def test_the_stack_extra_is_the_default_stack(tmp_path):
    import tomllib

    from packaging.requirements import Requirement

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["stack"]
    assert {str(Requirement(r)) for r in extra} == stack_extra_expected()


def test_installing_the_stack_extra_gives_an_env_the_doctor_finds_healthy(tmp_path):
    """`pip install "<checkout>[stack]"` (resolved by uv, as pip would from the index, with the tests'
    shared cache): the deep check with --no-gpu has no error (issue 28: the old extra resolved
    pyarrow 25 + datasets 2.14 + fsspec 2026, and `import datasets` failed)."""
    env = uv_env()
    venv = tmp_path / "stack"
    _run([uv(), "venv", "-q", "-p", sys.executable, venv], env=env)
    _run([uv(), "pip", "install", "-q", "-p", venv / "bin" / "python", f"{REPO}[stack]"], env=env, timeout=1500)
    proc = subprocess.run([sys.executable, "-m", "doctor", "check", "--no-gpu", "--no-cache", "--json", "--python",
                           str(venv / "bin" / "python")], capture_output=True, text=True, timeout=900)
    doc = json.loads(proc.stdout)
    errors = [f"{f['id']}: {f['title']}" for f in doc["findings"] if f["severity"] == "error"]
    assert not errors and proc.returncode == 0, errors or proc.stderr[-2000:]
