"""The uv binary the doctor drives (uv is a dependency: the PyPI `uv` package ships it)."""

from __future__ import annotations

import shutil

from doctor.errors import UsageError


def uv_bin() -> str:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except Exception:  # noqa: BLE001 - a broken uv package: fall back to PATH
        found = shutil.which("uv")
        if not found:
            raise UsageError("uv not found: install it with `pip install uv`")
        return found
