"""The base image: resolved by name, pinned by digest or image ID in containers/base.lock (--pin-base)."""

from __future__ import annotations

import os
from pathlib import Path

from doctor.container.engine import one_line
from doctor.errors import UsageError


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


def get_image(client, ref: str):
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
        img = get_image(client, ref)
        digests = [d for d in (img.attrs.get("RepoDigests") or [])] if img else []
        if not digests:
            try:
                reg = client.images.get_registry_data(ref)
                name = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
                digests = [f"{name}@{reg.id}"]
            except Exception as exc:  # noqa: BLE001 - no registry reachable
                if img is None:
                    raise UsageError(f"--pin-base: {ref} is not on this engine and its registry does not "
                                     f"answer ({one_line(exc)})")
        if digests:
            pinned, how = digests[0], "registry digest"
        else:
            pinned, how = img.id, "local image ID (not from a registry: holds on this engine only)"
        write_base_lock(lock, ref, pinned, how)
        echo(f"… pinned {ref} → {pinned} ({how}) in {lock}")
    else:
        pinned = read_base_lock(lock).get(ref)
    use = pinned or ref
    img = get_image(client, use)
    if img is None:
        echo(f"… pulling {use}")
        try:
            img = client.images.pull(use)
        except docker.errors.APIError as exc:
            hint = " (re-pin with --pin-base)" if pinned else ""
            raise UsageError(f"base image {use} is not on this engine and cannot be pulled{hint}: {one_line(exc)}")
    digest = pinned.split("@", 1)[1] if pinned and "@" in pinned else \
        next((d.split("@", 1)[1] for d in img.attrs.get("RepoDigests") or []), None)
    return use, img.id, digest
