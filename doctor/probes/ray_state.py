"""Ray's on-disk state on this machine (a local probe, read-only): the temp root Ray would use, every
`session_*` dir (age, size, live or stale), where `session_latest` points, and whether the head that
`ray_current_cluster` / `RAY_ADDRESS` names answers.

Never writes, never signals a process. Garbage (dangling links, unreadable dirs, a file where a dir
should be) becomes facts, never an exception. Knowledge (paths, limits, timeouts) is in
knowledge/ray.yaml."""

from __future__ import annotations

import datetime as _dt
import os
import pwd
import socket
import stat as _stat
import sys
import time
from pathlib import Path

from doctor import knowledge
from doctor.probes.environment import redact


def _k() -> dict:
    return knowledge.load("ray")


def temp_root(env: dict | None = None) -> dict:
    """Where Ray puts its state, exactly as Ray's get_user_temp_dir() decides it."""
    environ = os.environ if env is None else env
    t = _k()["temp_root"]
    for var in t["order"]:
        if var == "TMPDIR" and not sys.platform.startswith("linux"):
            continue
        if var in environ:  # Ray tests presence, not emptiness
            return {"root": environ[var], "source": var}
    return {"root": t["default"], "source": "default"}


def pid_digits() -> int:
    try:
        return len(Path("/proc/sys/kernel/pid_max").read_text().strip())
    except (OSError, ValueError):
        return _k()["socket_path"]["default_pid_digits"]


def socket_path_length(root: str, digits: int | None = None) -> dict:
    """Byte length of the longest socket path Ray will build under this temp root."""
    s = _k()["socket_path"]
    digits = digits or pid_digits()
    stamp = _dt.datetime(2000, 1, 1).strftime(s["date_format"])
    session = f"{s['session_prefix']}{stamp}_{'9' * digits}"
    example = os.path.join(root, _k()["temp_root"]["subdir"], session, s["socket"])
    n = len(example.encode("utf-8"))
    return {"root": root, "root_bytes": len(root.encode("utf-8")), "bytes": n, "max_bytes": s["max_bytes"],
            "too_long": n > s["max_bytes"], "example": example, "pid_digits": digits}


def _session_time(name: str) -> float | None:
    # session_2026-11-30_16-19-34_333247_9046
    parts = name.split("_")
    if len(parts) < 5:
        return None
    try:
        return _dt.datetime.strptime("_".join(parts[1:4]), _k()["socket_path"]["date_format"]).timestamp()
    except ValueError:
        return None


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        pass
    return None


def _proc_info(pid: str, boot: float | None) -> dict:
    info: dict = {"pid": int(pid)}
    try:
        uid = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("Uid:"))
        info["uid"] = uid
        try:
            info["user"] = pwd.getpwuid(uid).pw_name
        except KeyError:
            info["user"] = str(uid)
    except (OSError, StopIteration, ValueError):
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        if boot is not None:
            info["started"] = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    return info


def ray_processes() -> list[dict]:
    """gcs_server/raylet processes on this machine with their command lines (any user)."""
    names = set(_k()["liveness"]["processes"])
    boot = _boot_time()
    out: list[dict] = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            if comm not in names:
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        out.append({**_proc_info(pid, boot), "comm": comm, "cmdline": [a for a in cmdline if a]})
    return out


def holders(root: Path) -> dict:
    """Which processes (of any user) hold something under `root` open — a file descriptor, their
    working directory or a mapped file (a Ray worker writes its logs in its session's logs/ and maps
    its plasma store there): {"by_session": {session name: [pid, …]}, "unreadable": n, "foreign": n}.
    A process whose /proc entries this user cannot read (another user's, without root) is counted
    as unreadable: a session dir of another user is then not known to be free."""
    base = os.path.realpath(root) + "/"
    out: dict = {"by_session": {}, "unreadable": 0}
    me = os.getuid()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        if int(pid) == os.getpid():
            continue
        targets: list[str] = []
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            for fd in fds:
                try:
                    targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
                except OSError:
                    continue
            targets.append(os.readlink(f"/proc/{pid}/cwd"))
        except PermissionError:
            try:
                if os.stat(f"/proc/{pid}").st_uid != me:
                    out["unreadable"] += 1
            except OSError:
                pass
            continue
        except OSError:
            continue  # gone meanwhile
        for t in targets:
            if t.startswith(base):
                name = t[len(base):].split("/", 1)[0]
                if name.startswith("session_"):
                    out["by_session"].setdefault(name, [])
                    if int(pid) not in out["by_session"][name]:
                        out["by_session"][name].append(int(pid))
    return out


def _size(path: Path, limit: int) -> dict:
    total = entries = 0
    errors = 0
    stack = [path]
    while stack and entries < limit:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    entries += 1
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(Path(e.path))
                        else:
                            total += e.stat(follow_symlinks=False).st_size
                    except OSError:
                        errors += 1
        except OSError:
            errors += 1
    return {"bytes": total, "entries": entries, "complete": not stack and entries < limit and not errors, "errors": errors}


