"""`recipes report LOG [--out DIR] [--json]`: a verl console log → DIR/metrics.jsonl (one object per
step), DIR/summary.json (also printed by --json) and DIR/report.html (one self-contained page, plots
as inline SVG drawn here: no JavaScript, no external assets)."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

from doctor.errors import UsageError
from doctor import logparse as lp

SCHEMA_VERSION = 1
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22"]


# --- summary ------------------------------------------------------------------------------------

def summarize(log: lp.ParsedLog) -> dict:
    val_name, val_pts = lp.resolve(log, "validation")
    rew_name, rew_pts = lp.resolve(log, "reward")
    len_name, len_pts = lp.resolve(log, "response_length")
    kl_name, kl_pts = lp.resolve(log, "kl")
    thr_name, thr_pts = lp.resolve(log, "throughput")
    stages = lp.timing(log)

    final = final_from = None
    if val_name and log.final_val:
        final = lp.canonical_value(log, "validation", val_name, log.final_val)
        if final is not None:
            final_from = f"Final validation metrics (line {log.final_val_line})"
    if final is None and val_pts:
        final = val_pts[-1][1]
        final_from = f"last validation step ({val_pts[-1][0]})"
    initial = lp.canonical_value(log, "validation", val_name, log.initial_val) if val_name else None
    if initial is None and val_pts and val_pts[0][0] == min(log.steps):
        initial = val_pts[0][1]
    best = max(val_pts, key=lambda p: p[1]) if val_pts else None
    steps = list(log.steps)
    return {
        "schema_version": SCHEMA_VERSION,
        "log": log.path,
        "trainer": "ppo",
        "algorithm": log.algorithm,
        "era": log.era,
        "steps": len(steps),
        "first_step": steps[0],
        "last_step": steps[-1],
        "step_records": log.records,
        "out_of_order": log.out_of_order,
        "val_metric": val_name,
        "val_points": len(val_pts),
        "initial_val_score": initial,
        "final_val_score": final,
        "final_val_from": final_from,
        "final_validation_line": ("None" if log.final_val_present and log.final_val is None
                                  else "present" if log.final_val_present else "absent"),
        "best_val_score": best[1] if best else None,
        "best_val_step": best[0] if best else None,
        "reward_metric": rew_name,
        "first_reward": rew_pts[0][1] if rew_pts else None,
        "last_reward": rew_pts[-1][1] if rew_pts else None,
        "response_length_metric": len_name,
        "median_response_length": lp.median(len_pts),
        "kl_metric": kl_name,
        "last_kl": kl_pts[-1][1] if kl_pts else None,
        "throughput_metric": thr_name,
        "median_throughput": lp.median(thr_pts),
        "timing": {stage: lp.median(pts) for stage, pts in stages.items()},
    }


# --- SVG plots ------------------------------------------------------------------------------------

def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi - lo < 1e-12:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks: list[float] = []
    t = start
    while len(ticks) < 20:  # up to the first tick at or above the data's top: no line above the axis
        ticks.append(round(t, 10))
        if t >= hi - 1e-12:
            break
        t += step
    return ticks


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a < 0.001:  # a KL of -0.0004 is not "-0"
        return f"{v:.1e}"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.0f}" if v == int(v) else f"{v:.1f}"
    return f"{v:.3g}"


def _thin(points: list[tuple[int, float]], limit: int = 1500) -> list[tuple[int, float]]:
    if len(points) <= limit:
        return points
    k = math.ceil(len(points) / limit)
    return points[::k] + ([points[-1]] if (len(points) - 1) % k else [])


def svg_chart(metric: str, title: str, series: list[tuple[str, str, list[tuple[int, float]]]],
              unit: str = "", markers: bool = False) -> str:
    """One line chart as an inline <svg data-metric=…>; series = [(label, colour, [(step, value)…])]."""
    W, H, L, R, T, B = 560, 280, 58, 14, 30, 40
    pts_all = [p for _, _, pts in series for p in pts if math.isfinite(p[1])]
    xs = [p[0] for p in pts_all]
    ys = [p[1] for p in pts_all]
    x0, x1 = min(xs), max(xs)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    yt = _nice_ticks(min(ys), max(ys))
    y0, y1 = yt[0], yt[-1]
    xt = _nice_ticks(x0, x1, 6)
    xt = [t for t in xt if x0 <= t <= x1] or [x0, x1]
    sx = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)  # noqa: E731
    sy = lambda y: H - B - (y - y0) / (y1 - y0) * (H - T - B)  # noqa: E731
    # the legend goes under the chart, never on the lines
    rows = math.ceil(len(series) / 4) if len(series) > 1 else 0
    full_h = H + 16 * rows
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-metric="{html.escape(metric)}" '
           f'viewBox="0 0 {W} {full_h}" width="{W}" height="{full_h}" role="img" aria-label="{html.escape(title)}">',
           f'<text x="{L}" y="18" class="title">{html.escape(title)}</text>']
    for t in yt:
        y = sy(t)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{L - 6}" y="{y + 4:.1f}" class="ytick">{_fmt(t)}</text>')
    for t in xt:
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{H - B}" x2="{x:.1f}" y2="{H - B + 4}" class="axis"/>'
                   f'<text x="{x:.1f}" y="{H - B + 16}" class="xtick">{_fmt(t)}</text>')
    out.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" class="axis"/>'
               f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" class="axis"/>'
               f'<text x="{(L + W - R) / 2:.0f}" y="{H - 6}" class="xlabel">step</text>')
    if unit:
        out.append(f'<text x="12" y="{(T + H - B) / 2:.0f}" class="ylabel" '
                   f'transform="rotate(-90 12 {(T + H - B) / 2:.0f})">{html.escape(unit)}</text>')
    for i, (label, colour, pts) in enumerate(series):
        pts = [p for p in _thin(pts) if math.isfinite(p[1])]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline data-series="{html.escape(label)}" data-points="{len(pts)}" points="{coords}" '
                   f'fill="none" stroke="{colour}" stroke-width="1.6"/>')
        if markers or len(pts) <= 2:
            out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.8" fill="{colour}"><title>step {x}: '
                    f'{y:g}</title></circle>' for x, y in pts]
        if len(series) > 1:
            lx, ly = L + (i % 4) * 125, H + 2 + 16 * (i // 4)
            out.append(f'<rect x="{lx}" y="{ly}" width="10" height="3" fill="{colour}"/>'
                       f'<text x="{lx + 14}" y="{ly + 5}" class="legend">{html.escape(label)}</text>')
    out.append("</svg>")
    return "".join(out)


def _missing(metric: str, title: str, why: str) -> str:
    return (f'<div class="chart missing" data-missing="{html.escape(metric)}"><b>{html.escape(title)}</b>'
            f'<p>{html.escape(why)}</p></div>')


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px} .sub{color:#666;margin:0 0 16px;word-break:break-all}
table.summary{border-collapse:collapse;margin:8px 0 20px;background:#fff}
table.summary td{border:1px solid #ddd;padding:4px 10px} table.summary td:first-child{color:#555}
.grid2{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:14px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px}
svg.chart{width:100%;height:auto;display:block}
svg .title{font-size:13px;font-weight:600;fill:#222} svg .grid{stroke:#eee} svg .axis{stroke:#999}
svg .ytick{font-size:10px;fill:#555;text-anchor:end} svg .xtick{font-size:10px;fill:#555;text-anchor:middle}
svg .xlabel,svg .ylabel{font-size:11px;fill:#555;text-anchor:middle} svg .legend{font-size:10px;fill:#333}
.missing{padding:12px;color:#666;min-height:120px}
"""


