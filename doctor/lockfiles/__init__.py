"""Lockfiles: where the hashed lockfiles of the known stacks are (the repository's top-level
lockfiles/, shipped in the wheel: doctor/paths.py) and the parser of `uv pip compile
--generate-hashes` files. Resolving new ones: doctor/lockfiles/compile.py."""

from __future__ import annotations

from pathlib import Path

from doctor.derived import derived
from doctor.errors import UsageError
from doctor.paths import lockfiles_dir
from doctor.names import canonical_name


def stack_lockfile(stack_name: str, python_version: str) -> Path:
    """The committed lockfile of a stack for a Python version (it may not exist for that version):
    the checkout's lockfiles/, or the copy shipped in the wheel, so fix suggestions name a file that
    exists after `pip install` too."""
    return lockfiles_dir() / f"{stack_name}-py{python_version}.txt"


def parse_lockfile(path: Path) -> dict[str, dict]:
    """name -> {"version", "hashes"} from a `uv pip compile --generate-hashes` / pip-tools file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read lockfile {path}: {exc.__class__.__name__}: {exc}")
    return parse_lockfile_text(text, path)


def locked_versions(path: Path) -> tuple[tuple[str, str], ...]:
    """(name, version) of a lockfile, kept per file content (doctor/derived.py): triage names the
    locked set in its fixes, and parsing ~200 requirements with packaging is a large part of a short
    triage's start-up."""
    def versions(raw: bytes) -> tuple[tuple[str, str], ...]:
        return tuple((n, d["version"]) for n, d in parse_lockfile_text(raw.decode("utf-8", "replace"), path).items())

    return derived(path, "lockfile-versions", versions, code=(__file__,))


def parse_lockfile_text(text: str, path: Path) -> dict[str, dict]:
    """parse_lockfile of text already read (`path` names it in errors)."""
    from packaging.requirements import InvalidRequirement, Requirement

    # Join continuation lines ("pkg==1.0 \\\n    --hash=sha256:…").
    joined = text.replace("\\\n", " ")
    out: dict[str, dict] = {}
    for lineno, line in enumerate(joined.splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        req_text = " ".join(p for p in parts if not p.startswith("--"))
        hashes = [p.split("=", 1)[1] for p in parts[1:] if p.startswith("--hash=")]
        try:
            req = Requirement(req_text)
        except InvalidRequirement:
            raise UsageError(f"lockfile {path} does not parse at entry {lineno}: {req_text!r}")
        pins = [s for s in req.specifier if s.operator == "=="]
        if len(pins) != 1:
            raise UsageError(f"lockfile {path}: {req_text!r} is not pinned with ==")
        out[canonical_name(req.name)] = {"version": pins[0].version, "hashes": hashes}
    if not out:
        raise UsageError(f"lockfile {path} has no pinned packages")
    return out
