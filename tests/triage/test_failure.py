"""The failure model (doctor/failure.py): exceptions chained and unwrapped, the root described
by structure, and the failure classes of knowledge/triage.yaml. The texts are real pastes of the
fresh batches (tests/data/corpus/fresh-*), whose threads are cited in their INDEX.yaml."""

from __future__ import annotations

import errno
import signal
import sys

import pytest

from conftest import REPO
from doctor import knowledge
from doctor.signatures import clean_lines, spec
from doctor.triage import triage_text
from doctor.failure import errno_of, model

sys.path.insert(0, str(REPO))
from benchmarks.triage_batch import run_batch  # noqa: E402

FRESH = REPO / "tests" / "data" / "corpus" / "fresh-2026-12-02"


def _model(text: str):
    lines = clean_lines(text, spec())
    return model(lines, list(range(len(lines))))


def test_a_wrapper_is_looked_past_to_the_exception_it_reports():
    text = """ray.exceptions.RayTaskError(KeyError): ray::main_task() (pid=4242, ip=10.0.0.2)
  File "/workspace/TTRL/verl/verl/workers/reward_manager/ttrl.py", line 203, in _compute_eval_reward
    ground_truth = data_item.non_tensor_batch['reward_model']['ground_truth']
KeyError: 'reward_model'
"""
    f = _model(text)
    assert f.root.type == "KeyError" and f.root.owner == "verl"
    assert f.wrappers == ["ray.exceptions.RayTaskError"]


def test_the_specific_exception_of_a_chain_is_the_root_not_the_last_one():
    f = _model((FRESH / "mmsegmentation-1356.log").read_text())
    assert "shared memory" in f.root.message and f.root.type == "RuntimeError"
    assert f.signal == "SIGBUS"


def test_errno_is_read_from_its_number_or_from_its_text_whoever_prints_it():
    assert errno_of("OSError: [Errno 24] Too many open files") == "EMFILE"
    assert errno_of("RuntimeError: Address already in use") == "EADDRINUSE"
    assert errno_of("torch.distributed.DistNetworkError: ... errno: 98 - Address already in use") == "EADDRINUSE"
    assert errno_of("ValueError: bad value") is None


def test_a_list_of_possible_signals_is_not_a_signal():
    ray = ("The actor is dead because its worker process has died. There are some potential root causes. "
           "(1) The process is killed by SIGKILL by OOM killer due to high memory usage. (3) The worker is "
           "crashed unexpectedly due to SIGSEGV or other unexpected errors.")
    assert _model(ray).signal is None
    assert _model("[ERROR] failed (exitcode: -9) local_rank: 1 (pid: 14447) of binary").signal == "SIGKILL"
    assert _model("Fatal error: killed by signal: Bus error").signal == "SIGBUS"


def test_a_logger_prefix_on_every_traceback_line_is_read_through():
    f = _model((FRESH / "vllm-12189.log").read_text())
    assert "Cannot re-initialize CUDA in forked subprocess" in f.root.message


@pytest.mark.parametrize("file,fid,words", [
    ("ray-7169.log", "runtime.too-many-open-files", "ulimit -n"),
    ("megatron-lm-343.log", "runtime.port-in-use", "ss -ltnp"),
    ("nccl-342.log", "system.shm-small", "shm"),
    ("self-rag-83.log", "runtime.host-oom-killed", "dmesg"),
    ("skyreels-v2-105.log", "system.libc-too-old", "GLIBC_2.32"),
    ("ttrl-20.log", "runtime.data-file", "reward_model"),
])
def test_a_failure_class_names_the_cause_with_the_detail_from_the_log(file, fid, words):
    t = triage_text((FRESH / file).read_text(), file)
    f = t.findings[0]
    assert f.id == fid and f.severity == "error", (f.id, f.title)
    assert words in " ".join([f.title, f.fix.summary, *f.fix.commands, *f.evidence])
    assert t.root is not None


def test_an_unknown_cause_is_described_not_dropped():
    t = triage_text((FRESH / "cross-view-transformers-56.log").read_text(), "x.log")
    f = t.findings[0]
    assert f.id == "runtime.unrecognized-failure" and "InvalidGitRepositoryError" in f.title
    assert any("git's code" in e for e in f.evidence), f.evidence
    assert t.root["owner"] == "git" and t.root["type"] == "git.exc.InvalidGitRepositoryError"


def test_the_class_table_names_real_findings_errnos_and_signals():
    ids = {f["id"] for f in knowledge.load("findings")}
    for c in knowledge.load("triage")["failure_classes"]:
        assert c["id"] in ids, c["id"]
        assert all(hasattr(errno, e) for e in c["when"].get("errno", [])), c
        assert all(s in signal.Signals.__members__ for s in c["when"].get("signal", [])), c


def test_the_first_batch_stays_named_and_no_harmless_paste_is_blamed():
    # the batch the failure model learnt from (its first look was 3/30): a regression shows here
    score, _ = run_batch(REPO / "tests" / "data" / "corpus" / "fresh-2026-12-02")
    assert score["named"] >= 27 and score["false_alarms"] == 0 and score["refused"] == 0, score


FRESH_B = REPO / "tests" / "data" / "corpus" / "fresh-2026-12-02b"


