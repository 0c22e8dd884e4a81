"""What is computed from one file's bytes alone — a knowledge file parsed and checked against its
schema, a lockfile's pins — is kept under the doctor's cache dir, keyed by those bytes and by the
source of the code that computes it: a person runs `doctor triage` on one paste at a time and
`doctor check` between every change (issue 25's start-up bars), and parsing YAML and compiling
every regular expression of the schema check was most of a short run. Any edit of the file or of
that code is another key; a cache that cannot be read or written only costs time. Stdlib only."""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from pathlib import Path
from typing import Any, Callable

from doctor.paths import cache_dir


@functools.lru_cache(maxsize=None)
def _source(module_file: str) -> bytes:
    return Path(module_file).read_bytes()


def derived(path: Path, kind: str, compute: Callable[[bytes], Any], code: tuple[str, ...]) -> Any:
    """compute(the bytes of `path`), kept on disk; `code`: the module files whose source decides the
    result. An exception of compute (a broken file) is raised every time, never kept."""
    raw = Path(path).read_bytes()
    h = hashlib.sha256(kind.encode() + b"\0" + raw)
    for module_file in code:
        h.update(_source(module_file))
    kept = cache_dir() / "derived" / f"{kind}-{Path(path).stem}-{h.hexdigest()[:24]}.pickle"
    try:
        with open(kept, "rb") as fh:
            return pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError, ImportError):
        pass  # not kept yet, or unreadable: compute again
    value = compute(raw)
    _keep(kept, value)
    return value


def _keep(kept: Path, value: Any) -> None:
    """Write atomically (a concurrent doctor reads the old copy or the new one, never half of one) and
    drop the older copies of the same file."""
    stem = kept.name.rsplit("-", 1)[0]
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        for old in kept.parent.glob(f"{stem}-*.pickle"):
            if old.name != kept.name and old.name.rsplit("-", 1)[0] == stem:
                old.unlink(missing_ok=True)
        tmp = kept.with_name(f".{kept.name}.{os.getpid()}")
        with open(tmp, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, kept)
    except OSError:
        pass