def _unix_connect(path: str, timeout: float) -> dict:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        return {"accepts": True}
    except OSError as exc:
        return {"accepts": False, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        s.close()


def session_info(path: Path, procs: list[dict], now: float, cfg: dict, held: dict | None = None) -> dict:
    info: dict = {"name": path.name, "path": str(path)}
    try:
        st = path.lstat()
    except OSError as exc:
        info.update(kind="unreadable", error=str(exc))
        return info
    if _stat.S_ISLNK(st.st_mode):
        info["kind"] = "symlink"
        info["target"] = os.readlink(path)
        if not path.exists():
            info["dangling"] = True
            return info
    elif not _stat.S_ISDIR(st.st_mode):
        info["kind"] = "file"
        return info
    else:
        info["kind"] = "dir"
    info["uid"] = st.st_uid
    try:
        info["owner"] = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        info["owner"] = str(st.st_uid)
    created = _session_time(path.name)
    info["created"] = created
    info["mtime"] = st.st_mtime
    info["age_s"] = round(now - (created if created is not None else st.st_mtime), 1)
    info["size"] = _size(path, cfg["size_walk"]["max_entries"])
    real = os.path.realpath(path)
    marks = {str(path), real}
    own = [p for p in procs if any(any(m + "/" in a or a.endswith(m) for m in marks) for a in p["cmdline"])]
    info["processes"] = [{k: v for k, v in p.items() if k != "cmdline"} for p in own]
    sock = path / cfg["liveness"]["socket"]
    try:
        os.lstat(sock)
        info["raylet_socket"] = {"path": str(sock), **_unix_connect(str(sock), cfg["liveness"]["connect_timeout_s"])}
    except FileNotFoundError:
        info["raylet_socket"] = {"path": str(sock), "accepts": False, "error": "missing"}
    except OSError as exc:
        info["raylet_socket"] = {"path": str(sock), "accepts": False, "error": f"{type(exc).__name__}: {exc}"}
    has_raylet = any(p["comm"] == "raylet" for p in own)
    held = holders(path.parent) if held is None else held
    info["held_by"] = held["by_session"].get(path.name, [])
    # another user's session while some of that user's processes could not be inspected: not known free
    info["unknown_holders"] = bool(held["unreadable"]) and info["uid"] != os.getuid()
    info["live"] = bool((has_raylet and info["raylet_socket"]["accepts"]) or info["held_by"] or info["unknown_holders"])
    info["head"] = any(p["comm"] == "gcs_server" for p in own)
    return info


def parse_address(value: str) -> tuple[str, int] | None:
    v = value.strip()
    if "://" in v:
        v = v.split("://", 1)[1]
    v = v.split("/", 1)[0].rpartition("@")[2]  # drop user:password@ (never kept, never connected with)
    host, sep, port = v.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


def head_answers(value: str, timeout: float) -> dict:
    out: dict = {"address": value}
    hp = parse_address(value)
    if hp is None:
        out.update(parsed=False, answers=None)
        return out
    out.update(parsed=True, host=hp[0], port=hp[1])
    t0 = time.perf_counter()
    try:
        with socket.create_connection(hp, timeout=timeout):
            out["answers"] = True
    except OSError as exc:
        out.update(answers=False, error=f"{type(exc).__name__}: {exc}")
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def ray_state_facts(env: dict | None = None) -> dict:
    env = dict(os.environ if env is None else env)
    cfg = _k()
    now = time.time()
    tr = temp_root(env)
    base = Path(os.path.join(tr["root"], cfg["temp_root"]["subdir"]))
    facts: dict = {"temp_root": tr, "ray_dir": str(base), "socket": socket_path_length(tr["root"]),
                   "sessions": [], "session_latest": None, "current_cluster": None, "ray_address": None}
    if "RAY_ADDRESS" in env:
        a = env["RAY_ADDRESS"]
        facts["ray_address"] = ({"address": a, "parsed": False, "answers": None, "not_a_head": True}
                                if a.strip() in cfg["head_probe"]["not_an_address"]
                                else head_answers(a, cfg["head_probe"]["connect_timeout_s"]))
        # Facts never hold credentials: ray://user:password@host shows as ray://***@host.
        facts["ray_address"]["address"] = redact("RAY_ADDRESS", a)
    try:
        st = base.stat()
    except FileNotFoundError:
        facts["ray_dir_state"] = "missing"
        return facts
    except OSError as exc:
        facts["ray_dir_state"] = f"unreadable: {exc}"
        return facts
    if not _stat.S_ISDIR(st.st_mode):
        facts["ray_dir_state"] = "not a directory"
        return facts
    try:
        names = sorted(os.listdir(base))
    except OSError as exc:
        facts["ray_dir_state"] = f"unreadable: {exc}"
        return facts
    facts["ray_dir_state"] = "ok"
    procs = ray_processes()
    facts["ray_processes"] = len(procs)
    held = holders(base)
    latest_name = cfg["session_latest"]
    for name in names:
        if name.startswith("session_") and name != latest_name:
            try:
                facts["sessions"].append(session_info(base / name, procs, now, cfg, held))
            except Exception as exc:  # noqa: BLE001 - one odd entry never hides the others
                facts["sessions"].append({"name": name, "path": str(base / name), "kind": "unreadable",
                                          "error": f"{type(exc).__name__}: {exc}"})
    latest = base / latest_name
    if os.path.lexists(latest):
        info: dict = {"path": str(latest)}
        if latest.is_symlink():
            try:
                info["target"] = os.readlink(latest)
            except OSError as exc:
                info["error"] = str(exc)
            info["dangling"] = not latest.exists()
            info["session"] = os.path.basename(os.path.normpath(info.get("target", "")))
        else:
            info["kind"] = "dir" if latest.is_dir() else "file"
        facts["session_latest"] = info
    cc = base / cfg["address_file"]
    if os.path.lexists(cc):
        try:
            text = cc.read_text(errors="replace").strip()
            facts["current_cluster"] = {"path": str(cc), **head_answers(text, cfg["head_probe"]["connect_timeout_s"]),
                                        "mtime": cc.stat().st_mtime}
        except OSError as exc:
            facts["current_cluster"] = {"path": str(cc), "error": f"{type(exc).__name__}: {exc}", "answers": None}
    return facts
