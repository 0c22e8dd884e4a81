"""Probes collect facts. Target probes are stdlib-only scripts (probes/scripts/) run inside the
target interpreter as subprocesses that print JSON; local probes (gpu, system, environment) run
in the doctor's own process because they describe the machine, not the interpreter.

Each probe has its own time budget; a probe that overruns is killed (its whole process group,
children included) and reported as "could not run"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from doctor.processes import stop_group
from doctor import knowledge
from doctor.facts import validate_probe

SCRIPTS = Path(__file__).parent / "scripts"
MARKER = "@@VERL-DOCTOR-JSON@@"

def stack_modules() -> list[str]:
    return knowledge.load("python_env")["stack_modules"]


@dataclass
class ProbeResult:
    name: str
    ok: bool
    data: dict | None = None
    error: str | None = None
    seconds: float = 0.0
    cached: bool = False

    def to_dict(self) -> dict:
        return {"ok": self.ok, "data": self.data, "error": self.error, "seconds": round(self.seconds, 3), "cached": self.cached}


@dataclass
class TargetProbe:
    """A script run in the target: `python -c <prelude + script> ARGS`."""

    name: str
    scripts: tuple[str, ...]  # concatenated after _prelude.py; libraries first, the probe last
    budget_s: float
    deep: bool
    args: Callable[[], list[str]] = field(default=lambda: [])
    # Keys of the probe's output that are facts of their own (and skipped along with the probe).
    provides: tuple[str, ...] = ()
    # Where `scripts` live (recipes/scripts for the recipe scripts); the prelude and the libraries
    # (ray_private.py) are always this folder's.
    script_dir: Path = SCRIPTS

    def source(self) -> str:
        parts = [SCRIPTS / "_prelude.py"]
        parts += [self.script_dir / s if (self.script_dir / s).is_file() else SCRIPTS / s for s in self.scripts]
        return "\n".join(p.read_text() for p in parts)


TARGET_PROBES = {
    p.name: p
    for p in [
        TargetProbe("distributions", ("distributions.py",), budget_s=30, deep=False),
        # The compiled extensions load in the imports probe's process, where torch already is.
        TargetProbe("imports", ("extensions.py", "imports.py"), budget_s=240, deep=True,
                    args=lambda: [",".join(stack_modules())], provides=("extensions",)),
        TargetProbe("registry", ("registry.py",), budget_s=240, deep=True),
        # GPU architectures in the compiled libraries (fatbin headers only: ~0.4 s for 2 GB cold).
        TargetProbe("kernels", ("fatbin.py", "kernels.py"), budget_s=60, deep=True,
                    args=lambda: [_kernel_libraries()]),
        TargetProbe("ray_smoke", ("ray_private.py", "ray_smoke.py"), budget_s=90, deep=True, args=lambda: _ray_smoke_args()),
    ]
}


def _kernel_libraries() -> str:
    import json

    return json.dumps(knowledge.load("system")["gpu"]["kernel_libraries"])


def _ray_smoke_args() -> list[str]:
    k = knowledge.load("ray")["smoke"]
    return [k["temp_prefix"], str(k["deadline_s"]), ",".join(k["log_files"]), str(k["tail_lines"])]


def run_cluster_probe(python: str, address: str, stack: dict | None = None, scale: float = 1.0) -> ProbeResult:
    """`doctor check --cluster ADDRESS`: stack versions on every alive node (scripts/ray_cluster.py)."""
    stack = stack or knowledge.default_stack()
    names = list(dict.fromkeys([c["dist"] for c in stack["constraints"]] + ["ray", "protobuf", "grpcio"]))
    probe = TargetProbe("ray_cluster", ("ray_cluster.py",), budget_s=120, deep=False,
                        args=lambda: [address, ",".join(names), "90"])
    return run_target_probe(probe, python, scale)


def _neutral_cwd() -> str:
    # Probes run from an empty directory so that the caller's cwd (a verl checkout, say) cannot
    # shadow installed packages and make results depend on where the doctor was started.
    d = Path(tempfile.gettempdir()) / f"verl-doctor-cwd-{os.getuid()}"
    d.mkdir(exist_ok=True)
    return str(d)


# Probe processes now running (each leads its own process group), so that Ctrl-C can stop them.
_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


def run_target_probe(probe: TargetProbe, python: str, scale: float = 1.0) -> ProbeResult:
    t0 = time.perf_counter()
    budget = probe.budget_s * scale
    try:
        proc = subprocess.Popen(
            [python, "-c", probe.source(), *probe.args()],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=_neutral_cwd(), start_new_session=True,
        )
    except OSError as exc:
        return ProbeResult(probe.name, False, error=f"cannot start {python}: {exc.strerror or exc}")
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        out, err = proc.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        return ProbeResult(probe.name, False, error=f"timed out after {budget:.0f} s (killed)", seconds=time.perf_counter() - t0)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)
    seconds = time.perf_counter() - t0
    text = out.decode(errors="replace")
    if MARKER in text:
        try:
            data = json.loads(text.rsplit(MARKER, 1)[1].strip().splitlines()[0])
        except (ValueError, IndexError) as exc:
            return ProbeResult(probe.name, False, error=f"unreadable probe output: {exc}", seconds=seconds)
        return _checked(ProbeResult(probe.name, True, data=data, seconds=seconds))
    tail = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
    return ProbeResult(probe.name, False, error=f"exited {proc.returncode}: {tail}", seconds=seconds)


def interrupt_running(grace_s: float = 10.0) -> None:
    """Ctrl-C reached the doctor: pass it on to the probes (they run in sessions of their own, so a
    terminal's SIGINT does not reach them), as a terminal would. The Ray smoke then stops and
    removes its private instance itself; whatever still runs after grace_s is killed."""
    with _RUNNING_LOCK:
        procs = list(_RUNNING)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stop_group(proc)


def run_local_probe(name: str, fn: Callable[[], dict], budget_s: float) -> ProbeResult:
    """Run an in-process probe in a thread; a hung one is abandoned after its budget."""
    box: dict = {}

    def work():
        t0 = time.perf_counter()
        try:
            box["data"] = fn()
        except Exception as exc:  # noqa: BLE001 - a probe failure is a fact, not a crash
            box["error"] = f"{type(exc).__name__}: {exc}"
        box["seconds"] = time.perf_counter() - t0

    t = threading.Thread(target=work, name=f"probe-{name}", daemon=True)
    t.start()
    t.join(budget_s)
    if t.is_alive():
        return ProbeResult(name, False, error=f"timed out after {budget_s:.0f} s", seconds=budget_s)
    if "error" in box:
        return ProbeResult(name, False, error=box["error"], seconds=box["seconds"])
    return _checked(ProbeResult(name, True, data=box["data"], seconds=box["seconds"]))


def _checked(result: ProbeResult) -> ProbeResult:
    """A probe whose output lacks what the rules rely on (doctor.facts) failed, with that reason:
    not a crash later in a rule that reads it."""
    problems = validate_probe(result.name, result.data)
    if not problems:
        return result
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return ProbeResult(result.name, False, error=f"unexpected probe output: {problems[0]}{more}", seconds=result.seconds)
