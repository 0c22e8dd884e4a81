"""Facts: the contract between probes and rules, typed.

One TypedDict per probe's data (what its script or function returns, as `collect_facts` files it
under the fact's name), and `Facts` for the whole document keyed by fact name. A probe's JSON is
validated where it enters (doctor.probes) and a `--facts FILE` document where it loads
(doctor.engine.recheck_facts): the keys rules rely on, with their basic types. Nested fields the
rules read defensively (`.get`) are typed here for the reader, not validated.

A bottom-layer module: the standard library and typing only, nothing from doctor.

Required keys are those of each TypedDict's base class (total); the optional ones live in a
`total=False` subclass (Python 3.10 has no NotRequired)."""

from __future__ import annotations

import types
import functools
import typing
from typing import Any, Literal, TypedDict, Union

# --------------------------------------------------------------------------- distributions probe


class PythonFacts(TypedDict):
    executable: str
    version: str
    prefix: str
    base_prefix: str
    in_venv: bool
    sys_path: list[str]


class _DistBase(TypedDict):
    name: str
    version: str


class Dist(_DistBase, total=False):
    requires: list[str]
    path: str
    installer: str | None
    editable: bool
    project: str | None        # the user's checkout (editable or a source tree), else None
    vllm_accepts: dict | None  # verl's adapter rule read from a checkout's code
    top_level: list[str]       # the import names it provides (yaml for PyYAML), where the target can tell


class MetadataProblems(TypedDict):
    broken: list[dict]      # {path, error}
    duplicates: list[dict]  # {name, version, path}


class DistributionsProbe(TypedDict):
    """The distributions probe's output (scripts/distributions.py), before engine files it as the
    facts python, markers, distributions and metadata_problems."""

    python: PythonFacts
    markers: dict[str, str]
    dists: dict[str, Dist]
    broken: list[dict]
    duplicates: list[dict]


# --------------------------------------------------------------------------- local probes


class TorchBuild(TypedDict, total=False):
    installed: bool
    version: str
    cuda: str | None


class _GpuBase(TypedDict):
    available: bool


class GpuFacts(_GpuBase, total=False):
    reason: str                 # why not available
    doctor_pid: int
    driver_version: str
    cuda_driver_version: int
    gpus: list[dict]            # {index, name, uuid, pci_bus_id, memory_total, memory_used, compute_capability, …}
    libcuda: dict
    torch: TorchBuild           # added by the engine from the distributions


class _SystemBase(TypedDict):
    shm: dict          # {path, free_bytes, total_bytes} or {path, error}
    tmp: dict
    nofile: dict       # {soft, hard}
    memory: dict       # {total_bytes, available_bytes}


class SystemFacts(_SystemBase, total=False):
    cpu_count: int | None
    affinity_cpus: int | None


EnvironmentFacts = dict[str, str]  # the variables that matter, as set (secrets redacted)


class LoadPathEntry(TypedDict):
    path: str
    exists: bool
    packages: list[str]   # top-level Python packages and modules there (PYTHONPATH)
    libs: list[str]       # shared libraries there (LD_LIBRARY_PATH), or the preloaded file (LD_PRELOAD)


# The settings that decide what code loads (PYTHONPATH, LD_LIBRARY_PATH, LD_PRELOAD): var → its entries
LoadPathsFacts = dict[str, list[LoadPathEntry]]


class _RayStateBase(TypedDict):
    temp_root: dict    # {root, source}
    ray_dir: str
    socket: dict       # {root, bytes, max_bytes, too_long, …}
    sessions: list[dict]


class RayStateFacts(_RayStateBase, total=False):
    ray_dir_state: str
    ray_processes: int
    session_latest: dict | None
    current_cluster: dict | None
    ray_address: dict | None


# --------------------------------------------------------------------------- deep probes


class _ExtensionBase(TypedDict):
    ok: bool


class Extension(_ExtensionBase, total=False):
    present: bool
    path: str
    type: str
    message: str
    missing_module: str
    chain: list


ExtensionsFacts = dict[str, Extension]  # "_torch" and each compiled extension


class ImportsFacts(TypedDict):
    modules: dict[str, dict]  # module → {ok, seconds, version, file} or describe_exception() + ok
    checks: dict[str, dict]   # torch, vllm_tokenizer


class ImportsProbe(ImportsFacts):
    """The imports probe's output: its `extensions` become a fact of their own (provides=)."""

    extensions: ExtensionsFacts


class _RegistryBase(TypedDict):
    ran: bool


class RegistryFacts(_RegistryBase, total=False):
    ok: bool
    reason: str
    returncode: int
    command: list[str]
    model_info: dict
    seconds: float
    stderr_tail: list[str]


class _KernelLibraryBase(TypedDict):
    sm: list[int]
    ptx: list[int]


class KernelLibrary(_KernelLibraryBase, total=False):
    variants: list[str]
    entries: int
    error: str | None
    dist: str
    version: str
    size: int


class _KernelsBase(TypedDict):
    libraries: dict[str, KernelLibrary]
    missing: list[dict]   # {dist, file[, size, recorded_size]}


class KernelsFacts(_KernelsBase, total=False):
    seconds: float


class _RaySmokeBase(TypedDict):
    ok: bool
    stage: str


class RaySmokeFacts(_RaySmokeBase, total=False):
    temp_dir: str
    seconds: dict[str, float]
    error: dict           # describe_exception(): {type, message, chain, …}
    logs: dict
    killed_leftovers: list[int]
    temp_removed: bool
    ray_version: str
    session_dir: str