def test_a_call_signature_error_names_both_packages_of_the_call():
    t = triage_text((FRESH_B / "trl-3304.log").read_text(), "x.log")
    f = t.findings[0]
    assert f.id == "runtime.api-mismatch" and f.title.startswith("trl calls vllm"), f.title


def test_a_forks_vendored_verl_is_verl_not_the_users_code():
    t = triage_text((FRESH_B / "archer2.0-2.log").read_text(), "x.log")
    assert t.findings[0].id == "runtime.data-file" and "reward_model" in t.findings[0].title
    assert t.root["owner"] == "verl"


def test_quoted_timestamps_and_bracketed_logger_prefixes_are_read_through():
    vllm = triage_text((FRESH_B / "vllm-25837.log").read_text(), "x.log")
    assert vllm.findings[0].id == "gpu.memory-held" and "3.22" in vllm.findings[0].title
    verl = triage_text((FRESH_B / "verl-2968.log").read_text(), "x.log")
    assert verl.findings[0].id == "import.name-missing"


@pytest.mark.parametrize("batch,named,false_alarms", [
    ("fresh-2026-12-02b", 31, 0),   # first look 15/32 (docs/benchmarks.md); learnt to 29/32, then 30/32, 31/32
    ("fresh-2026-12-02c", 27, 1),   # first look 14/33, 1/8 FA (ray-6123, disputed: docs/research/…-02c.md); learnt 26/33
    # 24 since kk-qq: a safetensors MetadataIncompleteBuffer (a cut download) is runtime.lfs-pointer, which two
    # later batches expect (qwen-462, airllm-137); second-me-105 expected checkpoint-load-failed (now half)
    ("fresh-2026-12-02d", 24, 0),   # first look 11/29, 0/9 FA (docs/research/triage-fresh-2026-12-02d.md); learnt 20/29, 23/29
    ("fresh-2026-12-02e", 24, 0),   # first look 5/32, 0/9 FA (docs/research/triage-fresh-2026-12-02e.md); learnt 16, 18, 22, 24/32
    ("fresh-2026-12-03", 22, 0),    # first look 10/32, 0/8 FA (docs/research/triage-fresh-2026-12-03.md); learnt 20/32, 22/32
    ("fresh-2026-12-03g", 11, 0),   # first look 5/21, 0/4 FA (docs/research/triage-fresh-2026-12-03g.md); learnt 10/21, 11/21
    # batches h, i, j: one first look at 8fecf6a, 12/40 (5/11, 3/17, 4/12), 0/11 FA; learnt 8, 14, 7 (29/40), j 8 after k/l
    ("fresh-2026-12-03h", 8, 0),
    ("fresh-2026-12-03i", 15, 0),
    ("fresh-2026-12-03j", 8, 0),
    # batches k, l: one first look at 2e3714c (after h/i/j were learnt), 4/25 (1/12, 3/13), 0/7 FA; learnt 5, 9 (14/25)
    ("fresh-2026-12-03k", 5, 0),
    ("fresh-2026-12-03l", 9, 0),
    # batches m, n, o: one first look at 4e4ddfc (incl. the start-up commit 9f837b0, no verdict changed), 6/24
    # (0/9, 3/5, 3/10), 1/10 FA (n: a Ray warning of a run that finished); learnt 6, 5, 7 (18/24), 0 FA
    ("fresh-2026-12-03m", 6, 0),
    ("fresh-2026-12-03n", 5, 0),
    ("fresh-2026-12-03o", 7, 0),
    # batches p, q: one first look at fe7543c (after m/n/o and the release table were learnt), 2/16 (2/10, 0/6),
    # 0/4 FA; learnt 7, 5 (12/16); d 24/29 and e 23/32 with them
    ("fresh-2026-12-03p", 7, 0),
    ("fresh-2026-12-03q", 5, 0),
    # batches r, s: one first look at ee8174a (after p/q were learnt), 1/16 (1/7, 0/9), 0/2 FA; learnt 3, 7 (10/16)
    ("fresh-2026-12-03r", 3, 0),
    ("fresh-2026-12-03s", 7, 0),
    # batches t, u, v: one first look (t, u at 0703f21; v at b3101ea, nothing learnt in between),
    # 7/21 (3/10, 2/4, 2/7), 0/5 FA; w, x at 3ab1d64, after d237115 learnt from t/u/v: 5/14 (2/5, 3/9), 0/5 FA.
    # Today's five together: 12/35 (34 %), 0/10 FA. Learnt: 6, 3, 5, 3, 6 (23/35); v 6 with the API history
    ("fresh-2026-12-03t", 6, 0),
    ("fresh-2026-12-03u", 3, 0),
    ("fresh-2026-12-03v", 6, 0),   # 6 with the API history (bitsandbytes-1450)
    ("fresh-2026-12-03w", 3, 0),
    ("fresh-2026-12-03x", 6, 0),
    # batches y, z, aa: one first look at a7322f6 (after t-x were learnt and the API history was added), 7/28
    # (3/11, 1/9, 3/8), 0/11 FA; learnt 7, 3, 7 (17/28)
    ("fresh-2026-12-03y", 7, 0),
    ("fresh-2026-12-03z", 3, 0),
    ("fresh-2026-12-03aa", 7, 0),
    # batches bb, cc: one first look at 8e7477c (after y/z/aa were learnt), 6/8 (5/5, 1/3), 0/1 FA; learnt 5, 3
    ("fresh-2026-12-03bb", 5, 0),
    ("fresh-2026-12-03cc", 3, 0),
    # batches dd-jj (79 collected in one round, 72 failures + 25 harmless): first look at c6a8a7f 13/72
    # (2, 2, 2, 1, 4, 1, 1), 0/25 FA; 18/72 at 9d93255 with classes written from the libraries' messages
    # before any paste was read; learnt 5, 10, 8, 9, 8, 5, 11 (56/72); ff 9 with kk-xx's lessons (57/72)
    ("fresh-2026-12-03dd", 5, 0),
    ("fresh-2026-12-03ee", 10, 0),
    ("fresh-2026-12-03ff", 9, 0),
    ("fresh-2026-12-03gg", 9, 0),
    ("fresh-2026-12-03hh", 8, 0),
    ("fresh-2026-12-03ii", 5, 0),
    ("fresh-2026-12-03jj", 11, 0),
    # batches kk-qq (one round collected after dd-jj were learnt, 62 failures + 17 harmless): first look at
    # 17311f4 17/62 (4, 0, 2, 3, 2, 2, 4), 0/17 FA; learnt 7, 3, 5, 7, 7, 7, 10 (46/62)
    ("fresh-2026-12-03kk", 7, 0),
    ("fresh-2026-12-03ll", 3, 0),
    ("fresh-2026-12-03mm", 5, 0),
    ("fresh-2026-12-03nn", 7, 0),
    ("fresh-2026-12-03oo", 7, 0),
    ("fresh-2026-12-03pp", 7, 0),
    ("fresh-2026-12-03qq", 10, 0),
    # batches rr-xx (one round collected after kk-qq were learnt, 93 failures + 19 harmless): first look at
    # 2886386 (a48aa41's doctor) 19/93 (3, 1, 3, 4, 4, 3, 1), 0/19 FA; 21/93 at a81d919 with classes written from
    # the libraries' messages before any paste was read; learnt 10, 8, 10, 7, 5, 7, 3 (50/93)
    ("fresh-2026-12-03rr", 10, 0),
    ("fresh-2026-12-03ss", 8, 0),
    ("fresh-2026-12-03tt", 10, 0),
    ("fresh-2026-12-03uu", 7, 0),
    ("fresh-2026-12-03vv", 5, 0),
    ("fresh-2026-12-03ww", 7, 0),
    ("fresh-2026-12-03xx", 3, 0),
    # batches yy, zz, ab (from merged fix PRs' descriptions): first look with 75bf671's doctor 5/40 (1, 2, 2),
    # 0/11 FA; not learnt from (the session ended): the floors are the first look
    ("fresh-2026-12-03yy", 1, 0),
    ("fresh-2026-12-03zz", 2, 0),
    ("fresh-2026-12-03ab", 2, 0),
])
def test_each_fresh_batch_stays_named_after_learning_and_no_harmless_paste_is_blamed(batch, named, false_alarms):
    score, _ = run_batch(REPO / "tests" / "data" / "corpus" / batch)
    assert score["named"] >= named and score["false_alarms"] <= false_alarms and score["refused_total"] == 0, score


