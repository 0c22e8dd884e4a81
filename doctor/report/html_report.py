"""`doctor check --html FILE`: one self-contained page to attach to a bug report or hand to a
colleague — the checks by area, every finding with its evidence, fix and sources, the stack's
versions, and the whole --json document embedded (so the page is also the machine-readable record).

Only facts the doctor already reports go in: environment variables come through the allowlist and
redaction of probes/environment.py, so a secret that --json would not show is not here either."""

from __future__ import annotations

import datetime as dt
import html
import re
import json
import os
from pathlib import Path

from doctor import __version__
from doctor.errors import UsageError
from doctor.report.json_report import to_document
from doctor.report.marks import MARK
from doctor.report.text import AREA_TITLES

GENERATOR = "verl-doctor check --html"
# The distributions a reader of a verl PPO bug report asks for first, in that order.
KEY_DISTS = ["verl", "vllm", "torch", "transformers", "tokenizers", "ray", "tensordict", "numpy", "pyarrow",
             "setuptools", "xformers", "flash-attn", "triton", "protobuf"]

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;color:#1d2330;padding:0 1em}
h1{font-size:1.5em;margin:0}.sub{color:#5b6475;margin:.2em 0 1.2em}
.totals span{display:inline-block;padding:.2em .7em;border-radius:1em;margin-right:.4em;font-weight:600}
.t-error{background:#fde2e1;color:#a3120b}.t-warning{background:#fff1cc;color:#7a5300}.t-ok{background:#dcf5e3;color:#14652f}
table{border-collapse:collapse;margin:.5em 0 1.2em}
td,th{border-bottom:1px solid #e3e6ec;padding:.25em .8em;text-align:left;vertical-align:top}
h2{font-size:1.15em;margin:1.4em 0 .3em;border-bottom:2px solid #e3e6ec}
.check{margin:.15em 0}.mark{display:inline-block;width:1.3em;font-weight:700}
.s-ok .mark{color:#14652f}.s-warning .mark{color:#b07800}.s-error .mark{color:#c0150c}
.s-info .mark{color:#0b6e8a}.s-skipped{color:#7b8394}.s-crash .mark{color:#8a1c8a}
.finding{margin:.3em 0 .8em 1.6em;padding:.5em .8em;border-left:4px solid #ccd;background:#f7f8fa}
.finding.error{border-color:#c0150c}.finding.warning{border-color:#e0a000}.finding.info{border-color:#0b6e8a}
.fid{font-family:ui-monospace,monospace;font-weight:700}.ev,.cmd{font-family:ui-monospace,monospace;font-size:12.5px;white-space:pre-wrap;word-break:break-all}
.ev{color:#414a5c}.cmd{background:#1d2330;color:#e8ecf3;padding:.3em .6em;border-radius:4px;margin:.2em 0}
.meta{color:#5b6475;font-size:12.5px}details{margin:.3em 0}
"""


def check_output_path(path: str) -> Path:
    """Fail before any probe runs: the folder must exist, and an existing file is only replaced when
    it is an earlier report of the doctor (a user's other file is never overwritten)."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"--html {path}: is a directory; name a file")
    if not out.parent.is_dir():
        raise UsageError(f"--html {path}: folder {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK):
        raise UsageError(f"--html {path}: folder {out.parent} is not writable")
    if out.exists():
        try:
            head = out.read_text(encoding="utf-8", errors="replace")[:2000]
        except OSError as exc:
            raise UsageError(f"--html {path}: cannot read the existing file ({exc.strerror or exc})")
        if f'<meta name="generator" content="{GENERATOR}' not in head:
            raise UsageError(f"--html {path}: the file exists and is not a verl-doctor report; name a new file")
    return out


def write(result, path: Path) -> None:
    page = render(result)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"--html {path}: cannot write it ({exc.strerror or exc})")


_URL = re.compile(r"https?://[^\s<>\"')\]]+[^\s<>\"')\].,;:]")


def _linked(text: str) -> str:
    """Escaped text with its http(s) URLs as links (opened in a new tab, no referrer)."""
    out, last = [], 0
    for m in _URL.finditer(text):
        out.append(_e(text[last:m.start()]))
        out.append(f'<a href="{_e(m.group(0))}" rel="noreferrer noopener" target="_blank">{_e(m.group(0))}</a>')
        last = m.end()
    out.append(_e(text[last:]))
    return "".join(out)


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def render_finding(f) -> str:
    parts = [f'<div class="finding {_e(f.severity)}" data-finding-id="{_e(f.id)}" data-severity="{_e(f.severity)}">',
             f'<div><span class="fid">{_e(f.id)}</span> · {_e(f.title)}</div>']
    parts += [f'<div class="ev">{_e(e)}</div>' for e in f.evidence]
    if f.severity != "info":
        auto = " (doctor fix can apply this)" if f.fix.automatic else ""
        parts.append(f'<div><b>fix</b>: {_e(f.fix.summary)}{_e(auto)}</div>')
        parts += [f'<div class="cmd">$ {_e(c)}</div>' for c in f.fix.commands]
    if f.sources:
        parts.append(f'<div class="meta">sources: {" · ".join(_linked(x) for x in f.sources)} · '
                     f'<code>doctor explain {_e(f.id)}</code></div>')
    parts.append("</div>")
    return "".join(parts)


def _versions(facts: dict) -> str:
    dists = facts.get("distributions") or {}
    rows = [f"<tr><td>{_e(n)}</td><td>{_e(dists[n]['version'] if n in dists else 'not installed')}</td></tr>"
            for n in KEY_DISTS]
    gpu = facts.get("gpu") or {}
    if gpu.get("available"):
        devs = gpu.get("gpus") or []
        desc = f"{len(devs)} × {devs[0].get('name')}" if devs else "NVML answers, no GPU listed"
        if devs and devs[0].get("memory_total"):
            desc += f" ({devs[0]['memory_total'] / 2**30:.0f} GiB)"
        desc += f", driver {gpu.get('driver_version')}" if gpu.get("driver_version") else ""
    else:
        desc = f"none ({gpu.get('reason') or 'not available'})"
    torch = gpu.get("torch") or {}
    rows.append(f"<tr><td>GPU</td><td>{_e(desc)}</td></tr>")
    if torch.get("installed"):
        rows.append(f"<tr><td>torch build</td><td>{_e(torch.get('version'))} (CUDA {_e(torch.get('cuda'))})</td></tr>")
    return "<table><tr><th>distribution</th><th>installed</th></tr>" + "".join(rows) + "</table>"


def render(result) -> str:
    doc = to_document(result)
    t = result.facts.get("python", {})
    errors = sum(f.severity == "error" for f in result.findings)
    warnings = sum(f.severity == "warning" for f in result.findings)
    by_id: dict[str, list] = {}   # one ID may be reported more than once
    for f in result.findings:
        by_id.setdefault(f.id, []).append(f)
    body, shown = [], set()
    for area in dict.fromkeys(c.area for c in result.checks):
        body.append(f'<h2 data-area="{_e(area)}">{_e(AREA_TITLES.get(area, area))}</h2>')
        for c in (c for c in result.checks if c.area == area):
            why = f' <span class="meta">({_e(c.why)})</span>' if c.why and c.status in ("skipped", "crash") else ""
            body.append(f'<div class="check s-{_e(c.status)}"><span class="mark">{MARK[c.status][0]}</span>'
                        f'{_e(c.check)}{why}</div>')
            for fid in c.ids:
                if fid in shown:  # one finding from two checks: its details are shown once
                    body.append(f'<div class="finding {_e(by_id[fid][0].severity)} meta" data-see="{_e(fid)}">'
                                f'<span class="fid">{_e(fid)}</span> (above)</div>')
                elif fid in by_id:
                    shown.add(fid)
                    body.extend(render_finding(f) for f in by_id[fid])
    rest = [f for f in result.findings if f.id not in shown]  # findings of no listed check (none today)
    if rest:
        body.append("<h2>Other findings</h2>" + "".join(render_finding(f) for f in rest))
    doc_text = json.dumps(doc, default=str, indent=1)
    embedded = doc_text.replace("</", "<\\/")  # </ inside a <script> would end it early: JSON allows \/ for /
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    totals = (f'<span class="t-error">{errors} error(s)</span>' if errors else "") + \
             (f'<span class="t-warning">{warnings} warning(s)</span>' if warnings else "") + \
             ("" if errors or warnings else '<span class="t-ok">no problems</span>')
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta name="generator" content="{GENERATOR} {_e(__version__)}">'
        f"<title>verl-doctor check — {_e(result.python)}</title><style>{CSS}</style></head><body>"
        f"<h1>verl-doctor check</h1><p class=\"sub\">{_e(result.python)} · Python {_e(t.get('version'))} · "
        f"{len(result.facts.get('distributions', {}))} distributions · {_e(when)} · verl-doctor {_e(__version__)}</p>"
        f'<p class="totals">{totals}</p>'
        f"{_versions(result.facts)}"
        + "".join(body)
        + "<details><summary>the whole --json document (also embedded as application/json)</summary>"
        f'<pre class="ev">{_e(doc_text)}</pre></details>'
        f'<script type="application/json" id="doctor-check-json">{embedded}</script>'
        "</body></html>\n"
    )
