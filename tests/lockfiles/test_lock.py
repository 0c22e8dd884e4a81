"""`doctor lock`: committed lockfiles are reproducible from the stack data (needs the registry)."""

from __future__ import annotations

import pytest

from conftest import REPO, run_doctor
from doctor import knowledge

pytestmark = pytest.mark.realenv


def locked_stacks() -> dict:
    """The stacks that ship lockfiles (one that has none yet says so: `lock_note`)."""
    return {n: s for n, s in knowledge.stacks().items() if not s.get("lock_note")}


def test_every_stack_has_hashed_lockfiles_for_its_pythons():
    assert {"verl041-vllm063post1", "verl030-vllm063"} <= set(locked_stacks())
    for name, stack in locked_stacks().items():
        for py in stack["python"]:
            text = (REPO / "lockfiles" / f"{name}-py{py}.txt").read_text()
            assert "--hash=sha256:" in text and "torch==2.4.0" in text
            assert "flash-attn" not in text.split("# flash-attn", 1)[0].lower().replace("flash-attn ", "")


@pytest.mark.parametrize("stack,py", [("verl041-vllm063post1", "3.11"), ("verl030-vllm063", "3.10")])
def test_lock_reproduces_the_committed_file(tmp_path, stack, py):
    proc = run_doctor("lock", "--stack", stack, "--python", py, "--out", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    made = (tmp_path / f"{stack}-py{py}.txt").read_text()
    assert made == (REPO / "lockfiles" / f"{stack}-py{py}.txt").read_text()


def test_lock_pins_the_constraints_that_make_the_stack_work():
    text = (REPO / "lockfiles" / "verl041-vllm063post1-py3.11.txt").read_text()
    for pin in ("verl==0.4.1", "vllm==0.6.3.post1", "transformers==4.47.1", "numpy==1.26.4",
                "setuptools==79.0.1", "tensordict==0.5.0", "ray==2.41.0", "pyarrow==20.0.0", "fsspec==2023.9.2",
                "datasets==4.0.0"):
        assert f"\n{pin} " in text, pin


def test_the_wheel_ships_the_committed_lockfiles(tmp_path):
    # The lockfiles live in the repository's lockfiles/; the wheel (built from the sdist, as from
    # PyPI) must hold real copies of the files, in doctor/_shipped/lockfiles/ (doctor/paths.py).
    import subprocess
    import zipfile

    from envs import uv, uv_env

    proc = subprocess.run([uv(), "build", "-o", str(tmp_path), str(REPO)], capture_output=True,
                          text=True, env=uv_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("verl_doctor-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        for name, stack in locked_stacks().items():
            for py in stack["python"]:
                shipped = zf.read(f"doctor/_shipped/lockfiles/{name}-py{py}.txt")
                assert shipped == (REPO / "lockfiles" / f"{name}-py{py}.txt").read_bytes()