def test_a_quote_wrapped_over_lines_is_one_message():
    from doctor.triage import _join_open_spans

    assert _join_open_spans(["ERROR", "`flash.so: undefined", " symbol: _ZN3c10`", "next"]) == \
        ["ERROR", "`flash.so: undefined symbol: _ZN3c10`", "next"]
    assert _join_open_spans(['a " b', "", "c"]) == ['a " b', "", "c"]   # never across a paragraph


# -- the structures batch d taught, each on a log written here (not the batch's own pastes) -----------

def _first(text: str):
    t = triage_text(text, "x.log")
    return t, t.findings[0]


def test_a_librarys_concrete_advice_is_quoted_when_nothing_else_knows_the_cause():
    t, f = _first("Traceback (most recent call last):\n  File \"/x/site-packages/foo/core.py\", line 3, in go\n"
                  "RuntimeError: the cache is stale. Please set `FOO_CACHE_DIR` to a writable directory.\n")
    assert f.id == "runtime.library-advice" and "FOO_CACHE_DIR" in f.fix.summary
    # a debugging hint is not advice; neither is advice that names nothing concrete
    _, g = _first("Traceback (most recent call last):\n  File \"/x/site-packages/foo/core.py\", line 3, in go\n"
                  "RuntimeError: it broke. For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n")
    _, h = _first("Traceback (most recent call last):\n  File \"/x/site-packages/foo/core.py\", line 3, in go\n"
                  "ValueError: bad modules. Please check the modules and try again.\n")
    assert g.id == h.id == "runtime.unrecognized-failure"


def test_a_log_that_ends_in_the_same_retry_line_is_a_run_waiting_for_a_server():
    retry = "2026-01-02 10:00:0{} INFO client - Server is not up yet. Retrying in 2.0 seconds...\n"
    t, f = _first("".join(retry.format(i) for i in range(4)) + "\nwhat do I do?\n")
    assert t.failed and f.id == "runtime.waiting-for-service"
    # the wait ended: a later log line means the server came up
    t2 = triage_text("".join(retry.format(i) for i in range(4)) + "2026-01-02 10:00:09 INFO client - connected\n", "x")
    assert not t2.failed