def render_html(log: lp.ParsedLog, summary: dict) -> str:
    roles = lp.spec()["roles"]
    cards = []
    for role, colour in (("reward", PALETTE[0]), ("validation", PALETTE[1]), ("response_length", PALETTE[2]),
                         ("kl", PALETTE[4]), ("throughput", PALETTE[3])):
        name, pts = lp.resolve(log, role)
        title = roles[role]["title"]
        if pts:
            cards.append(svg_chart(role, f"{title} — {name}", [(name or role, colour, pts)], roles[role]["unit"],
                                   markers=role == "validation"))
        else:
            why = {"throughput": "This log has no perf/throughput (verl logs it from v0.3 on).",
                   "validation": "No validation metric in this log (no val-core/…, val/test_score/… keys)."}
            cards.append(_missing(role, title, why.get(role, f"No {role} metric in this log.")))
    stages = lp.timing(log)
    if stages:
        series = [(stage, PALETTE[i % len(PALETTE)], pts) for i, (stage, pts) in enumerate(stages.items())]
        cards.append(svg_chart("timing", roles["timing"]["title"], series, "s"))
    else:
        cards.append(_missing("timing", roles["timing"]["title"], "No timing/… or timing_s/… keys in this log."))
    rows = [("trainer / algorithm / era", f"verl.trainer.main_{summary['trainer']} / {algorithm_name(summary.get('algorithm'))} / "
                                          f"verl {summary['era'] or '?'} metric names"),
            ("steps", f"{summary['steps']} (step {summary['first_step']} … {summary['last_step']}; "
                      f"{summary['step_records']} step lines{'; out of order in the log' if summary['out_of_order'] else ''})"),
            ("validation metric", summary["val_metric"] or "—"),
            ("initial → final validation", f"{v(summary['initial_val_score'])} → {v(summary['final_val_score'])}"
                                           + (f" ({summary['final_val_from']})" if summary["final_val_from"] else "")),
            ("best validation", f"{v(summary['best_val_score'])}"
                                + (f" at step {summary['best_val_step']}" if summary["best_val_step"] is not None else "")),
            ("reward first → last", f"{v(summary['first_reward'])} → {v(summary['last_reward'])}"),
            ("median response length", v(summary["median_response_length"])),
            ("median throughput (tokens/s/GPU)", v(summary["median_throughput"])),
            ("median time per stage (s)", ", ".join(f"{k} {v:.4g}" for k, v in summary["timing"].items()) or "—")]
    table = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    body = "".join(f'<div class="card">{c}</div>' for c in cards)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>verl run report — {html.escape(Path(log.path).name)}</title><style>{CSS}</style></head>"
            f"<body><h1>verl {html.escape(algorithm_name(log.algorithm))} run report</h1><p class=\"sub\">{html.escape(log.path)}</p>"
            f"<table class=\"summary\">{table}</table><div class=\"grid2\">{body}</div>"
            "<p class=\"sub\">Generated by <code>recipes report</code> (verl-doctor). Metric names per verl era: "
            "doctor/knowledge/log_metrics.yaml.</p></body></html>\n")


