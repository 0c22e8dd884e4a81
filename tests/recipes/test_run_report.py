"""`recipes report`: the real verl logs of tests/data/logs parse to the right steps and scores, in any
order; non-PPO, empty and binary logs are refused (exit 2); the HTML page renders its plots in
headless Chromium."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, REPO

LOGS = DATA / "logs"
QWEN = LOGS / "qwen2.5-0.5b-gsm8k-ppo-prompt512-resp256.log"
GEMMA = LOGS / "gemma-2-2b-it-gsm8k-ppo.log"
QWEN2VL = LOGS / "qwen2vl-2b-geo3k-grpo-1step.log"

# Expected values, counted by hand once with grep (the logs contain ANSI bytes and two NULs, so -a):
#   grep -a 'step:' LOG | sed 's/.*step:\([0-9]*\) .*/\1/' | sort -n | uniq -c     (distinct steps)
#   grep -a 'Final validation metrics' LOG ; grep -a -o 'val/test_score/openai/gsm8k:[0-9.]*' LOG | tail -1
# qwen2.5-0.5b: 435 step lines, steps 0…434 each once → 435 steps; last line of the file is
#   "Final validation metrics: {'test_score/openai/gsm8k': 0.5190548780487805}".
# gemma-2-2b: 107 step lines; step 0 twice (the `step:0 - test_score/openai/gsm8k:0.521` validation
#   line and the first training line) → 106 steps 0…105; no Final validation metrics line (the log
#   ends at step 105), so the final score is the last validation value: step 99, 0.621; the best
#   is 0.640 at step 59.
# qwen2vl-2b: one step line (step:1) and 'Final validation metrics: None' → no validation score;
#   perf/throughput:448.826 on its step line.
EXPECTED = {
    QWEN: dict(steps=435, first_step=0, last_step=434, val_metric="val/test_score/openai/gsm8k",
               final_val_score=0.5190548780487805, best_val_score=0.538, median_throughput=None, era="v0.1"),
    GEMMA: dict(steps=106, first_step=0, last_step=105, val_metric="val/test_score/openai/gsm8k",
                final_val_score=0.621, best_val_score=0.64, best_val_step=59, median_throughput=None,
                initial_val_score=0.520579268292683, era="v0.1"),
    QWEN2VL: dict(steps=1, first_step=1, last_step=1, val_metric=None, final_val_score=None,
                  best_val_score=None, median_throughput=448.826, era="v0.3+"),
}


RECIPES_MAIN = "import sys; from doctor.recipes.cli import main; sys.exit(main(sys.argv[1:]))"


def run_recipes(*args: str, timeout: float = 120, cwd=None) -> subprocess.CompletedProcess:
    """`recipes ARGS` in a subprocess, as a user runs it (the console script's entry point)."""
    return subprocess.run([sys.executable, "-c", RECIPES_MAIN, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(cwd or REPO), env=dict(os.environ))


def report_json(log: Path, out: Path) -> dict:
    proc = run_recipes("report", str(log), "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("log", list(EXPECTED), ids=lambda p: p.name)
def test_real_logs_give_the_hand_counted_steps_and_scores(log, tmp_path):
    s = report_json(log, tmp_path / "r")
    assert s["trainer"] == "ppo"
    for key, want in EXPECTED[log].items():
        assert s[key] == (pytest.approx(want) if isinstance(want, float) else want), key
    # the files: one JSON object per step, summary.json == --json output, one HTML page
    rows = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == s["steps"] and [r["step"] for r in rows] == sorted(r["step"] for r in rows)
    assert json.loads((tmp_path / "r" / "summary.json").read_text()) == s
    assert set(s["timing"]) >= {"gen", "ref", "adv", "update_actor"}
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_text_output_and_default_out_dir_where_the_user_is(tmp_path):
    logs = tmp_path / "shared-logs"
    logs.mkdir()
    log = logs / "run.log"
    shutil.copy(GEMMA, log)
    logs.chmod(0o555)  # a read-only tree: nothing is written next to the log
    here = tmp_path / "here"
    here.mkdir()
    try:
        proc = run_recipes("report", str(log), cwd=here)
    finally:
        logs.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    assert "106 (step 0 … 105" in proc.stdout and "0.621" in proc.stdout
    assert sorted(p.name for p in (here / "run-report").iterdir()) == ["metrics.jsonl", "report.html", "summary.json"]
    assert sorted(p.name for p in logs.iterdir()) == ["run.log"]
    again = run_recipes("report", str(log), cwd=here)  # an earlier report of this command may be replaced
    assert again.returncode == 0, again.stderr


def test_a_users_folder_is_never_overwritten(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.json").write_text('{"my": "own data"}')
    (mine / "notes.txt").write_text("keep me")
    for out in (mine,):
        proc = run_recipes("report", str(GEMMA), "--out", str(out))
        assert proc.returncode == 2 and "not an earlier report" in proc.stderr, proc.stderr
    assert (mine / "summary.json").read_text() == '{"my": "own data"}' and sorted(p.name for p in mine.iterdir()) == [
        "notes.txt", "summary.json"]


def test_out_of_order_steps_from_ray_job_logs_give_the_same_metrics(tmp_path):
    lines = QWEN.read_bytes().split(b"\n")
    idx = [i for i, ln in enumerate(lines) if re.search(rb"\sstep:\d+ - ", ln)]
    moved = [lines[i] for i in idx]
    random.Random(7).shuffle(moved)
    for i, ln in zip(idx, moved):
        lines[i] = ln
    # a repeated record of step 5 later in the log: the last value per key wins
    dup = re.sub(rb"critic/score/mean:[0-9.]+", b"critic/score/mean:0.999", lines[idx[5]])
    shuffled = tmp_path / "shuffled.log"
    assert len(idx) == 435
    shuffled.write_bytes(b"\n".join(lines + [dup]))
    a = report_json(QWEN, tmp_path / "a")
    b = report_json(shuffled, tmp_path / "b")
    assert b["out_of_order"] is True and a["out_of_order"] is False
    for key in ("steps", "first_step", "last_step", "final_val_score", "best_val_score", "timing"):
        assert a[key] == b[key], key
    rows_a = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    rows_b = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    step5 = int(re.search(rb"step:(\d+)", dup).group(1))
    for ra, rb_ in zip(rows_a, rows_b):
        ja, jb = json.loads(ra), json.loads(rb_)
        if ja["step"] == step5:
            assert jb["critic/score/mean"] == 0.999
            jb["critic/score/mean"] = ja["critic/score/mean"]
        assert ja == jb


def test_newer_verl_val_core_and_wrapped_final_metrics(tmp_path):
    # v0.4 names, Ray prefixes with ip, Ray's repeat suffix and pprint's wrapping of a long string
    log = tmp_path / "v04.log"
    steps = []
    for n in range(1, 4):
        val = f" - val-core/openai/gsm8k/reward/mean@1:{0.4 + n / 10:.3f}" if n != 2 else ""
        steps.append(f"\x1b[36m(TaskRunner pid=77, ip=10.0.0.2)\x1b[0m step:{n} - actor/pg_loss:0.010 - "
                     f"critic/score/mean:{n / 10:.3f} - response_length/mean:200.000{val} - timing_s/gen:3.000 - "
                     f"timing_s/step:9.000 - perf/throughput:1200.000 [repeated 2x across cluster]")
    final = ["\x1b[36m(TaskRunner pid=77)\x1b[0m ('Final validation metrics: "
             "{'val-core/openai/gsm8k/reward/mean@1': np.float64(0.7123), '",
             "\x1b[36m(TaskRunner pid=77)\x1b[0m 'val-aux/openai/gsm8k/reward/mean@1': 0.7}')"]
    log.write_text("\n".join(steps + final) + "\n")
    s = report_json(log, tmp_path / "r")
    assert (s["steps"], s["era"], s["val_metric"]) == (3, "v0.4+", "val-core/openai/gsm8k/reward/mean@1")
    assert s["final_val_score"] == pytest.approx(0.7123) and s["best_val_score"] == pytest.approx(0.7)
    assert s["median_throughput"] == 1200.0 and s["timing"] == {"gen": 3.0, "step": 9.0}


SFT_LOG = """\
+ torchrun --standalone --nnodes=1 --nproc_per_node=2 -m verl.trainer.fsdp_sft_trainer data.train_files=/data/gsm8k/train.parquet data.val_files=/data/gsm8k/test.parquet model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct trainer.logger=['console']
Normalize batch size by dp 2
Using sequence parallel size: 1
Using remove padding: False
Using LocalLogger is deprecated. The constructor API will change
Total training steps: 87
Epoch 1/3:   1%|          | 1/29 [00:03<01:38,  3.51s/it]
step:1 - train/loss:0.962 - train/lr(1e-3):0.001
step:2 - train/loss:0.851 - train/lr(1e-3):0.002
step:3 - train/loss:0.703 - train/lr(1e-3):0.003
step:29 - val/loss:0.655
"""


@pytest.mark.parametrize("kind", ["sft", "hf-trainer", "empty", "blank", "binary", "missing", "directory"])
def test_logs_that_are_not_ppo_logs_exit_2_with_one_line(kind, tmp_path):
    log = tmp_path / "x.log"
    if kind == "sft":
        log.write_text(SFT_LOG)
    elif kind == "hf-trainer":
        log.write_text("{'loss': 1.2345, 'grad_norm': 3.2, 'learning_rate': 1e-05, 'epoch': 0.1}\n" * 5)
    elif kind == "empty":
        log.write_bytes(b"")
    elif kind == "blank":
        log.write_text("\n\n   \n")
    elif kind == "binary":
        log.write_bytes(bytes(random.Random(1).randrange(256) for _ in range(20000)))
    elif kind == "directory":
        log.mkdir()
    proc = run_recipes("report", str(log), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    if kind == "sft":
        assert "SFT" in proc.stderr and "not a PPO log" in proc.stderr
    assert not (tmp_path / "out").exists(), "nothing is written for a bad log"


def test_unwritable_out_dir_exits_2_and_writes_nothing_elsewhere(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    before = sorted(tmp_path.rglob("*"))
    proc = run_recipes("report", str(QWEN2VL), "--out", str(blocker / "sub"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "cannot create output directory" in proc.stderr
    assert sorted(tmp_path.rglob("*")) == before
    assert not (QWEN2VL.parent / f"{QWEN2VL.stem}-report").exists()


def test_the_573_kB_log_parses_in_well_under_200_ms():
    from doctor import logparse

    logparse.spec()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        log = logparse.parse_file(QWEN)
        times.append(time.perf_counter() - t0)
    assert len(log.steps) == 435
    assert min(times) < 0.2, f"parse took {statistics.median(times) * 1000:.0f} ms (median of 5)"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                           "--no-first-run", "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", f"--user-data-dir={tmp_path / 'chromium-profile'}", *args],
                          capture_output=True, text=True, timeout=90)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs Debian's chromium)")
@pytest.mark.parametrize("log,plots,missing", [(QWEN, 5, {"throughput"}), (QWEN2VL, 5, {"validation"})],
                         ids=["qwen2.5-v0.1", "qwen2vl-v0.3"])
def test_report_page_renders_its_plots_in_headless_chromium(log, plots, missing, tmp_path):
    report_json(log, tmp_path / "r")
    url = (tmp_path / "r" / "report.html").as_uri()
    proc = _chromium(tmp_path, "--dump-dom", url)
    dom = proc.stdout
    assert proc.returncode == 0 and "</html>" in dom, proc.stderr[-2000:]
    svgs = re.findall(r'<svg[^>]*data-metric="([a-z_]+)"[^>]*>(.*?)</svg>', dom, re.S)
    assert len(svgs) == plots, [m for m, _ in svgs]
    for metric, body in svgs:
        pts = re.findall(r'<polyline[^>]*points="([^"]+)"', body)
        assert pts and all(p.strip() for p in pts), metric
    assert set(re.findall(r'data-missing="([a-z_]+)"', dom)) == missing
    if log == QWEN:
        n = re.search(r'data-metric="reward".*?data-points="(\d+)"', dom, re.S).group(1)
        assert int(n) == 435
        shot = tmp_path / "shot.png"
        proc = _chromium(tmp_path, "--hide-scrollbars", "--window-size=1200,2000", f"--screenshot={shot}", url)
        assert proc.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", proc.stderr[-2000:]
        assert shot.stat().st_size > 30_000  # a blank page is a few kB


@pytest.mark.parametrize("log", list(EXPECTED), ids=lambda p: p.name)
def test_chart_axes_cover_their_data_and_the_title_names_the_algorithm(log, tmp_path):
    """The axis of every chart spans its data (the gemma log's reward reaches 0.738: a top tick of
    0.7 drew the line over the title), and a GRPO run is titled GRPO."""
    from doctor import logparse as lp
    from doctor.recipes.report import _nice_ticks

    parsed = lp.parse_file(log)
    for role in ("reward", "validation", "kl", "response_length", "throughput"):
        _, pts = lp.resolve(parsed, role)
        if pts:
            vals = [v for _, v in pts]
            ticks = _nice_ticks(min(vals), max(vals))
            assert ticks[0] <= min(vals) and ticks[-1] >= max(vals), (role, ticks, min(vals), max(vals))
    report_json(log, tmp_path / "o")
    title = re.search(r"<h1>([^<]*)</h1>", (tmp_path / "o" / "report.html").read_text()).group(1)
    assert title == ("verl GRPO run report" if "grpo" in log.name else "verl PPO run report")


def test_legends_sit_below_the_plot_area(tmp_path):
    """The 'Time per stage' legend of a real log is drawn under the x axis, not on the lines."""
    log = next(iter(EXPECTED))
    report_json(log, tmp_path / "o")
    page = (tmp_path / "o" / "report.html").read_text()
    for svg in re.findall(r"<svg[^>]*>.*?</svg>", page, re.S):
        legends = [float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" class="legend"', svg)]
        axis = re.search(r'<line x1="[\d.]+" y1="([\d.]+)" x2="[\d.]+" y2="\1" class="axis"/>', svg)
        if legends and axis:
            assert min(legends) > float(axis.group(1)) + 16, (min(legends), axis.group(1))
    assert re.search(r'class="legend"', page), "no multi-series chart: the test is stale"