def test_a_placeholder_a_path_list_and_an_unquoted_override_are_named():
    _, f = _first("wandb: ERROR Error while calling W&B API: project your_project not found (<Response [404]>)\n"
                  "Error executing job with overrides: []\n")
    assert f.id == "setting.placeholder" and "your_project" in f.title
    _, g = _first("error: command '/opt/cuda-12.1:/usr/local/cuda/bin/nvcc' failed with exit status 1\n")
    assert g.id == "setting.path-list" and "export CUDA_HOME=/opt/cuda-12.1" in g.fix.commands
    _, h = _first("LexerNoViableAltException: trainer.experiment_name=my run\n"
                  "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details\n")
    assert h.id == "config.override-syntax"


def test_a_cut_frame_and_an_ipython_header_still_give_a_root_and_its_owner():
    t, f = _first('verl/utils/dataset/rl_dataset.py", line 227, in _build_messages\n'
                  "    prompt = example[self.prompt_key]\nKeyError: 'question\n")
    assert f.id == "runtime.data-file" and t.root["owner"] == "verl"
    t2, _ = _first("OSError                                   Traceback (most recent call last)\n"
                   "File ~/src/mylib/run.py:12, in main()\n     11 if n > 1:\n---> 12     ray.init(num_cpus=n)\n")
    assert t2.failed and t2.root["type"] == "OSError"


@pytest.mark.parametrize("line,fid,words", [
    # the modern stack's classes (decisive lines of the threads in docs: vllm#14189, vllm#31700, sglang#5247)
    ("AssertionError: Expandable segments are not compatible with memory pool.", "setting.allocator-sleep-mode",
     "free_cache_engine=False"),
    ("torch.AcceleratorError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
     "gpu.driver-too-old", "driver"),
    ("ImportError: /v/lib/python3.12/site-packages/sgl_kernel/common_ops.abi3.so: undefined symbol: "
     "_ZN5torch3jit17parseSchemaOrNameERKSsb", "extension.abi-mismatch", "sgl_kernel"),
    ("ray.exceptions.AuthenticationError: Authentication failed: Forbidden: Invalid authentication token. Token "
     "authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out.",
     "runtime.library-advice", "RAY_AUTH_MODE=disabled"),
])
def test_the_modern_stacks_failure_classes_are_named(line, fid, words):
    _, f = _first(line + "\n")
    assert f.id == fid, (f.id, f.title)
    assert words in " ".join([f.title, f.fix.summary, *f.fix.commands])


# -- the structures batch e taught, each on a log written here -----------------------------------------

@pytest.mark.parametrize("text", [
    "# ArrowInvalid: JSON parse error: Column(/labels) changed from object to array in row 3\n",
    "the load fails:\n```\n<class 'pyarrow.lib.ArrowInvalid'>: JSON parse error: Column() changed from object to array in row 0\n```\n",
])
def test_an_issue_title_or_a_class_repr_is_a_failure_with_its_class(text):
    t, f = _first(text)
    assert t.failed and f.id == "runtime.data-format", (t.status, f.id)


def test_gate_reads_module_named_types_logger_errors_compiler_and_nccl_failures():
    for text, fid in [
        ("I got `aiohttp.web_exceptions.HTTPRequestEntityTooLarge: Request Entity Too Large` on ray job submit\n",
         "runtime.ray-upload-too-large"),
        ("swanlab: ERROR api_key not configured (no-tty). call swanlab.login()\n", "runtime.logger-login"),
        ("/opt/x/csrc/kernel.cu:3:10: fatal error: cuda_fp16.h: No such file or directory\ncompilation terminated.\n",
         "build.cuda-headers"),
        ("NCCL failure init.cc:11 'unhandled system error'\nhost:1:1 [0] NCCL INFO Bootstrap : no socket interface found\n",
         "runtime.nccl-no-interface"),
    ]:
        t, f = _first(text)
        assert t.failed and f.id == fid, (text, t.status, f.id)


def test_a_build_that_cannot_see_torch_is_build_isolation_not_a_missing_module():
    _, f = _first("  × Failed to build `apex==0.1`\n  ├─▶ The build backend returned an error\n"
                  "      ModuleNotFoundError: No module named 'torch'\n")
    assert f.id == "build.isolation" and "--no-build-isolation" in f.fix.summary
    _, g = _first("Traceback (most recent call last):\n  File \"/w/train.py\", line 1, in <module>\n"
                  "ModuleNotFoundError: No module named 'torch'\n")
    assert g.id == "runtime.module-missing"


def test_a_ray_job_waiting_for_resources_at_the_end_of_its_log_is_named():
    t, f = _first("(autoscaler +1m2s) Warning: The following resource request cannot be scheduled right now: "
                  "{'GPU': 8.0}. This is likely due to all cluster resources being claimed by actors.\n")
    assert t.failed and f.id == "runtime.ray-resources-pending" and "'GPU': 8.0" in f.title
    t2 = triage_text("(autoscaler +1m2s) Warning: The following resource request cannot be scheduled right now: "
                     "{'GPU': 8.0}.\n(TaskRunner pid=1) step:1 - loss:0.3\n", "x")
    assert not t2.failed   # it got its resources: training went on


