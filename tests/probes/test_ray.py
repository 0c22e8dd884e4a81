"""Ray state, findings and the smoke probe, against real Ray (the `working` env, ray 2.41.0).

Every test uses its own short RAY_TMPDIR under /tmp and only ever signals the processes that carry
it (in /proc/PID/environ or the command line: Ray workers rename theirs); a finalizer kills what a
test left and asserts nothing of it survives. Nothing machine-wide (`ray stop`) is ever run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import check_json, finding, ids, run_doctor

import envs
from doctor.probes import TARGET_PROBES, TargetProbe, run_target_probe
from doctor.probes.ray_state import ray_state_facts, socket_path_length
from doctor.fixes.ray_sessions import RefusedError, quarantine, restore, stale_targets
from doctor.rules import Context
from doctor.rules import ray as ray_rules


def own_pids(tmp: str) -> list[int]:
    """Processes that belong to a test: its RAY_TMPDIR in their environment or its path in argv."""
    env_mark = f"RAY_TMPDIR={tmp}".encode()
    mark = tmp.encode()
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
            try:
                env = Path(f"/proc/{p}/environ").read_bytes()
            except OSError:
                env = b""
        except OSError:
            continue
        if env_mark in env.split(b"\0") or mark + b"/" in cmd:
            out.append(int(p))
    return out


def kill_own(tmp: str, timeout: float = 10) -> list[int]:
    killed = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        pids = own_pids(tmp)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    return sorted(set(killed))


@pytest.fixture
def ray_tmp():
    tmp = tempfile.mkdtemp(prefix="rd", dir="/tmp")
    yield tmp
    kill_own(tmp)
    left = own_pids(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    assert not left, f"processes of {tmp} survived: {left}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(tmp: str, *extra: str, python: str | None = None, env: dict | None = None) -> tuple[int, dict]:
    e = {"RAY_TMPDIR": tmp}
    e.update(env or {})
    proc = run_doctor("check", "--fast", "--json", "--python", python or sys.executable, *extra, env=e, timeout=120)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["probes"]["ray_state"]["ok"], doc["probes"]["ray_state"]
    return proc.returncode, doc


def clean_env(tmp: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TMPDIR")}
    env["RAY_TMPDIR"] = tmp
    return env


# --- real Ray: live → killed → stale + dead address → quarantine → fresh start ---------------------

@pytest.mark.realenv
def test_live_then_killed_head_then_quarantine(ray_tmp):
    py = str(envs.build("working"))
    ray_bin = str(Path(py).parent / "ray")
    port = free_port()
    start = subprocess.run(
        [ray_bin, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
         f"--ray-client-server-port={free_port()}", f"--dashboard-port={free_port()}",
         "--min-worker-port=20000", "--max-worker-port=20099"],
        env=clean_env(ray_tmp), capture_output=True, text=True, timeout=120)
    assert start.returncode == 0, start.stderr[-3000:]

    rc, doc = check(ray_tmp, python=py)
    assert "ray.live-session" in ids(doc) and "ray.stale-session" not in ids(doc), ids(doc)
    assert "ray.dead-cluster-address" not in ids(doc)
    live = finding(doc, "ray.live-session")
    assert live["severity"] == "info" and "raylet pid" in live["evidence"][0] and "gcs_server pid" in live["evidence"][0]
    state = doc["facts"]["ray_state"]
    assert state["current_cluster"]["answers"] is True and state["current_cluster"]["port"] == port
    (session,) = state["sessions"]
    assert session["live"] and session["head"] and session["raylet_socket"]["accepts"]
    # The live session is never moved, by quarantine() or by doctor fix.
    with pytest.raises(RefusedError, match="live session"):
        quarantine([session["path"]], ray_tmp)
    before = own_pids(ray_tmp)
    fix = run_doctor("fix", "--yes", "--only", "ray.*", "--python", py, env={"RAY_TMPDIR": ray_tmp}, timeout=600)
    assert fix.returncode == 0, fix.stderr[-2000:]
    assert os.path.isdir(session["path"]) and set(before) <= set(own_pids(ray_tmp))
    assert not list(Path(ray_tmp, "ray").glob("quarantine-*"))

    # Cluster mode: a second node from another venv (same Ray, transformers 4.46.3) joins the head;
    # a task pinned to each node reads that node's own versions.
    other = Path(envs.build("working-tf446")).parent / "ray"
    join = subprocess.run([str(other), "start", f"--address=127.0.0.1:{port}", "--num-cpus=1",
                           "--min-worker-port=20100", "--max-worker-port=20199"],
                          env=clean_env(ray_tmp), capture_output=True, text=True, timeout=120)
    assert join.returncode == 0, join.stderr[-3000:]
    rc, doc = check(ray_tmp, "--cluster", f"127.0.0.1:{port}", python=py)
    drift = finding(doc, "ray.version-drift")
    assert drift["severity"] == "error" and "transformers" in drift["title"] and "2 nodes" in drift["title"]
    table = "\n".join(drift["evidence"])
    assert "4.47.1" in table and "4.46.3" in table and "working-tf446" in table and "(head)" in table
    assert len(doc["facts"]["ray_cluster"]["nodes"]) == 2

    killed = kill_own(ray_tmp)
    assert killed and not own_pids(ray_tmp)

    rc, doc = check(ray_tmp, python=py)
    assert rc == 1
    assert {"ray.stale-session", "ray.dead-cluster-address"} <= ids(doc), ids(doc)
    assert "ray.live-session" not in ids(doc)
    dead = finding(doc, "ray.dead-cluster-address")
    assert dead["severity"] == "error" and f":{port}" in dead["title"]
    stale = finding(doc, "ray.stale-session")
    assert session["path"] in stale["evidence"][0] and "age" in stale["evidence"][0]

    # The real symptom of the stale pointer: verl's ray.init(num_cpus=…) refuses at once.
    init = ("import ray; ray.init(num_cpus=1, include_dashboard=False); "
            "print('TASK', ray.get(ray.remote(lambda: 41 + 1).remote())); ray.shutdown()")
    proc = subprocess.run([py, "-c", init], env=clean_env(ray_tmp), capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "When connecting to an existing cluster, num_cpus and num_gpus must not be provided" in proc.stderr

    targets = stale_targets(doc["facts"]["ray_state"])
    assert set(targets) == {session["path"], state["current_cluster"]["path"]}

    # doctor fix quarantines them (one restorable step); the re-check is clean.
    env = {"RAY_TMPDIR": ray_tmp}
    fix = run_doctor("fix", "--yes", "--json", "--only", "ray.*", "--python", py, env=env, timeout=600)
    assert fix.returncode == 0, (fix.stdout[-2000:], fix.stderr[-2000:])
    assert all(not os.path.exists(t) for t in targets)
    moved = sorted(Path(ray_tmp, "ray").glob("quarantine-*/*"))
    assert {p.name for p in moved} == {Path(t).name for t in targets}

    rc, doc = check(ray_tmp, python=py)
    assert not {"ray.stale-session", "ray.dead-cluster-address", "ray.live-session"} & ids(doc), ids(doc)
    proc = subprocess.run([py, "-c", init], env=clean_env(ray_tmp), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "TASK 42" in proc.stdout, proc.stderr[-3000:]
    kill_own(ray_tmp)

    # doctor rollback moves the quarantined state back where it was.
    for p in Path(ray_tmp, "ray").glob("session_2*"):
        if p.name != Path(session["path"]).name:
            shutil.rmtree(p)  # the fresh session of the ray.init() above: not ours to keep
    (Path(ray_tmp, "ray") / "ray_current_cluster").unlink(missing_ok=True)
    back = run_doctor("rollback", "--yes", "--python", py, env=env, timeout=300)
    assert back.returncode == 0, back.stderr[-2000:]
    assert all(os.path.exists(t) for t in targets)


@pytest.mark.realenv
def test_smoke_probe_and_its_failure(ray_tmp):
    py = str(envs.build("working"))
    ok = run_target_probe(TARGET_PROBES["ray_smoke"], py)
    assert ok.ok and ok.data["ok"] and ok.data["stage"] == "done", ok
    assert ok.data["temp_removed"] and not os.path.exists(ok.data["temp_dir"])
    assert not own_pids(ok.data["temp_dir"])

    # A real failure: the same script under a temp root too long for Ray's sockets.
    long_prefix = os.path.join(ray_tmp, "x" * 60, "vd-")
    os.makedirs(os.path.dirname(long_prefix))
    probe = TargetProbe("ray_smoke", ("ray_private.py", "ray_smoke.py"), budget_s=90, deep=True,
                        args=lambda: [long_prefix, "60", "raylet.out,gcs_server.err", "5"])
    bad = run_target_probe(probe, py)
    assert bad.ok and not bad.data["ok"] and bad.data["stage"] == "init", bad
    assert "AF_UNIX path length cannot exceed 107 bytes" in bad.data["error"]["message"]
    assert bad.data["temp_removed"] and not own_pids(bad.data["temp_dir"])
    # Ray's own socket path is never longer than the doctor's prediction for that root.
    ray_path = bad.data["error"]["message"].split("bytes: ")[1].strip("'\"")
    predicted = socket_path_length(os.path.dirname(bad.data["temp_dir"]) + "/" + os.path.basename(bad.data["temp_dir"]))
    assert len(ray_path.encode()) <= predicted["bytes"] and predicted["too_long"]

    found = list(ray_rules.smoke_failed({"ray_smoke": bad.data}, Context(python=py)))
    # the signature table names the cause in the smoke's error; the smoke's failure is listed under it
    assert [f.id for f in found] == ["ray.tmpdir-too-long", "ray.smoke-failed"] and found[1].severity == "error"
    assert found[1].caused_by == "ray.tmpdir-too-long" and "AF_UNIX" in found[1].title


# --- the temp root and garbage layouts (no Ray needed: facts come from the doctor's process) -------

def test_tmpdir_too_long(ray_tmp):
    long_root = os.path.join(ray_tmp, "a" * 40)
    rc, doc = check(long_root)
    f = finding(doc, "ray.tmpdir-too-long")
    sock = doc["facts"]["ray_state"]["socket"]
    assert f["severity"] == "error" and sock["bytes"] > 107 and str(sock["bytes"]) in f["title"]
    assert sock["bytes"] == len(long_root) + 68 - (7 - sock["pid_digits"])
    # TMPDIR moves Ray's root too, and RAY_TMPDIR beats it.
    env = {k: v for k, v in os.environ.items() if k != "RAY_TMPDIR"}
    proc = subprocess.run([sys.executable, "-m", "doctor", "check", "--fast", "--json", "--python", sys.executable],
                          env={**env, "TMPDIR": long_root}, capture_output=True, text=True, timeout=120)
    doc = json.loads(proc.stdout)
    assert doc["facts"]["ray_state"]["temp_root"] == {"root": long_root, "source": "TMPDIR"}
    assert "ray.tmpdir-too-long" in ids(doc)
    rc, doc = check(ray_tmp, env={"TMPDIR": long_root})
    assert doc["facts"]["ray_state"]["temp_root"]["source"] == "RAY_TMPDIR" and "ray.tmpdir-too-long" not in ids(doc)


def _garbage(tmp: str) -> Path:
    base = Path(tmp) / "ray"
    base.mkdir()
    (base / "session_latest").symlink_to(base / "session_2020-01-01_00-00-00_000000_99")
    (base / "session_x").write_text("not a dir")
    (base / "session_link").symlink_to("/nonexistent/target")
    locked = base / "session_2021-02-03_04-05-06_000007_123"
    (locked / "sockets").mkdir(parents=True)
    (locked / "logs").mkdir()
    (locked / "logs" / "raylet.out").write_text("x" * 1000)
    locked.chmod(0)
    (base / "ray_current_cluster").write_text("garbage without a port\n")
    return locked


def test_garbage_layouts_are_facts_not_crashes(ray_tmp):
    os.chmod(ray_tmp, 0o755)
    locked = _garbage(ray_tmp)
    try:
        rc, doc = check(ray_tmp)
        st = doc["facts"]["ray_state"]
        by = {s["name"]: s for s in st["sessions"]}
        assert by["session_x"]["kind"] == "file"
        assert by["session_link"]["kind"] == "symlink" and by["session_link"]["dangling"]
        assert st["session_latest"]["dangling"] is True
        assert st["current_cluster"]["parsed"] is False
        assert "ray.dead-cluster-address" in ids(doc)
        assert "ray.stale-session" in ids(doc)  # the chmod 000 session dir (root can still read it)

        # As an unprivileged user the 000 dir cannot be read: still facts, never an exception.
        ray_state_facts({"RAY_TMPDIR": ray_tmp})  # load lazy stdlib modules before dropping privileges
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            try:
                os.close(r)
                os.setgid(65534)
                os.setuid(65534)
                data = json.dumps(ray_state_facts({"RAY_TMPDIR": ray_tmp}), default=str)
            except BaseException as exc:  # noqa: BLE001
                data = json.dumps({"crash": repr(exc)})
            os.write(w, data.encode())
            os._exit(0)
        os.close(w)
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
        os.waitpid(pid, 0)
        facts = json.loads(b"".join(chunks))
        assert "crash" not in facts, facts
        s = {x["name"]: x for x in facts["sessions"]}[locked.name]
        if os.getuid() == 0:
            assert s["size"]["errors"] >= 1 and "Permission" in s["raylet_socket"]["error"]
            # root's session, root's processes unreadable to this user: not known to be free, so
            # never stale (a fix run by this user leaves it alone)
            assert s["unknown_holders"] is True and s["live"] is True

        # A file where the ray dir should be; a root that does not exist.
        other = Path(ray_tmp) / "other"
        other.mkdir()
        (other / "ray").write_text("a file")
        assert ray_state_facts({"RAY_TMPDIR": str(other)})["ray_dir_state"] == "not a directory"
        assert ray_state_facts({"RAY_TMPDIR": str(Path(ray_tmp) / "nope")})["ray_dir_state"] == "missing"
    finally:
        locked.chmod(0o755)


def test_quarantine_and_restore_on_a_fake_layout(ray_tmp):
    base = Path(ray_tmp) / "ray"
    s1 = base / "session_2020-01-01_00-00-00_000000_1"
    (s1 / "sockets").mkdir(parents=True)
    (s1 / "logs").mkdir()
    (base / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}\n")
    state = ray_state_facts({"RAY_TMPDIR": ray_tmp})
    targets = stale_targets(state)
    assert sorted(targets) == sorted([str(s1), str(base / "ray_current_cluster")])
    moves = quarantine(targets, ray_tmp)
    assert not s1.exists() and len(list(base.glob("quarantine-*/*"))) == 2
    with pytest.raises(RefusedError):
        quarantine(["/etc/passwd"], ray_tmp)
    with pytest.raises(RefusedError):
        quarantine([str(base / "session_latest")], ray_tmp)
    restore(moves)
    assert s1.is_dir() and (base / "ray_current_cluster").is_file() and not list(base.glob("quarantine-*"))

    # A ray_current_cluster whose head answers is not dead: refused.
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        (base / "ray_current_cluster").write_text(f"127.0.0.1:{srv.getsockname()[1]}\n")
        with pytest.raises(RefusedError, match="answers"):
            quarantine([str(base / "ray_current_cluster")], ray_tmp)
        assert ray_state_facts({"RAY_TMPDIR": ray_tmp})["current_cluster"]["answers"] is True


def test_ray_address_pointing_nowhere(ray_tmp):
    rc, doc = check(ray_tmp, env={"RAY_ADDRESS": f"127.0.0.1:{free_port()}"})
    f = finding(doc, "ray.dead-cluster-address")
    assert f["title"].startswith("RAY_ADDRESS names")
    rc, doc = check(ray_tmp, env={"RAY_ADDRESS": "auto"})
    assert "ray.dead-cluster-address" not in ids(doc)


# --- Ray's own imports: a real protobuf that breaks Ray 2.41's gencode, a real missing dependency ---

@pytest.mark.realenv
def test_protobuf_breaking_ray(ray_tmp):
    rc, doc = check_json("protobuf318")
    f = finding(doc, "ray.protobuf-incompatible")
    assert f["severity"] == "error" and "3.18.3" in f["title"] and "2.41.0" in f["title"]
    assert any("import ray: AttributeError: 'NoneType' object has no attribute 'message_types_by_name'" in e
               for e in f["evidence"])
    assert not {"ray.import-failed", "import.failed", "ray.smoke-failed"} & ids(doc), ids(doc)
    # From metadata alone (--fast): 3.18.3 is inside Ray's declared range, below what its gencode needs.
    rc, fast = check(ray_tmp, python=str(envs.build("protobuf318")))
    assert "ray.protobuf-incompatible" in ids(fast)
    assert "ray.protobuf-incompatible" not in ids(check(ray_tmp, python=str(envs.build("working")))[1])


@pytest.mark.realenv
def test_ray_import_failed():
    rc, doc = check_json("ray-no-msgpack")
    f = finding(doc, "ray.import-failed")
    assert f["severity"] == "error" and "No module named 'msgpack'" in f["title"]
    assert "import.failed" not in ids(doc) and "ray.smoke-failed" not in ids(doc)
    assert doc["facts"]["ray_smoke"]["stage"] == "import"


def test_a_session_another_process_holds_is_live_and_never_moved(ray_tmp):
    # issue 24: `doctor fix` moved the session dirs of another job on the same host. A job's workers
    # keep their log files open in its session dir even when no raylet of this user names it.
    base = Path(ray_tmp) / "ray"
    held = base / "session_2020-01-01_00-00-00_000000_7"
    (held / "logs").mkdir(parents=True)
    (held / "sockets").mkdir()
    log = held / "logs" / "worker-1.out"
    job = subprocess.Popen([sys.executable, "-c", f"f = open({str(log)!r}, 'a'); import time; time.sleep(120)"],
                           start_new_session=True)
    try:
        deadline = time.time() + 10
        while time.time() < deadline and not log.exists():
            time.sleep(0.05)
        time.sleep(0.3)
        state = ray_state_facts({"RAY_TMPDIR": ray_tmp})
        s = next(x for x in state["sessions"] if x["name"] == held.name)
        assert s["live"] and job.pid in s["held_by"], s
        assert stale_targets(state) == []
        with pytest.raises(RefusedError, match=f"processes \\[{job.pid}\\] hold it"):
            quarantine([str(held)], ray_tmp)
    finally:
        job.kill()
        job.wait()
    state = ray_state_facts({"RAY_TMPDIR": ray_tmp})   # the job is gone: now it is stale, and movable
    assert stale_targets(state) == [str(held)]
