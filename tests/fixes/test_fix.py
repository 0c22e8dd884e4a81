"""`doctor fix` / `doctor rollback` (issue 4).

The realenv tests change environments, so each works on a private copy made by
envs.build_copy() (same lockfile + mutation + uv cache as the shared env, which stays untouched),
rebuilt fresh for every test at one path: the probe cache (path + exact dist set) then serves the
states that recur (the fixed working set, the broken sets) instead of re-importing vllm each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, check_json, envs, run_doctor  # noqa: F401

from doctor import findings as F
from doctor.fixes import build_plan, entry_for, fix_entries
from doctor.knowledge import default_stack, finding_defs

UV_ENV = {"UV_CACHE_DIR": str(envs.ROOT / "uv-cache")}  # the tests' warm uv cache


# ----------------------------------------------------------------------------------------- fast


def _f(fid, **params):
    return F.make(fid, ["test"], python="/x/bin/python", **params)


def test_every_automatic_finding_has_fix_data_with_a_source():
    # One entry holds the finding and its plan: `automatic` is derived from the plan, never declared.
    from doctor.fixes import STEP_KINDS, build_plan  # noqa: F401 - build_plan's module registers the kinds
    from doctor.fixes import packages, ray_sessions  # noqa: F401

    defs = finding_defs()
    assert fix_entries(), "no finding has a fix.plan"
    for e in fix_entries():
        assert e["id"] in defs, f"plan of {e['id']}: no such finding"
        assert "automatic" not in defs[e["id"]]["fix"]
        assert e["reason"] is not None and e["source"] is not None and e["kind"] in set(STEP_KINDS) | {"packages", "sync-lock"}
    for fid, d in defs.items():
        texts = [d["title"], d["fix"]["summary"], *d["fix"].get("commands", []), *d["sources"]]
        params = {k: "x" for t in texts for k in F.placeholders(t)}
        made = F.make(fid.replace("*", "transformers"), ["t"], severity="error", **params)
        assert made.fix.automatic == ("plan" in d["fix"]), fid
        assert (entry_for(made.id) is not None) == made.fix.automatic, f"{fid}: automatic without a plan"


def test_plan_one_resolution_for_all_package_findings():
    stack = default_stack()
    found = [
        _f("stack.verl-rejects-vllm", verl="0.2.0.post1", vllm="0.6.3.post1"),
        F.make("version.verl", ["t"], severity="warning", dist="verl", installed="0.2.0.post1", spec="==0.4.1",
               stack=stack["name"], reason="r", source="s", python="/x/bin/python"),
        _f("python.setuptools-missing", modules="vllm"),
        _f("python.pkg-resources-missing", modules="verl", setuptools="none"),
        _f("vllm.tokenizer-incompatible", transformers="5.0.0"),
        _f("gpu.none", reason="no NVML"),
        F.make("flash-attn.missing", ["t"], severity="warning", python="/x/bin/python", wheel_url="u", torch_mm="2.4", py="3.11"),
        _f("stack.detected", family=stack["family"], stack=stack["name"], met=1, total=2, pyver="3.11", how="h", lockfile="l.txt"),
    ]
    plan = build_plan(found, python="/x/bin/python", stack=stack)
    assert [s.kind for s in plan.steps] == ["packages"]
    step = plan.steps[0]
    assert step.data["requirements"] == ["verl==0.4.1", "setuptools<80", "transformers>=4.45.2,<=4.47.1"]
    assert set(step.targets) == {"stack.verl-rejects-vllm", "version.verl", "python.setuptools-missing",
                                 "python.pkg-resources-missing", "vllm.tokenizer-incompatible"}
    assert "--constraint" in step.commands[0] and step.commands[0].count("uv pip install") == 1
    assert all(r["source"] and r["reason"] for r in step.reasons)
    assert [m["id"] for m in plan.manual] == ["gpu.none", "flash-attn.missing"]  # info findings are not steps
    assert plan.manual[0]["commands"] == ["nvidia-smi"]

    only = build_plan(found, python="/x/bin/python", stack=stack, only=["python.*"])
    assert only.steps[0].data["requirements"] == ["setuptools<80"]
    assert "vllm.tokenizer-incompatible" in only.excluded

    locked = build_plan(found + [_f("lock.drift", count=3, lockfile="L")], python="/x/bin/python", stack=stack,
                        lockfile="L")
    assert [s.kind for s in locked.steps] == ["sync-lock"]
    assert "--require-hashes" in locked.steps[0].commands[0]
    assert {"lock.drift", "stack.verl-rejects-vllm"} <= set(locked.steps[0].targets)


def test_plan_takes_the_findings_own_values():
    # stack.culprit names the changed distribution and its known-good version: `doctor fix` installs
    # exactly that, under the lockfile the finding was judged against (issue 24: fixes that fix)
    from doctor.stacks import stack_lockfile

    stack = default_stack()
    lock = str(stack_lockfile(stack["name"], "3.11"))
    culprit = _f("stack.culprit", dist="pydantic-core", installed="2.27.2", locked="2.50.5", modules="vllm", lockfile=lock)
    plan = build_plan([culprit], python="/x/bin/python", stack=stack)
    (step,) = plan.steps
    assert step.data["requirements"] == ["pydantic-core==2.50.5"] and step.targets == ["stack.culprit"]
    assert step.data["lock_constraints"] == [lock] and f"--constraint {lock}" in step.commands[0]
    assert not plan.manual

    # a missing distribution: installed at its locked version
    gone = _f("stack.culprit", dist="pyyaml", installed="missing", locked="6.0.2", modules="ray", lockfile=lock)
    assert build_plan([gone], python="/x/bin/python", stack=stack).steps[0].data["requirements"] == ["pyyaml==6.0.2"]

    # two wheels on one path: the one that must win is reinstalled; an info overlap (stray files) is no step
    overlap = dict(a="nvidia-nccl-cu11", b="nvidia-nccl-cu12", differ=3, last="nvidia-nccl-cu12", version="2.20.5", advice="a",
                   other="nvidia-nccl-cu11")
    plan = build_plan([_f("python.files-overlap", severity="error", other_version="2.14.3", **overlap)],
                      python="/x/bin/python", stack=stack)
    (step,) = plan.steps
    assert step.kind == "reinstall-winner" and step.data["other"] == "nvidia-nccl-cu11"
    assert step.commands[0].endswith("--no-deps --reinstall-package nvidia-nccl-cu12 nvidia-nccl-cu12==2.20.5")
    stray = build_plan([_f("python.files-overlap", severity="info", other_version="2.14.3", **overlap)], python="/x/bin/python", stack=stack)
    assert not stray.steps and not stray.manual


def test_usage_errors_exit_2(tmp_path):
    py = sys.executable
    # no terminal (stdin is a pipe) and no --yes: refuses before touching anything
    proc = run_doctor("fix", "--python", py, input="")
    assert proc.returncode == 2 and "--yes" in proc.stderr
    proc = run_doctor("fix", "--python", py, "--json", input="")
    assert proc.returncode == 2
    assert run_doctor("fix", "--python", py, "--only", "no.such-id", "--dry-run").returncode == 2
    assert run_doctor("fix", "--python", py, "--stack", "nope", "--dry-run").returncode == 2
    assert run_doctor("fix", "--python", py, "--lock", str(tmp_path / "missing.txt"), "--dry-run").returncode == 2
    proc = run_doctor("rollback", "--yes", env={"VERL_DOCTOR_STATE_DIR": str(tmp_path / "empty-state")})
    assert proc.returncode == 2 and "no snapshots" in proc.stderr
    assert run_doctor("rollback", "no-such-snapshot", "--yes").returncode == 2


def test_second_fix_on_the_same_target_refuses(tmp_path, monkeypatch):
    from doctor.fixes.snapshot import target_lock

    monkeypatch.setenv("VERL_DOCTOR_STATE_DIR", str(tmp_path / "state"))
    with target_lock(sys.executable):  # what a running `doctor fix` holds while it works
        proc = run_doctor("fix", "--yes", "--python", sys.executable)
        assert proc.returncode == 2 and "another doctor fix" in proc.stderr, proc.stderr
        assert run_doctor("rollback", "--yes", "--python", sys.executable).returncode == 2


# ------------------------------------------------------------------------------------- real envs

@pytest.fixture(scope="module")
def copy_of(tmp_path_factory):
    """A fresh private copy of a broken env, always at the same path. The doctor's probe cache is
    keyed by interpreter path + exact dist set, so the fixed states (mostly the lock's working set)
    and the broken states recur across tests and are probed once each."""
    target = tmp_path_factory.mktemp("fix-envs") / "target"
    return lambda name: str(envs.build_copy(name, target))


def freeze(py: str) -> str:
    proc = subprocess.run([envs.uv(), "pip", "freeze", "--python", py], capture_output=True, text=True,
                          env=envs.uv_env(), check=True)
    return proc.stdout


def fix(*args, **kw):
    proc = run_doctor("fix", "--json", *args, env=UV_ENV, **kw)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def errors(doc) -> set[str]:
    return {f["id"] for f in doc["findings"] if f["severity"] == "error"}


BROKEN_IMPORT = {"pin-numpy1252": "verl", "extra-nccl-cu11": "torch"}


def imports(py: str, module: str) -> bool:
    return subprocess.run([py, "-c", f"import {module}"], capture_output=True, cwd="/tmp", timeout=300).returncode == 0


@pytest.mark.realenv
@pytest.mark.parametrize("name,expect_fixed", [
    ("transformers5", {"vllm.tokenizer-incompatible", "version.transformers"}),
    ("verl020post1", {"stack.verl-rejects-vllm"}),
    ("no-setuptools", {"python.setuptools-missing"}),
    ("setuptools80", {"python.pkg-resources-missing"}),
    # issue 24: the cause found through the known-good set is repaired, not only named
    ("pin-numpy1252", {"stack.culprit"}),        # numpy under pandas' floor: back to the locked numpy
    ("extra-nccl-cu11", {"python.files-overlap"}),  # a second NCCL wheel's library over cu12's: cu12 reinstalled
])
def test_fix_then_rollback(copy_of, name, expect_fixed):
    py = copy_of(name)
    broken = freeze(py)

    if name == "transformers5":
        # --dry-run prints the plan and changes nothing (and warms the probe cache for the fix)
        rc, doc = fix("--dry-run", "--python", py)
        assert rc == 0 and doc["status"] == "planned" and doc["snapshot"] is None
        assert doc["plan"]["steps"][0]["changes"]  # what it would change, from uv's dry run
        assert freeze(py) == broken

    # a second `doctor fix` while the first is applying: exit 2
    first = subprocess.Popen([sys.executable, "-m", "doctor", "fix", "--json", "--yes", "--python", py],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO),
                             env={**os.environ, **UV_ENV})
    from doctor.fixes.snapshot import lock_path

    lock = lock_path(py)
    deadline = time.time() + 60
    while time.time() < deadline and first.poll() is None:
        if lock.exists() and f"pid {first.pid} " in lock.read_text():
            break
        time.sleep(0.05)
    second = run_doctor("fix", "--yes", "--python", py, env=UV_ENV)
    assert second.returncode == 2 and "another doctor fix" in second.stderr, second.stderr
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    doc = json.loads(out)
    assert doc["status"] == "fixed" and expect_fixed <= set(doc["fixed"]), doc
    # one uv resolution for every package finding (besides moving this machine's stale Ray sessions aside)
    assert len([s for s in doc["plan"]["steps"] if s["kind"] != "ray-quarantine"]) == 1, doc["plan"]["steps"]

    # the next check: no error findings except host facts (no GPU here)
    proc = run_doctor("check", "--json", "--python", py)
    after = json.loads(proc.stdout)
    assert {e for e in errors(after) if not e.startswith("gpu.")} == set(), after["findings"]
    # the import that failed passes now (a wheel reinstalled over another's files: the same freeze)
    broke = BROKEN_IMPORT.get(name)
    if broke:
        assert imports(py, broke), f"import {broke} still fails after the fix"
    else:
        assert freeze(py) != broken

    # rollback: the broken freeze, byte for byte (and the broken import, where there is one)
    proc = run_doctor("rollback", "--yes", "--python", py, env=UV_ENV)
    assert proc.returncode == 0, proc.stderr
    assert freeze(py) == broken
    if broke:
        assert not imports(py, broke), f"import {broke} passes after the rollback: the broken state is not back"
    snap = Path(doc["snapshot"]["path"])
    meta = json.loads((snap / "snapshot.json").read_text())
    assert meta["status"] == "rolled-back" and meta["target"] == py and meta["plan"]["steps"]
    assert (snap / "freeze.txt").read_text() == broken

    if name == "transformers5":
        # the rollback snapshotted the fixed state first: rolling that back re-applies the fix
        from doctor.fixes import snapshot as snapmod

        (before,) = [s for s in snapmod.list_all(py) if s.meta.get("before_rollback_to") == meta["id"]]
        assert before.meta["status"] == "replaced-by-rollback" and before.id in proc.stdout
        proc = run_doctor("rollback", before.id, "--yes", "--python", py, env=UV_ENV)
        assert proc.returncode == 0, proc.stderr
        assert freeze(py) == before.freeze_path.read_text() != broken
        # a bare `doctor rollback` still means "undo the last fix"
        proc = run_doctor("rollback", "--yes", "--python", py, env=UV_ENV)
        assert proc.returncode == 0 and meta["id"] in proc.stdout, proc.stderr
        assert freeze(py) == broken


@pytest.mark.realenv
def test_failing_recheck_rolls_back(copy_of, tmp_path):
    """A lockfile that pins setuptools 84.2.1 (no pkg_resources): the sync installs it, the re-check
    still finds python.pkg-resources-missing (a targeted error), so the fix is rolled back."""
    py = copy_of("no-setuptools")
    broken = freeze(py)
    good = (REPO / "lockfiles" / "verl041-vllm063post1-py3.11.txt").read_text()
    req = tmp_path / "st.in"
    req.write_text("setuptools==84.2.1\n")
    bad_pin = subprocess.run([envs.uv(), "pip", "compile", "--generate-hashes", "--no-header", "--no-annotate",
                              "--quiet", "--python-version", "3.11", "--exclude-newer", envs.EXCLUDE_NEWER, str(req)],
                             capture_output=True, text=True, env=envs.uv_env(), check=True).stdout
    start = good.index("\nsetuptools==") + 1
    end = good.index("\n", good.index("--hash", good.index("--hash", start) + 1)) + 1
    bad = tmp_path / "bad-lock.txt"
    bad.write_text(good[:start] + bad_pin + good[end:])

    rc, doc = fix("--yes", "--python", py, "--lock", str(bad))
    assert rc == 1, doc
    assert doc["status"] == "rolled-back"
    assert "python.pkg-resources-missing" in doc["unfixed"], doc
    assert doc["plan"]["steps"][0]["kind"] == "sync-lock"
    assert any("setuptools" in c for c in doc["plan"]["steps"][0]["changes"])
    assert freeze(py) == broken


def _env_processes(prefix: str) -> list[str]:
    """Command lines of live processes running an interpreter of this env (probes, Ray daemons)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if exe.startswith(prefix + "/") or (cmd and cmd[0].decode(errors="replace").startswith(prefix + "/")):
            found.append(b" ".join(cmd)[:120].decode(errors="replace"))
    return found


@pytest.mark.realenv
def test_ctrl_c_during_the_recheck_stops_the_probes_and_leaves_a_snapshot(copy_of, tmp_path):
    """Ctrl-C as a terminal sends it (SIGINT to the foreground process group) while the re-check's
    deep probes run (an empty probe cache makes them run for real: a ~20 s window): exit 130 within
    seconds, no probe process left behind, the snapshot marked interrupted, and the rollback it
    prints restores the broken freeze byte for byte."""
    from doctor.fixes import snapshot as snapmod

    py = copy_of("no-setuptools")
    prefix = snapmod.env_prefix(py)
    broken = freeze(py)
    known = {s.id for s in snapmod.list_all(py)}
    env = {**os.environ, **UV_ENV, "VERL_DOCTOR_CACHE_DIR": str(tmp_path / "empty-cache")}
    proc = subprocess.Popen([sys.executable, "-m", "doctor", "fix", "--json", "--yes", "--python", py],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO), env=env,
                            start_new_session=True)
    snap = None
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        new = [s for s in snapmod.list_all(py) if s.id not in known]
        if new and new[0].meta.get("status") == "applied":  # applied; the re-check is running
            snap = new[0]
            break
        time.sleep(0.1)
    assert snap is not None, proc.communicate()[1][-3000:]
    time.sleep(2)  # well inside the re-check's deep probes
    t0 = time.monotonic()
    os.killpg(proc.pid, 2)  # SIGINT to the group, as a terminal's Ctrl-C
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - t0
    print(f"exit {took:.2f} s after Ctrl-C")
    assert proc.returncode == 130, err[-3000:]
    assert took < 10, f"exit took {took:.1f} s after Ctrl-C"  # 2.6 s here; 16 s when the probes were waited for
    assert f"doctor rollback {snap.id} --yes" in err
    assert json.loads(out)["status"] == "interrupted"
    assert snapmod.find(snap.id).meta["status"] == "interrupted"
    left = _env_processes(prefix)
    assert not left, left

    proc = run_doctor("rollback", snap.id, "--yes", "--python", py, env=UV_ENV)
    assert proc.returncode == 0, proc.stderr
    assert freeze(py) == broken