def test_a_call_signature_error_says_both_directions_with_the_argument():
    _, f = _first("Traceback (most recent call last):\n  File \"/v/site-packages/trl/trainer/grpo.py\", line 9, in "
                  "__init__\n    super().__init__(processing_class=p)\n  File \"/v/site-packages/transformers/trainer.py\""
                  ", line 3, in __init__\nTypeError: Trainer.__init__() got an unexpected keyword argument "
                  "'processing_class'\n")
    assert f.id == "runtime.api-mismatch"
    assert "upgrade transformers to a release that accepts processing_class" in f.fix.summary, f.fix.summary
    assert "{" not in f.fix.summary


# -- the structures batch f taught, each on a log written here (not the batch's own pastes) -----------

def test_an_issue_title_is_the_failure_when_the_body_is_prose():
    t = triage_text("# Trainer crashes: CUDA error: an illegal memory access was encountered\n\n"
                    "### System Info\n\n8 GPUs\n\n### Reproduction\n\nIt happens at step 40.\n", "x.log")
    assert t.status == "failed" and t.findings[0].id == "runtime.illegal-memory-access"
    # a title without a failure word, and the same words below the first line, say nothing
    assert triage_text("# How do I set the learning rate?\n\nI get no error, the run works.\n", "x.log").status != "failed"
    assert triage_text("Some notes\n# error handling is documented here\n", "x.log").status != "failed"


def test_a_c_assert_and_a_cli_usage_error_are_failures():
    t = triage_text("python3: /src/lib/Pass.cpp:12: void f(): Assertion `x > 0' failed.\nAborted (core dumped)\n", "x.log")
    assert t.status == "failed"
    t, f = _first("usage: mytool [-h] {train,eval}\nmytool: error: argument command: invalid choice: 'serve' (choose from 'train', 'eval')\n")
    assert f.id == "runtime.api-mismatch" and "'serve'" in f.fix.summary and "upgrade mytool" in f.fix.summary


def test_a_failing_import_names_the_package_that_ran_it():
    _, f = _first("Traceback (most recent call last):\n"
                  '  File "/env/lib/python3.11/site-packages/somelib/core.py", line 9, in <module>\n'
                  "    from otherlib import NewThing\n"
                  "ImportError: cannot import name 'NewThing' from 'otherlib' (/env/lib/python3.11/site-packages/otherlib/__init__.py)\n")
    assert f.id == "import.name-missing" and f.fix.summary.startswith("somelib and the installed otherlib")


def test_build_loader_metadata_and_data_key_classes():
    _, f = _first("RuntimeError: Failed to find C compiler. Please specify via CC environment variable.\n")
    assert f.id == "build.compiler-missing" and "build-essential" in f.fix.summary
    _, f = _first("Traceback (most recent call last):\n  File \"/env/site-packages/kern/__init__.py\", line 3, in <module>\n"
                  "ImportError: [kern] Could not load any fused_ops library!\n")
    assert f.id == "extension.abi-mismatch" and f.title.startswith("kern was built against another torch")
    _, f = _first("importlib.metadata.PackageNotFoundError: oldname\n")
    assert f.id == "runtime.dist-not-found" and "oldname" in f.title
    _, f = _first("I run the recipe on my data and get\n\nKeyError: 'ground_truth'\n")
    assert f.id == "runtime.data-file"
    _, f = _first("Traceback (most recent call last):\n  File \"/home/me/my_reward.py\", line 3, in score\nKeyError: 'ground_truth'\n")
    assert f.id != "runtime.data-file"  # your own code's KeyError: not the data file's
    _, f = _first("ValueError: guided_decoding_backend is not supported by the V1 Engine.\n")
    assert f.id == "runtime.api-mismatch" and "VLLM_USE_V1=0" in f.fix.summary


# -- the structures batch g taught -------------------------------------------------------------------

def test_an_oserror_subclass_stands_for_its_errno_when_the_paste_cut_it():
    # PermissionError without "[Errno 13]" (an IPython header, the rest cut): EACCES, in Ray's code
    _, f = _first("PermissionError                           Traceback (most recent call last)\n"
                  "/env/lib/python3.11/site-packages/ray/_private/node.py in __init__(self)\n"
                  "PermissionError: cannot create the session\n")
    assert f.id == "runtime.permission-denied" and "/tmp/ray" in f.title


def test_an_elided_frame_is_its_packages_and_a_missing_attribute_there_is_an_api_mismatch():
    _, f = _first('Traceback (most recent call last):\n  File ".../somebridge/core/util.py", line 8, in build\n'
                  "    if t == Kind.old_member:\nAttributeError: type object 'Kind' has no attribute 'old_member'\n")
    assert f.id == "runtime.api-mismatch" and f.title.startswith("somebridge calls") and "pin" in f.fix.summary