def algorithm_name(adv_estimator: str | None) -> str:
    """The run's algorithm by verl's algorithm.adv_estimator: gae is PPO; grpo, rloo, … by name."""
    if not adv_estimator or adv_estimator == "gae":
        return "PPO"
    return adv_estimator.upper().replace("_", "-")


def v(x) -> str:
    if x is None:
        return "—"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


# --- command --------------------------------------------------------------------------------------

OUTPUT_NAMES = ("metrics.jsonl", "summary.json", "report.html")


def out_dir(log_path: Path, out: str | None) -> Path:
    """--out, else ./<log name>-report in the folder the user is in (never beside the log: that may be
    a read-only or shared tree). An existing folder is reused only when it holds nothing but an
    earlier report of this command: a user's files are never overwritten."""
    d = Path(out) if out else Path.cwd() / f"{log_path.stem}-report"
    if d.exists() and not d.is_dir():
        raise UsageError(f"output {d} exists and is not a directory")
    if d.is_dir():
        foreign = sorted(p.name for p in d.iterdir() if p.name not in OUTPUT_NAMES)
        summary = d / "summary.json"
        if not foreign and summary.exists():
            try:
                ours = "trainer" in json.loads(summary.read_text(encoding="utf-8"))
            except (OSError, ValueError, TypeError):
                ours = False
            foreign = [] if ours else ["summary.json (not one this command wrote)"]
        elif not foreign and any((d / n).exists() for n in OUTPUT_NAMES):
            foreign = [n for n in OUTPUT_NAMES if (d / n).exists()]
        if foreign:
            raise UsageError(f"output {d} holds files that are not an earlier report ({', '.join(foreign[:3])}"
                             f"{'…' if len(foreign) > 3 else ''}); give --out NEW_DIR")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output directory {d}: {exc.strerror or exc}") from None
    return d


def write_outputs(log: lp.ParsedLog, summary: dict, out: Path) -> dict[str, Path]:
    files = {"metrics": out / "metrics.jsonl", "summary": out / "summary.json", "html": out / "report.html"}
    try:
        with open(files["metrics"], "w", encoding="utf-8") as fh:
            for step, metrics in log.steps.items():
                fh.write(json.dumps({"step": step, **metrics}, allow_nan=True) + "\n")
        files["summary"].write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        files["html"].write_text(render_html(log, summary), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write to {out}: {exc.strerror or exc}") from None
    return files




