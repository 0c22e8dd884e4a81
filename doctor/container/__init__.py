"""`doctor container build|verify`: the stack's lockfile as an OCI image, driven through the Docker
Engine API (the `docker` SDK; `pip install 'verl-doctor[container]'`). One module per part: engine,
inputs (the build context), base (the base image and its pin), sbom, build, verify."""

from __future__ import annotations

from doctor.container.build import build, write_context
from doctor.container.engine import BuildFailed, engine
from doctor.container.inputs import DOCKERFILE, build_doctor_wheel
from doctor.container.verify import verify

__all__ = ["BuildFailed", "DOCKERFILE", "build", "build_doctor_wheel", "engine", "verify", "write_context"]