def test_a_title_naming_an_oom_and_an_errno_quoted_mid_line_are_failures():
    _, f = _first("# cuda out of memory when serving a 70B model on 8 GPUs\n\nThe server shuts down after a minute.\n")
    assert f.id == "runtime.cuda-oom" and "gpu_memory_utilization" in f.fix.summary
    t = triage_text("| dir | outcome |\n|---|---|\n| /fsx | **failed** with `[Errno 28] No space left on device` |\n", "x.log")
    assert t.status == "failed" and t.findings[0].id in ("runtime.disk-full", "runtime.checkpoint-write-failed")


# -- the structures the older batches' misses taught on 2026-12-03 (before batches h/i were scored) --------

def test_batch_arithmetic_is_named_with_the_numbers_of_the_log():
    _, f = _first("ValueError: The global train batch size (3 x 2) must be evenly divisible by the number of "
                  "generations per prompt (4). Given the current train batch size, the valid values are: [2, 3, 6].\n")
    assert f.id == "config.generation-batch" and "(3 × 2 now)" in f.fix.summary and "(4 now)" in f.fix.summary
    _, f = _first("AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu "
                  "* gradient_acc_step * world_size 100 != 4 * 8 * 3\n")
    # 4 × 8 × 3 = 96; a train batch for 3 GPUs is a multiple of 4 × 3 = 12
    assert f.id == "config.batch-arithmetic" and "= 96 here, not 100" in f.fix.summary and "(= 12)" in f.fix.summary
    _, f = _first("AssertionError: real_train_batch_size (30) must be divisible by minimal possible batch size (8)\n")
    assert f.id == "config.batch-arithmetic"


def test_a_checks_message_is_a_rejected_setting_naming_its_values():
    _, f = _first("Traceback (most recent call last):\n  File \"/env/site-packages/somelib/config.py\", line 3, in check\n"
                  "ValueError: rollout_batch_size must not be larger than max_num_seqs\n")
    assert f.id == "config.setting-rejected" and f.title.startswith("somelib rejected")
    assert "rollout_batch_size, max_num_seqs" in f.fix.summary
    # a crash is no check: no rule in the message
    _, f = _first("ValueError: something odd happened in the loader\n")
    assert f.id != "config.setting-rejected"


def test_a_prompt_over_the_engines_limit_is_a_long_prompt_in_any_wording():
    _, f = _first("ValueError: Prompt length exceeds model's maximum token limit (2048)\n")
    assert f.id == "runtime.prompt-too-long" and "2048" in f.title and "max_model_len" in f.fix.summary


def test_code_quoted_in_prose_raises_nothing_and_a_named_file_is_the_importer():
    t = triage_text("I get an Importerror (can not import Foo from vllm.sequence) in verl/workers/rollout/x.py\n\n"
                    "`try:\n    from vllm.a import B\nexcept  ModuleNotFoundError:\n    # a comment\n    pass`\n", "x.log")
    f = t.findings[0]
    assert f.id == "import.name-missing" and f.fix.summary.startswith("verl and the installed vllm ")


# -- the structures batches h to l taught (first looks 12/40, 4/25), each on a log written here ----------

def test_model_and_tokenizer_support_floors_name_the_release_to_upgrade_to():
    _, f = _first("ValueError: Tokenizer class Qwen2Tokenizer does not exist or is not currently imported.\n")
    assert f.id == "runtime.tokenizer-class-unknown" and "transformers 4.37.0 or later" in f.fix.summary
    _, f = _first("ValueError: The checkpoint you are trying to load has model type `qwen3` but Transformers does not "
                  "recognize this architecture.\n")
    assert f.id == "runtime.model-type-unknown" and "Qwen3 (qwen3) needs transformers 4.51.0" in f.fix.summary
    # a family named beside an engine release that predates it: the weak answer gives way
    t = triage_text("INFO vLLM version 0.8.4\nloading Qwen/Qwen3-30B-A3B (Qwen3MoeForCausalLM)\n"
                    "AttributeError: 'Parameter' object has no attribute 'weight_loader'\n", "x.log")
    f = t.findings[0]
    assert f.id == "runtime.model-too-new" and f.title == "Qwen3-MoE needs vllm 0.8.5 or later; the log shows vllm 0.8.4"
    t = triage_text("INFO vLLM version 0.9.1\nloading Qwen/Qwen3-30B-A3B (Qwen3MoeForCausalLM)\n"
                    "AttributeError: 'Parameter' object has no attribute 'weight_loader'\n", "x.log")
    assert t.findings[0].id != "runtime.model-too-new"   # a release that runs it: not the cause


