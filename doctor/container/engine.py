"""The Docker engine the container commands talk to (DOCKER_HOST honoured), or one clear line."""

from __future__ import annotations

import os

from doctor.errors import UsageError


class BuildFailed(Exception):
    """The engine answered, but a build step failed (exit code 1, the step's output shown)."""


def one_line(exc: BaseException) -> str:
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
        raise UsageError(f"no Docker engine answers at {where} ({one_line(exc)}); "
                         "start one or set DOCKER_HOST")
    return client
