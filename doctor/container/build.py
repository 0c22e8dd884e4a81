"""`doctor container build`: the context is assembled in a temporary folder, the engine builds it
with host networking and the progress is streamed to stderr. Then a container of the new image
lists the venv's distributions, the CycloneDX SBOM is written beside it, and a one-line second
build step (`FROM <image>` + `LABEL`) records the SBOM's sha256 as a label of the final tag."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from doctor import __version__
from doctor.container.base import resolve_base
from doctor.container.engine import BuildFailed, engine
from doctor.container.inputs import (DOCKERFILE, LABEL, VENV, build_doctor_wheel, host_ca_bundle, resolve_lock, uv_version,
                                     wheel_requirements)
from doctor.container.sbom import list_venv, sbom_json
from doctor.errors import UsageError
from doctor.lockfiles import parse_lockfile


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


def _assemble(ctx: Path, lock_bytes: bytes, echo) -> None:
    """The build context: the Dockerfile, the lock, the host's CA bundle, the doctor's wheel."""
    shutil.copy2(DOCKERFILE, ctx / "Dockerfile")
    (ctx / "lock.txt").write_bytes(lock_bytes)
    ca = host_ca_bundle()
    (ctx / "build-ca.crt").write_bytes(ca.read_bytes() if ca else b"")
    echo("… building the doctor's wheel")
    wheel = build_doctor_wheel(ctx / "dist")
    (ctx / "doctor-requirements.txt").write_text("\n".join(wheel_requirements(wheel)) + "\n")


def write_context(out: str, stack_name: str | None = None, lock: str | None = None, base: str | None = None,
                  tag: str | None = None, flash_attn: bool = True, sbom: str | None = None,
                  index_url: str | None = None, network: str = "host", echo=None) -> dict:
    """The image's definition without an engine: the build context in OUT, the `docker build` command
    that builds it (OUT/build.sh), and the SBOM the image will carry, from the lock (every locked
    distribution at its hashed version; `doctor container build` lists the built venv instead)."""
    echo = echo or (lambda m: print(m, file=sys.stderr, flush=True))
    lock_path, stack, python, wheel_info, base, tag, created = _inputs(stack_name, lock, base, tag, flash_attn)
    lock_bytes = lock_path.read_bytes()
    labels, buildargs = _labels_and_args(stack, python, lock_path, lock_bytes, base, base, None, created,
                                         wheel_info, flash_attn, index_url)
    ctx = Path(out)
    if ctx.exists() and any(ctx.iterdir()):
        raise UsageError(f"--context {out}: the folder is not empty")
    ctx.mkdir(parents=True, exist_ok=True)
    _assemble(ctx, lock_bytes, echo)
    argv = ["docker", "build", "--network", network, "--tag", tag]
    for k, v in sorted(buildargs.items()):
        argv += ["--build-arg", f"{k}={v}"]
    for k, v in sorted(labels.items()):
        argv += ["--label", f"{k}={v}"]
    command = shlex.join([*argv, str(ctx.resolve())])
    (ctx / "build.sh").write_text("#!/bin/sh\n# The image of " + lock_path.name + ", as `doctor container build` builds it"
                                  " (without its SBOM label step).\nset -e\nexec " + command + "\n")
    (ctx / "build.sh").chmod(0o755)
    entries = parse_lockfile(lock_path)
    dists = [{"name": n, "version": e["version"], "summary": ""} for n, e in sorted(entries.items())]
    doc = sbom_json(dists, tag, "sha256:" + hashlib.sha256(lock_bytes).hexdigest(),
                    {**labels, f"{LABEL}.sbom.source": f"the lockfile {lock_path.name} (planned: the image is not built)"},
                    created)
    sbom_path = Path(sbom) if sbom else ctx / "sbom.cdx.json"
    sbom_path.parent.mkdir(parents=True, exist_ok=True)
    sbom_path.write_text(doc)
    return {"context": str(ctx.resolve()), "tag": tag, "command": command, "build_script": str((ctx / "build.sh").resolve()),
            "sbom": str(sbom_path), "sbom_sha256": hashlib.sha256(doc.encode()).hexdigest(), "distributions": len(dists),
            "labels": labels, "flash_attn": wheel_info.get("url") if flash_attn else None}


def _inputs(stack_name, lock, base, tag, flash_attn):
    """What both a build and a written definition start from: the lock, its stack and Python, the
    flash-attn wheel, the base and tag (defaults filled), the build date."""
    lock_path, stack, python = resolve_lock(stack_name, lock)
    wheel_info = _flash_attn_wheel(stack, python, flash_attn)
    return (lock_path, stack, python, wheel_info, base or f"python:{python}-slim-bookworm",
            tag or default_tag(stack, python), build_date())


def _flash_attn_wheel(stack: dict, python: str, flash_attn: bool) -> dict:
    wheel_info = (stack.get("flash_attn") or {}).get("wheels", {}).get(python) or {}
    if flash_attn and not wheel_info.get("url"):
        raise UsageError(f"stack {stack['name']} records no flash-attn wheel for Python {python}; "
                         "use --no-flash-attn")
    return wheel_info


def _labels_and_args(stack, python, lock_path, lock_bytes, base, base_from, base_id, created, wheel_info,
                     flash_attn, index_url) -> tuple[dict, dict]:
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
        f"{LABEL}.flash-attn": wheel_info.get("url", "") if flash_attn else "none",
        f"{LABEL}.venv": VENV,
    }
    if base_id:
        labels[f"{LABEL}.base.id"] = base_id
    buildargs = {
        "BASE_IMAGE": base_from, "PYTHON_VERSION": python, "UV_VERSION": uv_version(),
        "FLASH_ATTN_URL": wheel_info.get("url", "") if flash_attn else "",
        "FLASH_ATTN_SHA256": (wheel_info.get("sha256") or "") if flash_attn else "",
    }
    if index_url:
        buildargs["INDEX_URL"] = index_url
    return labels, buildargs


def build(stack_name: str | None = None, lock: str | None = None, base: str | None = None,
          tag: str | None = None, pin_base: bool = False, flash_attn: bool = True,
          sbom: str | None = None, index_url: str | None = None, network: str = "host",
          echo=None) -> dict:
    echo = echo or (lambda m: print(m, file=sys.stderr, flush=True))
    lock_path, stack, python, wheel_info, base, tag, created = _inputs(stack_name, lock, base, tag, flash_attn)
    client = engine()
    t0 = time.monotonic()
    base_from, base_id, base_digest = resolve_base(client, base, pin_base, echo)
    lock_bytes = lock_path.read_bytes()
    labels, buildargs = _labels_and_args(stack, python, lock_path, lock_bytes, base, base_from, base_id, created,
                                         wheel_info, flash_attn, index_url)
    if base_digest:
        labels["org.opencontainers.image.base.digest"] = base_digest
    log: list[str] = []
    with tempfile.TemporaryDirectory(prefix="doctor-ctx-") as tmp:
        ctx = Path(tmp)
        _assemble(ctx, lock_bytes, echo)
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
