# Ray smoke test in the target: a private Ray instance (ray_private.py: its own short RAY_TMPDIR,
# never an existing cluster), one task, shutdown, temp dir removed.
# argv: [temp prefix, deadline seconds, log files (comma list), tail lines]
import threading
import time

prefix = _sys.argv[1] if len(_sys.argv) > 1 else "/tmp/vd-"
deadline = float(_sys.argv[2]) if len(_sys.argv) > 2 else 75.0
log_names = (_sys.argv[3] if len(_sys.argv) > 3 else "raylet.out,raylet.err,gcs_server.err").split(",")
tail_n = int(_sys.argv[4]) if len(_sys.argv) > 4 else 15

tmp = private_ray_dir(prefix)
result = {"temp_dir": tmp, "stage": "start", "ok": False, "seconds": {}}
done = threading.Event()
lock = threading.Lock()


def cleanup():
    result["killed_leftovers"], result["temp_removed"] = remove_private_ray(tmp)


def finish(reason=None):
    with lock:
        if done.is_set():
            return
        if reason:
            result["error"] = {"type": "Timeout", "message": reason, "chain": []}
        if not result["ok"]:
            result["logs"] = ray_log_tails(tmp, log_names, tail_n)
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