_CLASS_CASES = [
    # batches h, i, j
    ("RuntimeError: Dataset scripts are no longer supported, but found piqa.py\n", "runtime.dataset-script", "datasets<4"),
    ("torch.distributed.DistBackendError: NCCL error: invalid usage\n"
     "Duplicate GPU detected : rank 1 and rank 3 both on CUDA device 41000\n", "runtime.nccl-duplicate-gpu", "LOCAL_RANK"),
    ('Traceback (most recent call last):\n  File "/env/site-packages/kern/jit.py", line 3, in ver\n'
     "FileNotFoundError: [Errno 2] No such file or directory: 'nvcc'\n", "build.nvcc-missing", "kern runs nvcc"),
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n",
     "extension.cuda-major-mismatch", "CUDA 12"),
    ("ValueError: When connecting to an existing cluster, num_cpus and num_gpus must not be provided.\n",
     "ray.attach-with-resources", "num_cpus"),
    ("ValueError: Asking to pad but the tokenizer does not have a padding token.\n", "runtime.tokenizer-no-pad", "eos_token"),
    ('Traceback (most recent call last):\n  File "/app/run.py", line 9, in load\n'
     "Exception: Error while deserializing header: HeaderTooLarge\n", "runtime.checkpoint-load-failed", "git lfs pull"),
    ("ValueError: The configured object store size (9.0 GB) exceeds the capacity of /dev/shm (1.0 GB).\n",
     "system.shm-small", "shared memory"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx(…, CUDA_R_16BF, …)`\n",
     "gpu.bf16-unsupported", "bfloat16"),
    ("Exception: data did not match any variant of untagged enum ModelWrapper at line 1 column 99\n",
     "runtime.tokenizer-file-newer", "Upgrade tokenizers"),
    ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 9, Hardware "
     "limitation: 8. Reducing block sizes or `num_stages` may help.\n", "gpu.kernel-out-of-resources", "num_stages"),
    # batches k, l
    ("# [BUG] FooTrainer doesn't support bar-engine 2.4\n\nThe examples fail after pip install.\n",
     "runtime.release-unsupported", "FooTrainer does not support bar-engine 2.4"),
    ("ImportError: /env/lib/python3.10/site-packages/fancy_kernels_extensions.cpython-310-x86_64-linux-gnu.so: "
     "undefined symbol: _ZN5torch3jit17parseSchemaOrNameERKSs\n", "extension.abi-mismatch", "fancy_kernels"),
    ("AttributeError: /env/site-packages/bitsandbytes/libbitsandbytes_cpu.so: undefined symbol: cquantize\n",
     "runtime.bitsandbytes-no-cuda", "Upgrade bitsandbytes"),
    ("ImportError: This modeling file requires the following packages that were not found in your "
     "environment: einops. Run `pip install einops`\n", "runtime.module-missing", "einops"),
    ('Traceback (most recent call last):\n  File "/repo/finetune.py", line 38\n'
     "SyntaxError: unterminated string literal (detected at line 38)\n", "runtime.code-syntax-error", "git pull"),
    ('Traceback (most recent call last):\n  File "/home/u/.cache/huggingface/modules/transformers_modules/m/'
     "tokenization_x.py\", line 5, in _pad\nTypeError: XTokenizer._pad() got an unexpected keyword argument "
     "'padding_side'\n", "runtime.remote-code-mismatch", "Pin transformers"),
    ("AttributeError: module 'torchtune.models.llama9' has no attribute 'lora_llama9_70b'\n", "import.name-missing", "--pre"),
    # batches m, n, o
    ('Traceback (most recent call last):\n  File "/w/train.py", line 9, in <module>\n    tok = load()\n'
     '  File "/env/site-packages/tokkit/auto.py", line 40, in load\n    return _build(cfg)\n'
     '  File "/env/site-packages/tokkit/base.py", line 88, in _build\n    if cfg.kind == "x":\n'
     "AttributeError: 'dict' object has no attribute 'kind'\ntokkit version: 3.2.0\n", "runtime.library-bug", "tokkit<"),
    ("error: Distribution `jinja2==3.1.4 @ registry+https://download.pytorch.org/whl/cu121` can't be installed "
     "because it doesn't have a source distribution or wheel for the current platform\n",
     "install.package-from-wrong-index", "unsafe-best-match"),
    ("$ uv pip install torch==1.13.1+cu117 --extra-index-url https://download.pytorch.org/whl/torch_stable.html\n"
     "  × No solution found when resolving dependencies:\n  ╰─▶ Because there is no version of torch==1.13.1+cu117 "
     "and you require torch==1.13.1+cu117, we can conclude that your requirements are unsatisfiable.\n",
     "install.find-links-as-index", "--find-links"),
    ('Traceback (most recent call last):\n  File "/w/data.py", line 5, in row\n    msgs = json.loads(r["prompt"])\n'
     "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n", "runtime.json-decode", "json.dumps"),
    ("RuntimeError: Worker failed with error 'language_model.lm_head.weight', please check the stack trace above\n"
     "KeyError: 'model.vision_tower.blocks.0.attn.qkv.weight'\n", "runtime.weight-names-mismatch", "transformers"),
    ("RuntimeError: fused_adam requested, but apex is not installed. Please install apex from source\n",
     "runtime.module-missing", "apex"),
    ("ModuleNotFoundError: No module named 'megatron.legacy'\n", "runtime.module-missing", "Megatron-LM source checkout"),
    ("ModuleNotFoundError: No module named 'transformers.models.gemma2'\n", "runtime.model-too-new", "4.42"),
    ("Loading Llama-3 fails - PyDecoderWrapper\n\nFile ~/env/lib/python3.11/site-packages/transformers/models/auto/"
     "tokenization_auto.py:814, in AutoTokenizer.from_pretrained(cls, name)\n"
     "--> 814     return tokenizer_class.from_pretrained(name)\n", "runtime.tokenizer-file-newer", "tokenizers"),
    # batches p, q
    ("RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported by the triton GPU compiler, which is "
     "used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA "
     "capability 6.0\n", "gpu.triton-unsupported-arch", "TORCHDYNAMO_DISABLE=1"),
    ("RuntimeError: Distributed package doesn't have NCCL built in\n", "runtime.torch-without-nccl", "WSL2"),
    ("ValueError: DeepSpeed Zero-3 is not compatible with `low_cpu_mem_usage=True` or with passing a `device_map`.\n",
     "config.zero3-device-map", "ZeRO-2"),
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for EngineArgs\nmax_num_seqs\n"
     "  Input should be a valid integer, got a number with a fractional part [type=int_from_float, input_value=8.5, "
     "input_type=float]\n", "config.setting-rejected", "max_num_seqs"),
    ("[Bug]: KeyError: 'model.layers.0.self_attn.qkv_proj.qzeros'\n", "runtime.weight-names-mismatch", "--quantization"),
    ("[Bug] CUDA runtime error: out of memory when serving with lmdeploy\n", "runtime.cuda-oom", "cache_max_entry_count"),
    ("[Bug]: ImportError: /env/lib/python3.10/site-packages/fancy/_ops.so: undefined symbol: _ZN3c104cuda9SetDeviceEi\n",
     "extension.abi-mismatch", "fancy"),
    ('I am getting the following error:\n"Cannot process new request: Prompt length (9000) exceeds maximum sequence '
     'length (4096)"\n',
     "runtime.prompt-too-long", "--max_input_len"),
    ("[Usage]: Unable to use default template when serving llava-next\n", "runtime.chat-template-missing", "chat"),
    # batches r, s
    ("docker: Error response from daemon: OCI runtime create failed: nvidia-container-cli: initialization error: nvml "
     "error: driver/library version mismatch: unknown.\n", "gpu.libcuda-userspace-mismatch", "Reboot"),
    ("node-2:811:840 [0] NCCL INFO misc/socket.cc:484 -> 2\nnode-2:811:840 [0] NCCL INFO bootstrap.cc:77 -> 2\n",
     "runtime.nccl-network", "NCCL_SOCKET_IFNAME"),
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.18.1\n",
     "runtime.nccl-error", "NCCL_SOCKET_IFNAME"),
    ("KeyError: 'Column input_ids not in the dataset. Current columns in the dataset: []'\n", "runtime.dataset-empty",
     "format"),
    ("HIP error: invalid device function\nFile: hip_vector.cpp; line: 845\n", "gpu.rocm-arch-unsupported",
     "HSA_OVERRIDE_GFX_VERSION"),
    ("RuntimeError: MPS backend out of memory (MPS allocated: 9.02 GB, other allocations: 1.2 GB, max allowed: "
     "9.47 GB).\n", "runtime.cuda-oom", "micro-batch"),
    ("triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n"
     "ptxas fatal   : Value 'sm_110a' is not defined for option 'gpu-name'\n", "gpu.ptxas-too-old", "TRITON_PTXAS_PATH"),
]


