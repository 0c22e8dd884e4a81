"""One registry mechanism for every family of rules (environment rules, config rules), and the one
loop that runs them.

A rule is a pure function from facts to findings. It runs isolated: a rule that raises is a check
with status `crash` and a `doctor.rule-crashed` finding (the end of the traceback as evidence),
and the other checks go on. A rule reads its facts through a FactView: reading a fact that the
probes did not deliver raises FactMissing, which makes the check `skipped` with why, never ✓."""

from __future__ import annotations

import fnmatch
import functools
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

from doctor import knowledge
from doctor.findings import ContractError, Finding, make, strict
from doctor.results import Check, Status


class FactMissing(Exception):
    """A rule read a fact that is absent (its probe was skipped, failed, or could not look)."""

    def __init__(self, name: str, why: str):
        super().__init__(name)
        self.name, self.why = name, why


class FactView(dict):
    """The facts as a rule sees them. Reading a fact that is None or absent (a skipped or failed
    probe) with [] raises FactMissing; reading it with .get() is recorded, and a rule that read an
    absent fact and found nothing is `skipped` (why: that fact), never ✓ — it did not see it."""

    def __init__(self, facts: Mapping[str, Any], why: Callable[[str], str]):
        super().__init__(facts)
        self._why = why
        self.absent_reads: list[str] = []
        self.reads: set[str] = set()      # every fact the current rule read (tests hold the mechanism)

    def __getitem__(self, key: str) -> Any:
        self.reads.add(key)
        if dict.get(self, key) is None:
            raise FactMissing(key, self._why(key))
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.add(key)
        value = dict.get(self, key)
        if value is None:
            self.absent_reads.append(key)
            return default
        return value

    def why_unseen(self) -> str | None:
        """Why the rule that just ran could not look, if it read an absent fact."""
        return self._why(self.absent_reads[0]) if self.absent_reads else None


def cannot_look(fact: str, why: str) -> FactMissing:
    """`raise cannot_look("gpu", "no NVIDIA driver")`: the rule could not judge; its check is skipped."""
    return FactMissing(fact, why)


@dataclass
class Rule:
    fn: Callable[..., Iterable[Finding]]
    check: str
    area: str
    needs: tuple[str, ...] = ()
    applies: Callable[[Any], str | None] | None = None  # returns why it does not apply, or None
    # Distributions the check is about: when one is not installed, the check is skipped ("vllm is
    # not installed") instead of passing with nothing to look at (stack.dists-missing reports it).
    requires: tuple[str, ...] = ()
    # The fact that puts the rule in scope: a recipe's rules (its composed config, its GPU needs, the
    # dry run of its trainer) exist only in a check that was asked about a recipe (--recipe), so
    # without that fact they have no check line at all; with it, they run like any other rule.
    only_with: str | None = None
    # The finding IDs the rule may emit: exact IDs, families (`version.*`), or `signature:import`
    # (every signatures.yaml ID of that context). An ID outside them is a contract error in tests.
    emits: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """module:function, as `doctor explain` names the rule that reports an ID."""
        return f"{self.fn.__module__}:{getattr(self.fn, '__qualname__', self.fn.__name__)}"


# Who emits an ID outside every rule: the evaluate loop itself.
LOOP_IDS = ("doctor.rule-crashed",)


@functools.lru_cache(maxsize=None)
def signature_ids(context: str) -> frozenset[str]:
    return frozenset(s["id"] for s in knowledge.load("signatures") if context in s["contexts"])


def failure_class_ids() -> frozenset[str]:
    """The findings `doctor triage` names by a failure's structure (knowledge/triage.yaml failure_classes)."""
    return frozenset(c["id"] for c in knowledge.load("triage").get("failure_classes", []))


def declares(patterns: Iterable[str], finding_id: str) -> bool:
    """Whether a rule's `emits` covers one finding ID."""
    for p in patterns:
        if p.startswith("signature:"):
            if finding_id in signature_ids(p.split(":", 1)[1]):
                return True
        elif fnmatch.fnmatchcase(finding_id, p):
            return True
    return False


class Registry:
    """An ordered list of rules; registration order decides merges of one ID from two rules."""

    def __init__(self, area: str | None = None):
        self.area = area
        self.rules: list[Rule] = []

    def __call__(self, check: str, area: str | None = None, needs: tuple[str, ...] = (), applies=None,
                 requires: tuple[str, ...] = (), only_with: str | None = None, emits: tuple[str, ...] = ()):
        def register(fn):
            self.rules.append(Rule(fn, check, area or self.area or "?", tuple(needs), applies, tuple(requires),
                                   only_with, tuple(emits)))
            return fn
        return register

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)


def crash_finding(check: str, exc: BaseException) -> Finding:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = [ln.rstrip() for chunk in tb[-4:] for ln in chunk.splitlines() if ln.strip()][-6:]
    return make("doctor.rule-crashed", tail, check=check, error=f"{type(exc).__name__}: {exc}")


def run_rule(r: Rule, call: Callable[[], Iterable[Finding]], view: FactView | None = None) -> tuple[list[Finding], Check]:
    """Run one rule: its findings and its check line (ok / worst severity / skipped / crash)."""
    if view is not None:
        view.absent_reads, view.reads = [], set()
    try:
        got = list(call() or [])
    except FactMissing as exc:
        return [], Check(r.check, r.area, Status.SKIPPED, why=exc.why)
    except ContractError:  # raised only under VERL_DOCTOR_STRICT=1 (the tests): fail loudly, not as a crash
        raise
    except Exception as exc:  # noqa: BLE001 - isolate the doctor's own bugs, like the probes
        f = crash_finding(r.check, exc)
        return [f], Check(r.check, r.area, Status.CRASH, ids=[f.id], why="the rule raised; see doctor.rule-crashed")
    unseen = view.why_unseen() if view is not None else None
    if not got and unseen:
        return [], Check(r.check, r.area, Status.SKIPPED, why=unseen)
    undeclared = sorted({f.id for f in got if not declares(r.emits, f.id)})
    if undeclared and strict():
        raise ContractError(f"rule {r.name} emitted {', '.join(undeclared)}, not in its emits= {list(r.emits)}")
    return got, Check(r.check, r.area, Status.of(f.severity for f in got), ids=sorted({f.id for f in got}),
                      why=f"emitted undeclared ID(s): {', '.join(undeclared)}" if undeclared else None)


# The one registry of rules. Module import order is registration order (which decides merges):
# doctor/rules/__init__.py imports the rule modules in that order.
RULES = Registry()
rule = RULES  # @rule("check", "area", needs=..., requires=..., emits=...) registers a rule