class _RayClusterBase(TypedDict):
    address: str
    ok: bool
    nodes: list[dict]


class RayClusterFacts(_RayClusterBase, total=False):
    driver_ray: str
    reachable: dict
    error: dict


# --------------------------------------------------------------------------- the whole document


class Facts(TypedDict, total=False):
    """`doctor check --json`'s "facts": fact name → its data. A deep probe skipped or failed, or a
    local probe that failed, leaves None."""

    python: PythonFacts
    markers: dict[str, str]
    distributions: dict[str, Dist]
    metadata_problems: MetadataProblems
    gpu: GpuFacts
    system: SystemFacts | None
    environment: EnvironmentFacts | None
    load_paths: LoadPathsFacts | None
    ray_state: RayStateFacts | None
    imports: ImportsFacts | None
    extensions: ExtensionsFacts | None
    registry: RegistryFacts | None
    kernels: KernelsFacts | None
    ray_smoke: RaySmokeFacts | None
    ray_cluster: RayClusterFacts | None
    # check --recipe (typed loosely: their shapes belong to the recipe feature)
    recipe: dict | None
    recipe_config: dict | None
    dryrun: dict | None
    _collect_seconds: float


# A fact's type, and a target probe's output type where it differs from its fact's.
FACT_TYPES: dict[str, Any] = typing.get_type_hints(Facts)
PROBE_TYPES: dict[str, Any] = {
    "distributions": DistributionsProbe,
    "imports": ImportsProbe,
    **{n: FACT_TYPES[n] for n in ("registry", "kernels", "ray_smoke", "ray_cluster")},
    "gpu": GpuFacts, "system": SystemFacts, "environment": EnvironmentFacts, "ray_state": RayStateFacts,
    "load_paths": LoadPathsFacts,
}
REQUIRED_FACTS = ("distributions",)  # without them nothing can be judged


class FactsError(ValueError):
    """Facts that do not have the shape rules rely on."""


def validate(name: str, data: object) -> list[str]:
    """Problems with fact `name`'s data, one line each ("gpu.available: expected bool, got str").
    Unknown names are not judged (a newer doctor's facts); None is an absent fact."""
    if name not in FACT_TYPES:
        return []
    return _check(name, data, FACT_TYPES[name])


def validate_probe(probe: str, data: object) -> list[str]:
    """Problems with a probe's output (its JSON as printed), before the engine files it as facts."""
    if probe not in PROBE_TYPES:
        return []
    return _check(probe, data, PROBE_TYPES[probe])


def validate_facts(facts: object) -> list[str]:
    """Problems with a whole facts document (the "facts" of `doctor check --json`)."""
    if not isinstance(facts, dict):
        return [f"facts: expected an object, got {_kind(facts)}"]
    problems = [f"{n}: missing" for n in REQUIRED_FACTS if facts.get(n) is None]
    for name, data in facts.items():
        problems += validate(name, data)
    return problems


def check_facts(facts: object) -> None:
    """validate_facts, raising FactsError with the first problem (one line)."""
    problems = validate_facts(facts)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise FactsError(problems[0] + more)


def _is_typeddict(tp: object) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


@functools.lru_cache(maxsize=None)
def _hints(tp: Any) -> dict[str, Any]:
    """A TypedDict's field types, evaluated once: a cached list of 500 distributions asked for them 500
    times, a tenth of a warm check (issue 25)."""
    return typing.get_type_hints(tp)


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _check(where: str, value: object, tp: Any) -> list[str]:
    """The basic type of `value` against `tp`; a TypedDict's required keys, each checked in turn;
    a dict of TypedDicts, each value's. List items and free-form dicts are not looked into."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return []
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            return [] if type(None) in args else [f"{where}: expected {_name(tp)}, got null"]
        for arg in args:
            if arg is not type(None) and not _shallow_mismatch(value, arg):
                return _check(where, value, arg)
        return [f"{where}: expected {_name(tp)}, got {_kind(value)}"]
    if origin is Literal:
        return [] if value in typing.get_args(tp) else [f"{where}: {value!r} is not one of {typing.get_args(tp)}"]
    if _shallow_mismatch(value, tp):
        return [f"{where}: expected {_name(tp)}, got {_kind(value)}"]
    if _is_typeddict(tp):
        assert isinstance(value, dict)
        hints = _hints(tp)
        problems = [f"{where}.{k}: missing" for k in sorted(tp.__required_keys__) if k not in value]
        for k in sorted(tp.__required_keys__):
            if k in value:
                problems += _check(f"{where}.{k}", value[k], hints[k])
        return problems
    if origin is dict:
        assert isinstance(value, dict)
        _, vt = typing.get_args(tp)
        if _is_typeddict(vt) or vt in (str, int, float, bool):
            return [p for k, v in value.items() for p in _check(f"{where}[{k!r}]", v, vt)]
    return []


def _shallow_mismatch(value: object, tp: Any) -> bool:
    """True when value is plainly not of tp (its outer type only)."""
    base = typing.get_origin(tp) or tp
    if _is_typeddict(tp):
        base = dict
    if base is float:
        return not isinstance(value, (int, float)) or isinstance(value, bool)
    if base is int:
        return not isinstance(value, int) or isinstance(value, bool)
    if isinstance(base, type):
        return not isinstance(value, base)
    return False


def _name(tp: Any) -> str:
    if _is_typeddict(tp):
        return "object"
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    base = origin or tp
    return {dict: "object", list: "list", str: "str", int: "int", float: "number", bool: "bool"}.get(base, str(tp))