@pytest.mark.parametrize("text,fid,words", _CLASS_CASES)
def test_classes_learnt_from_batches_h_to_s_name_the_cause_with_its_detail(text, fid, words):
    _, f = _first(text)
    assert f.id == fid and words in " ".join([f.title, f.fix.summary, *f.fix.commands]), (f.id, f.title)


def test_a_persons_statement_before_a_quoted_message_is_a_failure_in_prose():
    t = triage_text("# site down\n\nI have this error. 'We couldn't connect to 'https://huggingface.co' to load this "
                    "file, couldn't find it in the cached files'\n", "x.log")
    assert t.failed and t.findings[0].id == "runtime.hf-unreachable"


def test_a_library_class_a_message_names_is_the_callee_of_the_mismatch():
    _, f = _first("TypeError: LoraConfig.__init__() got an unexpected keyword argument 'new_field'\n")
    assert f.id == "runtime.api-mismatch" and "peft" in f.title
    _, f = _first("AttributeError: 'MyGRPOTrainer' object has no attribute 'num_iterations'\n")
    assert f.id == "runtime.api-mismatch" and "trl" in f.title and "pin trl" in f.fix.summary
    # another library's object (sympy's GreaterThan) is no API mismatch of the stack
    _, f = _first("AttributeError: 'GreaterThan' object has no attribute '_unsorted_args'\n")
    assert f.id != "runtime.api-mismatch"



def test_a_model_module_missing_under_a_new_enough_transformers_is_not_blamed_on_its_age():
    _, f = _first("transformers==4.44.0\nModuleNotFoundError: No module named 'transformers.models.qwen2'\n")
    assert f.id != "runtime.model-too-new", f.title


def test_a_symptom_logged_at_warning_level_alone_is_not_a_failure():
    # Ray logs a dead worker at WARNING while it retries the task (the run went on and finished)
    line = ("2023-06-07 15:26:09,573 WARNING worker.py:1986 -- A worker died or was killed while executing a task "
            "by an unexpected system error. Worker exit type: SYSTEM_ERROR\n")
    assert not triage_text(line * 2, "x.log").failed
    assert triage_text(line.replace(" WARNING ", " ERROR ") * 2, "x.log").failed
