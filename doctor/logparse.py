"""One parser for any verl PPO console log (v0.1 … v0.4+).

The line format is fixed across eras (verl/utils/logger/aggregate_logger.py `concat_dict_to_str`):
`step:N - key:value - …`, every value printed with 3 decimals. Around it a real log carries ANSI
colour codes, Ray prefixes (`(main_task pid=123)`, `(TaskRunner pid=…)`), Ray's de-duplication
suffix, interleaved worker output and — from `ray job logs` — steps out of order. What the keys
*mean* per era (reward, validation score, KL, throughput, timing) is data:
doctor/knowledge/log_metrics.yaml.

Performance: only lines that contain "step:" or a validation marker reach a regular expression;
every pattern is compiled once (the 573 kB sample log parses in a few milliseconds)."""

from __future__ import annotations

import ast
import functools
import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path

from doctor import knowledge
from doctor.errors import UsageError

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# A Ray log prefix: "(main_task pid=123)", "(TaskRunner pid=1, ip=10.0.0.1)",
# "(wiQkzJWorkerDict_0:0 WorkerDict pid=934604)".
_RAY_PREFIX = re.compile(r"\((?:[^()\n]{0,200}?)pid=\d+[^()\n]{0,80}\)\s?")
_RAY_REPEAT = re.compile(r"\s*\[repeated \d+x across cluster\].*$")
_STEP_BEFORE = frozenset(" \t>|]):")   # what may precede `step:` of a record ("[rank0]:step:3 - …")
_PAIR_VALUE = re.compile(r"""['"]([^'"\n]+)['"]\s*:\s*(?:np\.\w+\()?\s*(-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))""")
_BINARY_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27))


@functools.lru_cache(maxsize=None)
def spec() -> dict:
    """knowledge/log_metrics.yaml with its patterns compiled."""
    raw = knowledge.load("log_metrics")
    roles = {}
    for name, r in raw["roles"].items():
        roles[name] = {**r, "rx": [re.compile(p) for p in r["patterns"]],
                       "alias_rx": [(re.compile(a["pattern"]), a["canonical"]) for a in r.get("aliases", [])]}
    return {
        "roles": roles,
        "ppo_markers": [re.compile(p) for p in raw["ppo_markers"]],
        "other_trainers": [{**t, "rx": [re.compile(p) for p in t["patterns"]]} for t in raw["other_trainers"]],
        "eras": [{**e, "rx": re.compile(e["pattern"])} for e in raw["eras"]],
        "initial": raw["validation_lines"]["initial"],
        "final": raw["validation_lines"]["final"],
    }


@dataclass
class ParsedLog:
    path: str
    lines: int
    steps: dict[int, dict[str, float]]            # sorted by step; last value per key wins
    step_line: dict[int, int]                     # step → 1-based line of its first record
    keys: list[str]                               # every metric key, in order of first appearance
    out_of_order: bool = False
    records: int = 0                              # step records read (a step may have several)
    initial_val: dict[str, float] | None = None
    final_val: dict[str, float] | None = None
    final_val_present: bool = False               # the "Final validation metrics" line exists
    final_val_line: int | None = None
    era: str | None = None
    algorithm: str | None = None     # algorithm.adv_estimator from the config the trainer printed
    warnings: list[str] = field(default_factory=list)

    def role_key(self, role: str) -> str | None:
        return resolve(self, role)[0]


def clean(line: str) -> str:
    """A log line without ANSI codes, leading Ray prefixes and Ray's repeat suffix."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    while line.startswith("(") or line.startswith(" ("):
        m = _RAY_PREFIX.match(line.lstrip())
        if not m:
            break
        line = line.lstrip()[m.end():]
    if "[repeated" in line:
        line = _RAY_REPEAT.sub("", line)
    return line.rstrip("\r")


def read_text(path: str | Path) -> str:
    """The log's text; UsageError (one line, exit 2) for a missing, empty or binary file."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path} is a directory, not a log file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return decode(data, str(path))


