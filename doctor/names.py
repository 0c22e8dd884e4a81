"""A distribution's normalised name (PEP 503: runs of -, _ and . become one -, lower case), the key of
every table of installed, locked and pinned packages. The same result as packaging's
canonicalize_name, which imports packaging.tags on the way (a fifth of a short `doctor triage`'s
start-up, issue 25). Stdlib only."""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    return _SEPARATORS.sub("-", name).lower()
