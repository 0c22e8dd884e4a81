"""Build hook: the wheel ships the repository's top-level lockfiles/, containers/ and recipes/
inside the package, as doctor/_shipped/<name> (doctor/paths.py finds that copy when there is no
checkout beside the package). All other configuration is in pyproject.toml.

An editable install needs no copy (doctor/paths.py reads the checkout's folders), so the hook does
nothing there. The sdist carries the folders (MANIFEST.in), so a wheel built from it has them too."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
FOLDERS = ("lockfiles", "containers", "recipes")  # doctor/paths.py FOLDERS (not imported: a build runs no package code)


class build_py_shipped(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in FOLDERS:
            src = ROOT / name
            if not src.is_dir():
                raise SystemExit(f"setup.py: {src} is missing; the wheel must ship {name}/ (see MANIFEST.in)")
            dest = Path(self.build_lib) / "doctor" / "_shipped" / name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": build_py_shipped})
