"""`doctor container build|verify`: the stack's lockfile as an OCI image, driven through the Docker
Engine API (the `docker` SDK; `pip install 'verl-doctor[container]'`).

Build: the context is assembled in a temporary folder (the Dockerfile of containers/, the
lockfile, the host CA bundle, the doctor's wheel built from the installed package), the engine builds it with host
networking and the progress is streamed to stderr. Then a container of the new image lists the
venv's distributions, the CycloneDX SBOM is written beside it, and a one-line second build step
(`FROM <image>` + `LABEL`) records the SBOM's sha256 as a label of the final tag.

Verify: `doctor check --json` inside the image; findings explained by the host (no GPU) are not
held against the image."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from doctor import __version__, knowledge
from doctor.errors import UsageError
from doctor.paths import FOLDERS, SHIPPED_DIR, containers_dir, folder
from doctor.findings import is_host_fact
from doctor.uv import uv_bin
from doctor.knowledge import get_stack
from doctor.lockfiles import parse_lockfile, stack_lockfile
from doctor.probes.gpu import nvml_facts

LABEL = "io.verl-doctor"
VENV = "/opt/venv"
DEFAULT_PYTHON = "3.11"
_HEADER = re.compile(r"^# verl-doctor lockfile for stack (\S+), Python (\d+\.\d+)", re.M)


class BuildFailed(Exception):
    """The engine answered, but a build step failed (exit code 1, the step's output shown)."""


# ----------------------------------------------------------------------------------- the engine
def _one_line(exc: BaseException) -> str:
    text = " ".join(str(getattr(exc, "explanation", None) or exc).split())
    return text[:300] + ("…" if len(text) > 300 else "")


def engine():
    """A connected docker client (DOCKER_HOST honoured), or one clear line (exit 2)."""
    try:
        import docker
    except ImportError:
        raise UsageError("the container commands need the Docker SDK: pip install 'verl-doctor[container]'")
    where = os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"
    try:
        client = docker.from_env(timeout=int(os.environ.get("VERL_DOCTOR_DOCKER_TIMEOUT", "3600")))
        client.ping()
    except Exception as exc:  # noqa: BLE001 - DockerException, requests' ConnectionError, …
        raise UsageError(f"no Docker engine answers at {where} ({_one_line(exc)}); "
                         "start one or set DOCKER_HOST")
    return client


# ------------------------------------------------------------------------------------ the inputs
DOCKERFILE = containers_dir() / "Dockerfile"     # the checkout's containers/, or the wheel's copy
PACKAGE_DIR = Path(__file__).resolve().parents[1]   # the doctor package as installed (or checked out)


def resolve_lock(stack_name: str | None, lock: str | None) -> tuple[Path, dict, str]:
    """(lockfile, stack, python version) from --stack or --lock."""
    if lock:
        path = Path(lock)
        if not path.is_file():
            raise UsageError(f"--lock {lock}: no such file")
        m = _HEADER.search(path.read_text(errors="replace")[:4000])
        name, python = (m.group(1), m.group(2)) if m else (stack_name, DEFAULT_PYTHON)
        stack = get_stack(name) if name in knowledge.stacks() else get_stack(stack_name) if stack_name else \
            {"name": name or "custom", "python": [python], "flash_attn": {}}
    else:
        stack = get_stack(stack_name)
        python = DEFAULT_PYTHON if DEFAULT_PYTHON in stack["python"] else stack["python"][-1]
        path = stack_lockfile(stack["name"], python)
        if not path.is_file():
            raise UsageError(f"no lockfile for stack {stack['name']} (Python {python}): run `doctor lock` first")
    entries = parse_lockfile(path)
    unhashed = sorted(n for n, e in entries.items() if not e["hashes"])
    if unhashed:
        raise UsageError(f"lockfile {path} has entries without --hash (e.g. {unhashed[0]}); "
                         "the image installs with --require-hashes: make it with `doctor lock`")
    return path, stack, python


def host_ca_bundle() -> Path | None:
    """The CA bundle the host trusts (networks that intercept TLS add their CA to it)."""
    for cand in (os.environ.get("SSL_CERT_FILE"), os.environ.get("PIP_CERT"),
                 "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


def uv_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("uv")
    except PackageNotFoundError:
        out = subprocess.run([uv_bin(), "--version"], capture_output=True, text=True).stdout.split()
        return out[1] if len(out) > 1 else "0.5.0"


def doctor_project(dest: Path) -> Path:
    """A buildable project of the doctor as it is installed here: its package files (all of them:
    code, knowledge, recipe data), the project folders lockfiles/, containers/ and recipes/ as the
    wheel ships them (doctor/_shipped/<name>, wherever doctor.paths finds them now) and a
    pyproject.toml from its own metadata. The same for an editable checkout and a `pip install .`
    into site-packages, so the doctor inside the image finds its locks and recipes."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        meta = metadata("verl-doctor")
        requires = [r for r in (meta.get_all("Requires-Dist") or []) if "extra ==" not in r]
    except PackageNotFoundError:  # run from a source tree on sys.path without installing it
        requires = []
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE_DIR, dest / "doctor", ignore=lambda d, names: (
        skip(d, names) | ({SHIPPED_DIR.name} if Path(d) == PACKAGE_DIR else set())))
    for name in FOLDERS:
        shutil.copytree(folder(name), dest / "doctor" / SHIPPED_DIR.name / name, ignore=skip)
    files = sorted(p.relative_to(dest).as_posix() for p in (dest / "doctor").rglob("*") if p.is_file())
    data = [f[len("doctor/"):] for f in files if not f.endswith(".py")]
    (dest / "pyproject.toml").write_text("\n".join([
        "[build-system]", 'requires = ["setuptools>=68", "wheel"]', 'build-backend = "setuptools.build_meta"', "",
        "[project]", 'name = "verl-doctor"', f'version = "{__version__}"', 'requires-python = ">=3.10"',
        f"dependencies = {json.dumps(requires)}", "",
        "[project.scripts]", 'doctor = "doctor.cli:main"', 'recipes = "doctor.recipes.cli:main"', "",
        "[tool.setuptools.packages.find]", 'include = ["doctor*"]', "",
        "[tool.setuptools.package-data]", f"doctor = {json.dumps(data)}", ""]))
    return dest


def build_doctor_wheel(out: Path) -> Path:
    """The doctor as a wheel, built by uv from doctor_project() (nothing is written into the package)."""
    with tempfile.TemporaryDirectory() as tmp:
        project = doctor_project(Path(tmp) / "project")
        env = {**os.environ, "UV_NO_PROGRESS": "1"}
        env.setdefault("SOURCE_DATE_EPOCH", "315532800")  # stable zip timestamps: same code, same wheel
        proc = subprocess.run([uv_bin(), "build", "--wheel", "--quiet", "--out-dir", str(Path(tmp) / "dist"),
                               str(project)], capture_output=True, text=True, env=env)
        wheels = sorted((Path(tmp) / "dist").glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise BuildFailed(f"building the doctor's wheel failed: {last}")
        out.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(wheels[0], out / wheels[0].name))


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's own Requires-Dist, without extras."""
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line]


# --------------------------------------------------------------------------------- the base image
def base_lock_path() -> Path:
    return Path(os.environ.get("VERL_DOCTOR_BASE_LOCK") or Path("containers") / "base.lock")  # the user's project


def read_base_lock(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            parts = line.split("#", 1)[0].split()
            if len(parts) >= 2:
                pins[parts[0]] = parts[1]
    return pins


def write_base_lock(path: Path, ref: str, pinned: str, how: str) -> None:
    lines = [ln for ln in (path.read_text().splitlines() if path.is_file() else [])
             if ln.split() and ln.split()[0] != ref]
    if not lines:
        lines = ["# Base images pinned by `doctor container build --pin-base`: TAG PINNED  # how",
                 "# PINNED is name@sha256:<registry digest>, or sha256:<local image ID> for a base that",
                 "# exists only on this engine (no registry: the pin holds on this engine only)."]
    lines.append(f"{ref} {pinned}  # {how}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _get_image(client, ref: str):
    import docker

    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None


def resolve_base(client, ref: str, pin: bool, echo) -> tuple[str, str, str | None]:
    """(reference for FROM, local image ID, registry digest or None)."""
    import docker

    lock = base_lock_path()
    if pin:
        img = _get_image(client, ref)
        digests = [d for d in (img.attrs.get("RepoDigests") or [])] if img else []
        if not digests:
            try:
                reg = client.images.get_registry_data(ref)
                name = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
                digests = [f"{name}@{reg.id}"]
            except Exception as exc:  # noqa: BLE001 - no registry reachable
                if img is None:
                    raise UsageError(f"--pin-base: {ref} is not on this engine and its registry does not "
                                     f"answer ({_one_line(exc)})")
        if digests:
            pinned, how = digests[0], "registry digest"
        else:
            pinned, how = img.id, "local image ID (not from a registry: holds on this engine only)"
        write_base_lock(lock, ref, pinned, how)
        echo(f"… pinned {ref} → {pinned} ({how}) in {lock}")
    else:
        pinned = read_base_lock(lock).get(ref)
    use = pinned or ref
    img = _get_image(client, use)
    if img is None:
        echo(f"… pulling {use}")
        try:
            img = client.images.pull(use)
        except docker.errors.APIError as exc:
            hint = " (re-pin with --pin-base)" if pinned else ""
            raise UsageError(f"base image {use} is not on this engine and cannot be pulled{hint}: {_one_line(exc)}")
    digest = pinned.split("@", 1)[1] if pinned and "@" in pinned else \
        next((d.split("@", 1)[1] for d in img.attrs.get("RepoDigests") or []), None)
    return use, img.id, digest


# -------------------------------------------------------------------------------------- the SBOM
LIST_DISTS = (
    "import importlib.metadata as m, json, sys; "
    "print(json.dumps(sorted(({'name': d.metadata['Name'], 'version': d.version, "
    "'license': d.metadata.get('License-Expression') or d.metadata.get('License') or '', "
    "'summary': d.metadata.get('Summary') or ''} for d in m.distributions()), "
    "key=lambda x: x['name'].lower())))"
)


def list_venv(client, image_id: str) -> list[dict]:
    out = client.containers.run(image_id, [f"{VENV}/bin/python", "-c", LIST_DISTS], remove=True,
                                network_mode="none", stdout=True, stderr=False)
    return json.loads(out)


def sbom_json(dists: list[dict], tag: str, image_id: str, labels: dict, created: datetime) -> str:
    """A CycloneDX 1.6 JSON document of the venv's distributions (cyclonedx-python-lib)."""
    import uuid

    try:
        from cyclonedx.model import Property
        from cyclonedx.model.bom import Bom
        from cyclonedx.model.component import Component, ComponentType
        from cyclonedx.output.json import JsonV1Dot6
        from packageurl import PackageURL
    except ImportError:
        raise UsageError("the SBOM needs cyclonedx-python-lib: pip install 'verl-doctor[container]'")
    from packaging.utils import canonicalize_name

    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"verl-doctor:{image_id}"))
    bom.metadata.timestamp = created
    name, _, version = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
    bom.metadata.component = Component(
        name=name, version=version, type=ComponentType.CONTAINER, bom_ref=image_id,
        properties=[Property(name=f"{LABEL}.{k.split('.', 2)[-1]}" if k.startswith(LABEL) else k, value=v)
                    for k, v in sorted(labels.items())] + [Property(name=f"{LABEL}.image.id", value=image_id),
                                                           Property(name=f"{LABEL}.venv", value=VENV)])
    for d in dists:
        n = canonicalize_name(d["name"])
        purl = PackageURL(type="pypi", name=n, version=d["version"])
        bom.components.add(Component(name=d["name"], version=d["version"], type=ComponentType.LIBRARY,
                                     purl=purl, bom_ref=str(purl), description=d["summary"] or None))
    return JsonV1Dot6(bom).output_as_string(indent=2)


# ------------------------------------------------------------------------------------- the build
def build_date() -> datetime:
    sde = os.environ.get("SOURCE_DATE_EPOCH")
    if sde:
        try:
            return datetime.fromtimestamp(int(sde), tz=timezone.utc)
        except ValueError:
            raise UsageError(f"SOURCE_DATE_EPOCH={sde!r} is not an integer")
    return datetime.now(tz=timezone.utc).replace(microsecond=0)


def default_tag(stack: dict, python: str) -> str:
    return f"verl-doctor/{stack['name']}:py{python}"


def _stream(lines, log: list[str], echo) -> str | None:
    """Print the engine's build output as it comes; return the image ID, raise on a failed step."""
    image_id = None
    for chunk in lines:
        if "stream" in chunk:
            text = chunk["stream"]
            log.append(text)
            for line in text.splitlines():
                if line.strip():
                    echo(f"  {line}")
        elif "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
        elif "error" in chunk:
            log.append(chunk["error"])
            raise BuildFailed(" ".join(chunk["error"].split()))
    return image_id


def build(stack_name: str | None = None, lock: str | None = None, base: str | None = None,
          tag: str | None = None, pin_base: bool = False, flash_attn: bool = True,
          sbom: str | None = None, index_url: str | None = None, network: str = "host",
          echo=None) -> dict:
    echo = echo or (lambda m: print(m, file=sys.stderr, flush=True))
    lock_path, stack, python = resolve_lock(stack_name, lock)
    wheel_info = (stack.get("flash_attn") or {}).get("wheels", {}).get(python) or {}
    if flash_attn and not wheel_info.get("url"):
        raise UsageError(f"stack {stack['name']} records no flash-attn wheel for Python {python}; "
                         "use --no-flash-attn")
    base = base or f"python:{python}-slim-bookworm"
    tag = tag or default_tag(stack, python)
    created = build_date()
    client = engine()
    t0 = time.monotonic()
    base_from, base_id, base_digest = resolve_base(client, base, pin_base, echo)
    lock_bytes = lock_path.read_bytes()
    labels = {
        "org.opencontainers.image.created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "org.opencontainers.image.title": f"verl-doctor {stack['name']} (Python {python})",
        "org.opencontainers.image.base.name": base,
        f"{LABEL}.version": __version__,
        f"{LABEL}.stack": stack["name"],
        f"{LABEL}.python": python,
        f"{LABEL}.lock.file": lock_path.name,
        f"{LABEL}.lock.sha256": hashlib.sha256(lock_bytes).hexdigest(),
        f"{LABEL}.base.ref": base_from,
        f"{LABEL}.base.id": base_id,
        f"{LABEL}.flash-attn": wheel_info.get("url", "") if flash_attn else "none",
        f"{LABEL}.venv": VENV,
    }
    if base_digest:
        labels["org.opencontainers.image.base.digest"] = base_digest
    buildargs = {
        "BASE_IMAGE": base_from, "PYTHON_VERSION": python, "UV_VERSION": uv_version(),
        "FLASH_ATTN_URL": wheel_info.get("url", "") if flash_attn else "",
        "FLASH_ATTN_SHA256": (wheel_info.get("sha256") or "") if flash_attn else "",
    }
    if index_url:
        buildargs["INDEX_URL"] = index_url
    log: list[str] = []
    with tempfile.TemporaryDirectory(prefix="doctor-ctx-") as tmp:
        ctx = Path(tmp)
        shutil.copy2(DOCKERFILE, ctx / "Dockerfile")
        (ctx / "lock.txt").write_bytes(lock_bytes)
        ca = host_ca_bundle()
        (ctx / "build-ca.crt").write_bytes(ca.read_bytes() if ca else b"")
        echo("… building the doctor's wheel")
        wheel = build_doctor_wheel(ctx / "dist")
        (ctx / "doctor-requirements.txt").write_text("\n".join(wheel_requirements(wheel)) + "\n")
        echo(f"… building {tag} from {base_from} ({lock_path.name}, flash-attn "
             f"{'on' if flash_attn else 'off'}) on {os.environ.get('DOCKER_HOST') or 'the default engine'}")
        image_id = _stream(client.api.build(path=str(ctx), rm=True, forcerm=True, pull=False,
                                            network_mode=network, buildargs=buildargs, labels=labels,
                                            decode=True), log, echo)
    if not image_id:
        raise BuildFailed("the engine reported no image ID")
    t_main = time.monotonic() - t0
    # SBOM of the venv as built, then its digest as a label of the final tag.
    echo("… listing the venv's distributions for the SBOM")
    dists = list_venv(client, image_id)
    doc = sbom_json(dists, tag, image_id, labels, created)
    sbom_path = Path(sbom or re.sub(r"[^A-Za-z0-9_.-]+", "_", tag) + ".cdx.json")
    sbom_path.parent.mkdir(parents=True, exist_ok=True)
    sbom_path.write_text(doc)
    sbom_sha = hashlib.sha256(doc.encode()).hexdigest()
    final_labels = {f"{LABEL}.sbom.sha256": sbom_sha, f"{LABEL}.sbom.format": "CycloneDX 1.6 JSON"}
    final_id = _stream(client.api.build(fileobj=io.BytesIO(f"FROM {image_id}\n".encode()), tag=tag, rm=True,
                                        labels=final_labels, network_mode="none", decode=True), log, echo)
    img = client.images.get(tag)
    full_log = "".join(log)
    return {
        "tag": tag, "image_id": final_id or img.id, "stage_image_id": image_id,
        "size_bytes": img.attrs.get("Size"), "labels": img.labels, "sbom": str(sbom_path),
        "sbom_sha256": sbom_sha, "distributions": len(dists), "build_seconds": round(t_main, 1),
        "cached_steps": full_log.count("Using cache"), "log": full_log,
    }


# ------------------------------------------------------------------------------------ the verify
def host_gpus() -> list[dict]:
    facts = nvml_facts()
    return facts.get("gpus", []) if facts.get("available") else []


def shm_size_for_ray() -> str:
    """Ray's object store takes 30 % of memory and falls back to /tmp when /dev/shm is smaller."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 16 << 30
    fraction = knowledge.load("system")["shm"]["object_store_fraction"]
    return f"{max(2, math.ceil(mem * fraction / (1 << 30)))}g"


def run_line(tag: str, gpus: bool) -> str:
    iso = "--gpus all --ipc=host" if gpus else f"--shm-size={shm_size_for_ray()}"
    return f"docker run --rm -it {iso} --ulimit memlock=-1 --ulimit stack=67108864 -v $PWD:/workspace {tag}"


def verify(tag: str, echo=None, timeout: float = 900) -> dict:
    import docker
    from docker.types import DeviceRequest, Ulimit

    echo = echo or (lambda m: print(m, file=sys.stderr, flush=True))
    client = engine()
    if _get_image(client, tag) is None:
        raise UsageError(f"no image {tag!r} on this engine (build it with `doctor container build`)")
    gpus = host_gpus()
    kw: dict = {"network_mode": "none"}
    if gpus:
        kw.update(device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])], ipc_mode="host")
    else:
        kw["shm_size"] = shm_size_for_ray()
    notes = []
    cmd = ["doctor", "check", "--json"]
    echo(f"… running `{' '.join(cmd)}` in {tag} ({len(gpus)} host GPU(s))")

    def start(**extra):
        ctr = client.containers.create(tag, cmd, **kw, **extra)
        try:
            ctr.start()
        except Exception:
            ctr.remove(force=True)  # a container that never started is not left behind
            raise
        return ctr

    try:
        ctr = start(ulimits=[Ulimit(name="memlock", soft=-1, hard=-1)])
    except docker.errors.APIError as exc:
        if "rlimit" not in str(exc) and "ulimit" not in str(exc):
            raise UsageError(f"cannot start a container of {tag}: {_one_line(exc)}")
        # An engine without CAP_SYS_RESOURCE (this sandbox) cannot raise memlock: check without it.
        notes.append(f"the engine refused --ulimit memlock=-1 ({_one_line(exc)[:160]}); checked without it")
        ctr = start()
    try:
        rc = ctr.wait(timeout=timeout).get("StatusCode")
        out = ctr.logs(stdout=True, stderr=False).decode(errors="replace")
        err = ctr.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        try:
            ctr.remove(force=True)
        except Exception:  # noqa: BLE001
            pass
    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        tail = (err.strip().splitlines() or ["(no output)"])[-1]
        return {"image": tag, "passed": False, "check_exit_code": rc, "errors": [], "explained_by_host": [],
                "warnings": [], "notes": notes + [f"doctor check printed no JSON: {tail}"],
                "host_gpus": len(gpus), "run_command": run_line(tag, bool(gpus))}
    findings = report.get("findings", [])
    errors = [f["id"] for f in findings if f.get("severity") == "error"]
    # The image is judged, not the machine that runs it: host facts (findings.yaml scope: host, e.g.
    # gpu.none without GPUs here, /dev/shm) are explained by the host, whether it has GPUs or not.
    host = [i for i in errors if is_host_fact(i)]
    return {
        "image": tag, "passed": not [i for i in errors if i not in host], "check_exit_code": rc,
        "errors": [i for i in errors if i not in host], "explained_by_host": host,
        "warnings": [f["id"] for f in findings if f.get("severity") == "warning"], "notes": notes,
        "host_gpus": len(gpus), "run_command": run_line(tag, bool(gpus)),
    }