def decode(data: bytes, name: str) -> str:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            raise UsageError(f"{name} is a damaged gzip file") from None
    if not data.strip():
        raise UsageError(f"{name} is empty: not a verl console log")
    sample = data[:65536]
    control = len(sample) - len(sample.translate(None, _BINARY_BYTES))
    if control > max(8, len(sample) // 100):
        raise UsageError(f"{name} is a binary file ({control} control bytes in its first "
                         f"{len(sample)}): not a verl console log")
    text = data.decode("utf-8", errors="replace")
    if text[:65536].count("\ufffd") > len(sample) // 20:
        raise UsageError(f"{name} is not text (invalid UTF-8): not a verl console log")
    return text


def parse_step(line: str) -> tuple[int, dict[str, float]] | None:
    """The first step record of a console line, (step, metrics), or None: the one step-line grammar
    of triage, `recipes report` and `recipes run`."""
    for step, rest in step_records(line):
        pairs = _parse_pairs(rest)
        if pairs:
            return step, pairs
    return None


def step_records(line: str):
    """(step, "rest") for each step record on a line; several Ray outputs may be glued on one line."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    parts = _RAY_PREFIX.split(line) if line.count("pid=") > 1 else (line,)
    for part in parts:
        at = part.find("step:")
        while at > 0 and part[at - 1] not in _STEP_BEFORE:  # e.g. "global_step:" is not a record
            at = part.find("step:", at + 5)
        if at < 0:
            continue
        end = part.find(" ", at)
        num = part[at + 5:end if end > 0 else None].strip()
        if not num.lstrip("-").isdigit():
            continue
        rest = part[end:] if end > 0 else ""
        if rest and not rest.startswith(" - "):
            continue
        if "[repeated" in rest:
            rest = _RAY_REPEAT.sub("", rest)
        yield int(num), rest


def _parse_pairs(rest: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in rest.split(" - "):
        key, sep, value = item.rpartition(":")
        if not sep or not key or " " in key:
            continue
        try:
            out[key] = float(value)
        except ValueError:  # "0.123 [repeated …]", a cut line, or a non-number
            try:
                out[key] = float(value.split()[0])
            except (ValueError, IndexError):
                continue
    return out


def _validation_block(lines: list[str], i: int, marker: str) -> tuple[dict[str, float] | None, bool]:
    """The dict printed after a validation marker at line i (pprint'ed f-string, maybe wrapped).
    Returns (metrics or None when it printed None, parsed_ok)."""
    first = clean(lines[i])
    pos = first.find(marker)
    lead = first[:pos].strip()
    text = None
    if lead.startswith("("):  # pprint wrapped a long string: ('part 1'\n 'part 2')
        chunk = [first[pos - len(lead):] if lead else first]
        j = i
        while not chunk[-1].rstrip().endswith(")") and j + 1 < len(lines) and j - i < 200:
            j += 1
            chunk.append(clean(lines[j]).strip())
        try:
            text = ast.literal_eval("\n".join(chunk).strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            text = None
    elif lead in ("'", '"'):
        try:
            text = ast.literal_eval(first[pos - 1:].strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            text = None
    if not isinstance(text, str):  # plain print, or pprint of a dict over several lines
        text = first[pos:]
        depth = text.count("{") - text.count("}")
        j = i
        while depth > 0 and j + 1 < len(lines) and j - i < 500:
            j += 1
            nxt = clean(lines[j])
            text += " " + nxt
            depth += nxt.count("{") - nxt.count("}")
    payload = text[text.find(marker) + len(marker):].strip().strip("'\"")
    if payload.startswith("None"):
        return None, True
    found = {k: float(v) for k, v in _PAIR_VALUE.findall(payload)}
    return found, bool(found)


def parse_text(text: str, path: str = "<log>") -> ParsedLog:
    """Parse a verl console log; UsageError when it is not a verl PPO log."""
    sp = spec()
    lines = text.split("\n")
    steps: dict[int, dict[str, float]] = {}
    step_line: dict[int, int] = {}
    keys: dict[str, None] = {}
    order: list[int] = []
    initial_val = final_val = None
    final_present = False
    final_line = None
    records = 0
    init_marker, final_marker = sp["initial"], sp["final"]
    for i, line in enumerate(lines):
        if "step:" in line:
            for step, rest in step_records(line):
                pairs = _parse_pairs(rest)
                if not pairs:
                    continue
                records += 1
                if step in steps:
                    steps[step].update(pairs)
                else:
                    steps[step] = pairs
                    step_line[step] = i + 1
                order.append(step)
                for k in pairs:
                    if k not in keys:
                        keys[k] = None
        elif "validation metrics:" in line:
            if final_marker in line:
                final_val, _ = _validation_block(lines, i, final_marker)
                final_present, final_line = True, i + 1
            elif init_marker in line:
                initial_val, _ = _validation_block(lines, i, init_marker)
    nonempty = sum(1 for ln in lines if ln.strip())
    key_list = list(keys)
    if not steps:
        hint = ""
        if re.search(r"\{'loss': [-\d.]+, '(grad_norm|learning_rate)'", text):
            hint = " (it looks like a Hugging Face Trainer log)"
        raise UsageError(f"{path}: no verl step lines (`step:N - key:value - …`) in {nonempty} lines{hint}: "
                         "not a verl PPO console log")
    if not any(rx.search(k) for k in key_list for rx in sp["ppo_markers"]):
        for t in sp["other_trainers"]:
            hits = [k for k in key_list if any(rx.search(k) for rx in t["rx"])]
            if hits:
                raise UsageError(f"{path} is a {t['description']} log ({', '.join(hits[:3])}), not a PPO log")
        raise UsageError(f"{path}: its step lines carry none of the PPO metrics (critic/score, actor/pg_loss, "
                         f"response_length, timing): not a verl PPO log (keys: {', '.join(key_list[:4])})")
    out_of_order = any(b < a for a, b in zip(order, order[1:]))
    era = next((e["era"] for e in sp["eras"] if any(e["rx"].search(k) for k in key_list)), None)
    algo = next((m.group(1) or m.group(2) for m in (_ADV_ESTIMATOR.search(ln) for ln in lines[:3000]) if m), None)
    return ParsedLog(path=path, lines=len(lines), steps=dict(sorted(steps.items())), step_line=step_line,
                     keys=key_list, out_of_order=out_of_order, records=records, initial_val=initial_val,
                     final_val=final_val, final_val_present=final_present, final_val_line=final_line, era=era,
                     algorithm=algo)


# verl prints its whole config at start (pprint of a dict, or Hydra's overrides line).
_ADV_ESTIMATOR = re.compile(r"""'adv_estimator': '(\w+)'|algorithm\.adv_estimator=(\w+)""")


def parse_file(path: str | Path) -> ParsedLog:
    return parse_text(read_text(path), str(path))


# --- roles: which key means what (knowledge/log_metrics.yaml) ---------------------------------------

def _canonical(role_spec: dict, key: str) -> str:
    for rx, template in role_spec["alias_rx"]:
        m = rx.match(key)
        if m:
            return template.format(**m.groupdict())
    return key


def resolve(log: ParsedLog, role: str) -> tuple[str | None, list[tuple[int, float]]]:
    """(metric name as logged, [(step, value)…]) for a role; (None, []) when the log has none."""
    rs = spec()["roles"][role]
    groups: dict[str, list[str]] = {}
    for k in log.keys:
        groups.setdefault(_canonical(rs, k), []).append(k)
    for rx in rs["rx"]:
        for canon, members in groups.items():
            if rx.search(canon) or any(rx.search(m) for m in members):
                points = []
                for step, metrics in log.steps.items():
                    vals = [metrics[m] for m in members if m in metrics]
                    if vals:
                        points.append((step, metrics.get(canon, vals[-1])))
                name = max(members, key=lambda m: (sum(m in s for s in log.steps.values()), m == canon))
                return name, points
    return None, []


def canonical_value(log: ParsedLog, role: str, name: str, values: dict[str, float] | None) -> float | None:
    """The value of metric `name` (or an alias of it) in a validation dict such as Final validation metrics."""
    if not values:
        return None
    rs = spec()["roles"][role]
    want = _canonical(rs, name)
    for k, v in values.items():
        if k == name or _canonical(rs, k) == want:
            return v
    return None


def timing(log: ParsedLog) -> dict[str, list[tuple[int, float]]]:
    """stage → [(step, seconds)…] from the timing keys of the log's era."""
    rs = spec()["roles"]["timing"]
    stage_key: dict[str, str] = {}
    for k in log.keys:
        for rx in rs["rx"]:
            m = rx.match(k)
            if m:
                stage_key.setdefault(m.group("stage"), k)
                break
    out = {}
    for stage, key in stage_key.items():
        out[stage] = [(s, m[key]) for s, m in log.steps.items() if key in m]
    return out


def median(points: list[tuple[int, float]]) -> float | None:
    import statistics  # lazy: only a metric summary needs it; a short triage does not (issue 25's start-up)

    return round(statistics.median(v for _, v in points), 4) if points else None
