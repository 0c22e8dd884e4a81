# Ray smoke test in the target: a private Ray instance under a short temporary RAY_TMPDIR, one task,
# shutdown, temp dir removed. It never joins an existing cluster (address="local", RAY_ADDRESS unset)
# and only ever signals processes that carry its own temp dir (in their environment or command line).
# argv: [temp prefix, deadline seconds, log files (comma list), tail lines]
import glob
import shutil
import signal
import tempfile
import threading
import time

prefix = _sys.argv[1] if len(_sys.argv) > 1 else "/tmp/vd-"
deadline = float(_sys.argv[2]) if len(_sys.argv) > 2 else 75.0
log_names = (_sys.argv[3] if len(_sys.argv) > 3 else "raylet.out,raylet.err,gcs_server.err").split(",")
tail_n = int(_sys.argv[4]) if len(_sys.argv) > 4 else 15

tmp = tempfile.mkdtemp(prefix=_os.path.basename(prefix), dir=_os.path.dirname(prefix) or "/tmp")
_os.environ["RAY_TMPDIR"] = tmp
_os.environ.pop("RAY_ADDRESS", None)
result = {"temp_dir": tmp, "stage": "start", "ok": False, "seconds": {}}
done = threading.Event()
lock = threading.Lock()


def own_pids():
    """Processes started by this smoke test: our temp dir in their environment or command line."""
    me = _os.getpid()
    mark_env = ("RAY_TMPDIR=" + tmp).encode()
    mark = tmp.encode()
    out = []
    for p in _os.listdir("/proc"):
        if not p.isdigit() or int(p) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as fh:
                cmd = fh.read()
            env = b""
            try:
                with open("/proc/%s/environ" % p, "rb") as fh:
                    env = fh.read()
            except OSError:
                pass
            if mark_env in env.split(b"\0") or mark + b"/" in cmd:
                out.append(int(p))
        except OSError:
            continue
    return out


def log_tails():
    tails = {}
    for name in log_names:
        for path in sorted(glob.glob(_os.path.join(tmp, "ray", "session_*", "logs", name)))[-1:]:
            try:
                with open(path, errors="replace") as fh:
                    lines = fh.read().splitlines()[-tail_n:]
                if lines:
                    tails[name] = lines
            except OSError:
                pass
    for path in sorted(glob.glob(_os.path.join(tmp, "ray", "session_*", "logs", "python-core-driver-*.log")))[-1:]:
        try:
            with open(path, errors="replace") as fh:
                lines = [ln for ln in fh.read().splitlines() if " E " in ln or " F " in ln or "rror" in ln][-tail_n:]
            if lines:
                tails[_os.path.basename(path)] = lines
        except OSError:
            pass
    return tails


def cleanup():
    killed = []
    for _ in range(3):
        pids = own_pids()
        if not pids:
            break
        for pid in pids:
            try:
                _os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        time.sleep(0.3)
    result["killed_leftovers"] = sorted(set(killed))
    shutil.rmtree(tmp, ignore_errors=True)
    result["temp_removed"] = not _os.path.exists(tmp)


def finish(reason=None):
    with lock:
        if done.is_set():
            return
        if reason:
            result["error"] = {"type": "Timeout", "message": reason, "chain": []}
        if not result["ok"]:
            result["logs"] = log_tails()
        cleanup()
        done.set()
        emit_and_exit(result)  # cleanup() above already stopped and removed everything


def watchdog():
    if not done.wait(deadline):
        finish("stage %r did not finish within %.0f s" % (result["stage"], deadline))
        _os._exit(0)


threading.Thread(target=watchdog, daemon=True).start()

t0 = time.perf_counter()
try:
    result["stage"] = "import"
    import ray

    result["ray_version"] = getattr(ray, "__version__", None)
    result["seconds"]["import"] = round(time.perf_counter() - t0, 3)
    result["stage"] = "init"
    t1 = time.perf_counter()
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    result["seconds"]["init"] = round(time.perf_counter() - t1, 3)
    try:
        result["session_dir"] = ray._private.worker._global_node.get_session_dir_path()
    except Exception:
        pass
    result["stage"] = "task"
    t2 = time.perf_counter()

    @ray.remote
    def _add(x):
        return x + 1

    value = ray.get(_add.remote(41), timeout=max(5.0, deadline - (time.perf_counter() - t0) - 5))
    result["seconds"]["task"] = round(time.perf_counter() - t2, 3)
    if value != 42:
        raise RuntimeError("task returned %r, expected 42" % (value,))
    result["stage"] = "shutdown"
    t3 = time.perf_counter()
    ray.shutdown()
    result["seconds"]["shutdown"] = round(time.perf_counter() - t3, 3)
    result["ok"] = True
    result["stage"] = "done"
except BaseException as exc:  # noqa: BLE001 - the failure is the fact
    result["error"] = describe_exception(exc)
    try:
        import ray as _ray

        _ray.shutdown()
    except BaseException:
        pass
result["seconds"]["total"] = round(time.perf_counter() - t0, 3)
finish()
