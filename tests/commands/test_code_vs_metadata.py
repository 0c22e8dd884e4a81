"""Code that is not what the metadata says, on real envs: an old verl source tree first on sys.path
(tests/data/differential/CASES.yaml shadow-oldverl; https://github.com/Jiayi-Pan/TinyZero/issues/111),
and a compiled file that a RECORD lists deleted from disk (missing-raylet;
https://github.com/ray-project/ray/issues/20479)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import envs, run_doctor

FAST = ("--no-gpu", "--skip-probe", "ray_smoke", "--skip-probe", "registry", "--no-cache")


def _check(py, env=None) -> dict:
    proc = run_doctor("check", "--json", *FAST, "--python", str(py), env=env)
    assert proc.stdout.strip(), proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.realenv
def test_an_old_source_tree_first_on_sys_path_is_named(tmp_path):
    old = tmp_path / "old"
    subprocess.run([envs.uv(), "pip", "install", "--quiet", "--no-deps", "--target", str(old),
                    "--exclude-newer", envs.EXCLUDE_NEWER, "--python", str(envs.build("working")), "verl==0.2.0.post1"],
                   check=True, env=envs.uv_env(), capture_output=True)
    import shutil

    for info in old.glob("*.dist-info"):  # a bare source tree, as a git clone on PYTHONPATH is
        shutil.rmtree(info)
    doc = _check(envs.build("working"), env={"PYTHONPATH": str(old)})
    f = next(f for f in doc["findings"] if f["id"] == "python.shadowed-package")
    assert f["title"].startswith(f"verl is imported from {old}/verl/__init__.py (0.2.0.post1), not from the installed verl 0.4.1")
    assert "{" not in " ".join(x["title"] for x in doc["findings"])  # no raw {placeholders} anywhere
    assert "python.shadowed-package" not in {x["id"] for x in _check(envs.build("working"))["findings"]}


@pytest.mark.realenv
def test_a_deleted_compiled_file_is_named_and_the_fix_restores_it(tmp_path):
    py = envs.build_copy("working", tmp_path / "env")
    site = next((tmp_path / "env" / "lib").glob("python3*/site-packages"))
    (site / "ray" / "_raylet.so").unlink()
    doc = _check(py)
    f = next(f for f in doc["findings"] if f["id"] == "python.half-installed")
    assert "ray: ray/_raylet.so (missing)" in f["evidence"] and "ray" in f["title"]
    shell = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    shell.update(PATH="/usr/local/bin:/usr/bin:/bin", UV_CACHE_DIR=envs.uv_env()["UV_CACHE_DIR"])
    proc = subprocess.run(["bash", "-c", f["fix"]["commands"][0]], env=shell, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = _check(py)
    assert "python.half-installed" not in {x["id"] for x in after["findings"]}
    assert after["facts"]["imports"]["modules"]["ray"]["ok"]
