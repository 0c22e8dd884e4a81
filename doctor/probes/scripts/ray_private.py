# Library for scripts that start a private Ray instance (ray_smoke.py, recipes' dryrun.py): a
# short temporary RAY_TMPDIR that no other Ray session uses, RAY_ADDRESS unset so that ray.init
# never joins an existing cluster, no token file written to the user's home, and a cleanup that only ever signals processes carrying that
# temp dir (in their environment or command line), then removes it.
import glob as _glob
import shutil as _shutil
import signal as _signal
import tempfile as _tempfile
import time as _time


def private_ray_dir(prefix):
    tmp = _tempfile.mkdtemp(prefix=_os.path.basename(prefix), dir=_os.path.dirname(prefix) or "/tmp")
    _os.environ["RAY_TMPDIR"] = tmp
    _os.environ.pop("RAY_ADDRESS", None)
    # Ray >= 2.5x turns token authentication on for a new local cluster and writes ~/.ray/auth_token
    # when there is none: a file in the user's home that then switches auth on for every later head of
    # theirs. A private instance of a few seconds needs neither (and its own clients carry no token).
    _os.environ["RAY_AUTH_MODE"] = "disabled"
    return tmp


def own_pids(tmp):
    """Processes of this private instance: its temp dir in their environment or command line."""
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


def ray_log_tails(tmp, names, tail_n):
    tails = {}
    for name in names:
        for path in sorted(_glob.glob(_os.path.join(tmp, "ray", "session_*", "logs", name)))[-1:]:
            try:
                with open(path, errors="replace") as fh:
                    lines = fh.read().splitlines()[-tail_n:]
                if lines:
                    tails[name] = lines
            except OSError:
                pass
    for path in sorted(_glob.glob(_os.path.join(tmp, "ray", "session_*", "logs", "python-core-driver-*.log")))[-1:]:
        try:
            with open(path, errors="replace") as fh:
                lines = [ln for ln in fh.read().splitlines() if " E " in ln or " F " in ln or "rror" in ln][-tail_n:]
            if lines:
                tails[_os.path.basename(path)] = lines
        except OSError:
            pass
    return tails


def remove_private_ray(tmp):
    """Kill what is left of the instance, remove its temp dir: (pids killed, whether it is gone)."""
    killed = stop_private_ray(tmp)
    _shutil.rmtree(tmp, ignore_errors=True)
    return killed, not _os.path.exists(tmp)


def stop_private_ray(tmp):
    """Kill every process of the instance (its temp dir stays): the pids killed."""
    killed = []
    for _ in range(3):
        pids = own_pids(tmp)
        if not pids:
            break
        for pid in pids:
            try:
                _os.kill(pid, _signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        _time.sleep(0.3)
    return sorted(set(killed))
