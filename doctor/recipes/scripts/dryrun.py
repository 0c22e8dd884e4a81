# Runs INSIDE the target interpreter (prepended with probes/scripts/_prelude.py, ray_private.py, verl_config.py):
# the trainer's own path on CPU, up to its first call that needs a GPU. Nothing here copies verl:
# the script composes the config as @hydra.main(config_path="config", config_name="ppo_trainer")
# does, then calls verl.trainer.main_ppo.main(config) itself (Hydra's decorator passes a given
# config straight to the function), so every era runs its own code:
#   0.2.x   main -> run_ppo -> ray.init -> main_task.remote(config)    (a Ray task)
#   0.3/0.4 main -> run_ppo -> ray.init -> TaskRunner.remote().run(config)  (a Ray actor)
#   0.9     main -> validate_config -> run_ppo -> ray.init -> TaskRunnerV1.remote().run(config): transfer
#           queue, PPOTrainer(config).init() -> _init_tokenizer, _init_dataloader, then
#           _init_resource_pool_mgr: the placement groups of GPUs (the V1 trainer's first GPU call)
# and inside it copy_to_local / copy_local_path_from_hdfs, hf_tokenizer, the worker classes, the
# reward manager, RLHFDataset, RayPPOTrainer._validate_config and ._create_dataloader, until
# RayPPOTrainer.init_workers(): the first call that needs GPUs (it asks Ray for placement groups
# of trainer.n_gpus_per_node x trainer.nnodes GPUs, then the workers load the model and vLLM).
#
# Only two things are changed, and only for the dry run:
#   - ray.init joins no existing cluster: it starts a private instance (ray_private.py) with the
#     arguments verl passes (runtime_env, num_cpus), plus a worker setup hook;
#   - that hook, in the Ray worker that runs the TaskRunner, wraps verl's step functions to time
#     them and replaces RayPPOTrainer.init_workers with: take the first batch from verl's own train
#     dataloader, score one real row with the reward manager's compute_score, stop.
# Each step writes an event line (JSON) to argv's "events" file, which the doctor reads live.
# argv[1]: JSON {"overrides": [...], "events": path, "stand_in": dir|null, "train_file": path,
#                "stand_in_cache": dir|null,
#                "temp_prefix": str, "deadline_s": float}
import contextlib
import gc
import threading
import time

_req = _json.loads(_sys.argv[1])
EVENTS = _req["events"]
DEADLINE = float(_req.get("deadline_s") or 300)
result = {"verl": None, "entry": None, "steps": [], "stand_in": None, "ray": {}, "next_on_gpu": None,
          "reached_gpu": False, "error": None}
_done = threading.Event()
_lock = threading.Lock()
_tmp = None


def event(step, state, **kw):
    rec = {"step": step, "state": state, "t": time.time(), "pid": _os.getpid()}
    rec.update(kw)
    with open(EVENTS, "a") as fh:
        fh.write(_json.dumps(rec, default=str) + "\n")


def read_events():
    out = []
    try:
        with open(EVENTS) as fh:
            for line in fh:
                try:
                    out.append(_json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def assemble(events, failure):
    """Steps from the event lines: each has a start and an end or a failure. A step that started and
    never ended is the one that was running when the failure came (or it ended when the next one
    started: the "workers" phase has no call of its own to wrap)."""
    steps = {}
    order = []
    for ev in events:
        if ev["state"] in ("stop", "worker"):
            continue
        name = ev["step"]
        if name not in steps:
            steps[name] = {"name": name, "title": ev.get("title") or name, "status": "running", "start": ev["t"],
                           "end": None, "detail": {}, "error": None}
            order.append(name)
        st = steps[name]
        if ev["state"] == "start":
            for other in order[:-1]:
                o = steps[other]
                if o["status"] == "running" and o.get("implicit"):
                    o["status"], o["end"] = "ok", ev["t"]
            st["implicit"] = st.get("implicit") or ev.get("implicit", False)
        elif ev["state"] == "end":
            st["status"], st["end"] = "ok", ev["t"]
            st["detail"].update(ev.get("detail") or {})
        elif ev["state"] == "fail":
            st["status"], st["end"], st["error"] = "failed", ev["t"], ev.get("error")
        elif ev["state"] == "warn":
            st["detail"].update(ev.get("detail") or {})
            st["warning"] = ev.get("message")
    running = [n for n in order if steps[n]["status"] == "running"]
    if failure is not None:
        failed = [n for n in order if steps[n]["status"] == "failed"]
        target = running[-1] if running else (None if failed else (order[-1] if order else None))
        if target is not None:
            steps[target]["status"], steps[target]["error"] = "failed", failure
            steps[target]["end"] = time.time()
        for n in failed:  # the wrapped call's own description is the precise one; keep the outer text too
            steps[n].setdefault("outer", failure)
    for n in running:
        if steps[n]["status"] == "running":
            steps[n]["status"] = "ok" if failure is None else "failed"
            steps[n]["end"] = steps[n]["end"] or time.time()
    out = []
    for n in order:
        st = steps[n]
        st["seconds"] = round((st["end"] or st["start"]) - st["start"], 3)
        del st["start"], st["end"]
        st.pop("implicit", None)
        out.append(st)
    return out


def finish(failure=None):
    with _lock:
        if _done.is_set():
            return
        _done.set()
        result["stand_in"] = reap_stand_in(failure)
        events = read_events()
        result["steps"] = assemble(events, failure if not result["reached_gpu"] else None)
        if failure is not None and not result["steps"] and not result["reached_gpu"]:
            # failed before its first step (no verl in this interpreter, say): the failure is the dry run's error
            msg, kind = str(failure.get("message") or ""), str(failure.get("type") or "")
            result["error"] = msg if not kind or msg.startswith(kind) else "%s: %s" % (kind, msg)
        # Ray workers that ran the setup hook (the TaskRunner's, and any Ray prestarted for the job)
        result["ray"]["workers"] = [{"pid": e["pid"], "setup_s": e["detail"]["setup_s"], "t": e["t"]}
                                    for e in events if e["state"] == "worker"]
        if _tmp is not None:
            if not result["reached_gpu"]:
                result["ray"]["logs"] = ray_log_tails(_tmp, ["raylet.err", "gcs_server.err"], 15)
            result["ray"]["killed_leftovers"], result["ray"]["temp_removed"] = remove_private_ray(_tmp)
        emit_and_exit(result)


def _watchdog():
    if not _done.wait(DEADLINE):
        running = [s for s in assemble(read_events(), None) if s["status"] == "running"]
        finish({"type": "Timeout", "message": "the dry run did not finish within %.0f s" % DEADLINE,
                "text": "", "chain": [], "missing_module": None, "step": running[-1]["name"] if running else None})


def step(name, title, fn, detail=None, implicit=False):
    """A driver-side step: its events, its time, its exception (re-raised)."""
    event(name, "start", title=title, implicit=implicit)
    try:
        value = fn()
    except BaseException as exc:
        event(name, "fail", error=describe_exception(exc))
        raise
    event(name, "end", detail=detail(value) if detail else {})
    return value


# -- the stand-in model ---------------------------------------------------------------------------

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def write_stand_in(path, train_file):
    """A tiny Qwen2 config and a byte-level BPE tokenizer trained on the recipe's own prompts, written
    by the target's transformers/tokenizers: enough for every step before the GPU (no weights: those
    are loaded by the workers on the GPU)."""
    import pyarrow.parquet as pq
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    table = pq.read_table(train_file, columns=["prompt"]).slice(0, 2000).to_pylist()
    texts = [m.get("content", "") for row in table for m in (row.get("prompt") or [])]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=8192, special_tokens=special, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = CHATML
    hf.save_pretrained(path)
    Qwen2Config(vocab_size=len(hf), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                tie_word_embeddings=True, architectures=["Qwen2ForCausalLM"],
                eos_token_id=hf.eos_token_id, pad_token_id=hf.pad_token_id).save_pretrained(path)
    return {"path": path, "vocab": len(hf), "texts": len(texts)}


TRAINER_V1 = False  # set before ray.init: the worker's hook carries it (cloudpickle copies the value)
STAND_IN_TITLE = "a tiny Qwen2 config and tokenizer (the model is not on this machine)"
STAND_IN = {}  # the child writing it: {"pid", "out"}; the Ray worker's hook carries a copy (cloudpickle)


def start_stand_in():
    """Writes the stand-in in a forked child while the driver composes the config, imports the
    trainer and Ray starts the TaskRunner: nothing reads it before TaskRunner.run asks for the
    model's files (the worker waits there, wait_stand_in), so on 2 cores the ~7 s of training a
    tokenizer costs (almost) nothing. The child writes the step's own events, then its outcome to
    `out` ({"ok": bool, "value": ...}, renamed into place once complete)."""
    out = EVENTS + ".stand-in.json"
    pid = _os.fork()
    if pid == 0:  # the child: one step, its outcome in a file, then out without running atexit hooks
        outcome = {"ok": False}
        try:
            # Last in line for the CPU: the driver's import is on the dry run's critical path.
            _os.nice(19)
            outcome = {"ok": True, "value": step("stand-in", STAND_IN_TITLE,
                                                 lambda: cached_stand_in(_req["stand_in"], _req["train_file"],
                                                                         _req.get("stand_in_cache")),
                                                 lambda v: v)}
        except BaseException:  # noqa: BLE001 - its fail event is the fact
            pass
        finally:
            try:
                with open(out + ".part", "w") as fh:
                    _json.dump(outcome, fh)
                _os.rename(out + ".part", out)
            finally:
                _os._exit(0)
    STAND_IN.update(pid=pid, out=out)


STAND_IN_FORMAT = 1  # bump when write_stand_in writes something else


def cached_stand_in(path, train_file, cache_root):
    """The stand-in, built once per target and data file and then copied from the doctor's cache:
    keyed by this interpreter, its transformers and tokenizers, the data file's path, size and mtime."""
    import hashlib
    import importlib.metadata as md
    import shutil

    if not cache_root:
        return write_stand_in(path, train_file)
    st = _os.stat(train_file)
    ident = [STAND_IN_FORMAT, _sys.prefix, md.version("transformers"), md.version("tokenizers"),
             _os.path.abspath(train_file), st.st_size, st.st_mtime_ns]
    cached = _os.path.join(cache_root, hashlib.sha256(_json.dumps(ident).encode()).hexdigest()[:20])
    try:
        with open(_os.path.join(cached, "stand-in.json")) as fh:
            value = _json.load(fh)
        shutil.copytree(cached, path)
        _os.remove(_os.path.join(path, "stand-in.json"))
        value.update(path=path, cached=True)
        return value
    except (OSError, ValueError):
        pass
    value = write_stand_in(path, train_file)
    try:  # into the cache under a temporary name, renamed once complete (two runs may race)
        _os.makedirs(cache_root, exist_ok=True)
        part = cached + ".part-%d" % _os.getpid()
        shutil.copytree(path, part)
        with open(_os.path.join(part, "stand-in.json"), "w") as fh:
            _json.dump({k: v for k, v in value.items() if k != "path"}, fh)
        _os.rename(part, cached)
    except OSError:
        shutil.rmtree(part, ignore_errors=True)
    return value


def read_stand_in(out):
    try:
        with open(out) as fh:
            return _json.load(fh)
    except (OSError, ValueError):
        return None


def wait_stand_in():
    """In the worker, before the model's files are read: the stand-in's outcome (raises if it failed)."""
    if not STAND_IN:
        return
    end = time.time() + DEADLINE
    while time.time() < end:
        outcome = read_stand_in(STAND_IN["out"])
        if outcome is not None:
            if not outcome.get("ok"):
                raise RuntimeError("the stand-in model could not be written (its step says why)")
            return
        time.sleep(0.1)


def reap_stand_in(failure):
    """In the driver at the end: the stand-in's value. The child is waited for even when another step
    failed first, so that its own step reports what it did (it takes seconds); only when the dry run
    ran out of time is it stopped."""
    if not STAND_IN:
        return None
    import signal

    pid = STAND_IN["pid"]
    try:
        if (failure or {}).get("type") == "Timeout":
            _os.kill(pid, signal.SIGKILL)
        _os.waitpid(pid, 0)
    except OSError:
        pass
    outcome = read_stand_in(STAND_IN["out"]) or {}
    return outcome.get("value")


# -- inside the Ray worker that runs the TaskRunner ----------------------------------------------------

def wrap(owner, attr, name, title, detail=None, end=True, before=None):
    """Replace owner.attr by a wrapper that writes the step's events around the real call (after
    `before()`, inside the step)."""
    import functools

    fn = getattr(owner, attr, None)
    if fn is None or getattr(fn, "_vd_wrapped", False):
        return False

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        event(name, "start", title=title)
        try:
            if before is not None:
                before()
            value = fn(*a, **kw)
        except BaseException as exc:
            event(name, "fail", error=describe_exception(exc))
            raise
        if end:
            try:
                d = detail(value, a, kw) if detail else {}
            except Exception as exc:  # the detail is a report, not a step
                d = {"detail_error": repr(exc)}
            event(name, "end", detail=d)
        return value

    wrapper._vd_wrapped = True
    setattr(owner, attr, wrapper)
    return True


@contextlib.contextmanager
def import_without_gc():
    """The trainer's import (torch, tensordict, transformers: ~9 s here, paid by the driver and again by
    the TaskRunner's worker) allocates millions of objects and frees few: the cyclic collector's passes
    during it find nothing and cost ~5-10 % of it. Off while verl's trainer imports, on again after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def worker_setup():
    """Ray's worker_process_setup_hook: runs in each worker of the job before its first task. Only the
    worker that runs the TaskRunner needs verl patched, and it is the one that imports verl's trainer
    (its entry, when Ray ships TaskRunner by reference; the trainer modules TaskRunner.run imports,
    when Ray ships it by value): the patch waits for the first of those imports to finish (with what it
    imports itself). The job's other workers (verl 0.9's transfer queue starts nine) pay nothing."""
    import importlib.abc
    import importlib.util

    watch = ("verl.trainer.main_ppo", "verl.trainer.ppo.ray_trainer", "verl.trainer.ppo.v1")
    if any(m in _sys.modules for m in watch):
        patch_worker()
        return
    depth = [0]

    class AfterTrainerImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in watch:
                return None
            _sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                _sys.meta_path.insert(0, self)
            if spec is None or spec.loader is None:
                return spec
            real_exec = spec.loader.exec_module

            def exec_module(module):
                depth[0] += 1
                try:
                    with import_without_gc() if depth[0] == 1 else contextlib.nullcontext():
                        real_exec(module)
                finally:
                    depth[0] -= 1
                if depth[0] == 0 and self in _sys.meta_path:
                    _sys.meta_path.remove(self)
                    patch_worker()
            spec.loader.exec_module = exec_module
            return spec
    _sys.meta_path.insert(0, AfterTrainerImport())


def patch_worker():
    """In the TaskRunner's worker, right after verl's trainer entry was imported: the step wrappers
    and the stop before the first GPU call."""
    t0 = time.time()
    import verl.utils as vu
    import verl.utils.fs as vfs

    for copy_name in ("copy_to_local", "copy_local_path_from_hdfs"):
        wrap(vfs, copy_name, "model", "the model's files (verl.utils.fs." + copy_name + ")", end=False,
             before=wait_stand_in)

    def tokenizer_detail(tok, a, kw):
        if not TRAINER_V1:  # V0's TaskRunner.run goes on to the worker classes (V1 reads the tokenizer in its setup)
            event("workers", "start", title="the worker classes and the reward manager (TaskRunner.run)", implicit=True)
        return {"class": type(tok).__name__, "vocab": len(tok), "path": a[0] if a else kw.get("name_or_path"),
                "eos": getattr(tok, "eos_token", None), "pad": getattr(tok, "pad_token", None)}
    wrap(vu, "hf_tokenizer", "model", "the model's files and tokenizer", tokenizer_detail, before=wait_stand_in)

    from verl.utils.dataset import rl_dataset

    def dataset_detail(_v, a, kw):
        self = a[0]
        files = kw.get("data_files") or kw.get("parquet_files") or (a[1] if len(a) > 1 else None)
        files = list(files) if isinstance(files, (list, tuple)) or type(files).__name__ == "ListConfig" else [files]
        return {str(f): len(self) for f in files}
    wrap(rl_dataset.RLHFDataset, "__init__", "dataset", "verl's RLHFDataset over the recipe's parquet files",
         dataset_detail)

    setup_v1()
    try:
        from verl.trainer.ppo import ray_trainer as rt
    except ImportError:  # a verl without the V0 trainer
        event("task-runner", "worker", detail={"setup_s": round(time.time() - t0, 3)})
        return

    wrap(rt.RayPPOTrainer, "_validate_config", "validate", "RayPPOTrainer._validate_config (verl's batch and micro-batch checks)")

    def loader_detail(_v, a, kw):
        self = a[0]
        cfg = self.config
        rows = len(self.train_dataset)
        batch = cfg.data.get("gen_batch_size", None) or cfg.data.train_batch_size
        per_epoch = len(self.train_dataloader)
        return {"train_rows": rows, "batch_size": int(batch), "batches_per_epoch": per_epoch,
                "rows_dropped_per_epoch": rows - per_epoch * int(batch), "epochs": int(cfg.trainer.total_epochs),
                "total_training_steps": int(getattr(self, "total_training_steps", 0) or 0),
                "val_rows": len(self.val_dataset) if getattr(self, "val_dataset", None) is not None else None,
                "val_batches": len(self.val_dataloader) if getattr(self, "val_dataloader", None) is not None else None}
    wrap(rt.RayPPOTrainer, "_create_dataloader", "dataloader", "the train dataloader (verl's batch arithmetic: "
         "RayPPOTrainer._create_dataloader, PPOTrainer._init_dataloader)",
         loader_detail)

    def first_batch_then_stop(self, *a, **kw):
        batch = first_batch(self.train_dataloader)
        fn = getattr(self.reward_fn, "compute_score", None)
        reward_on_a_row(fn, self, batch, "the reward manager %s has no compute_score" % type(self.reward_fn).__name__)
        stop_before_gpu(self.config, "RayPPOTrainer.init_workers()")

    rt.RayPPOTrainer.init_workers = first_batch_then_stop
    event("task-runner", "worker", detail={"setup_s": round(time.time() - t0, 3)})


def first_batch(dataloader):
    event("batch", "start", title="the first batch from verl's train dataloader")
    try:
        batch = next(iter(dataloader))
    except BaseException as exc:
        event("batch", "fail", error=describe_exception(exc))
        raise
    shapes = {k: list(v.shape) for k, v in batch.items() if hasattr(v, "shape")}
    event("batch", "end", detail={"keys": sorted(batch), "shapes": shapes})
    return batch


def stop_before_gpu(cfg, call):
    from omegaconf import OmegaConf

    gpus = [int(cfg.trainer.n_gpus_per_node)] * int(cfg.trainer.nnodes)
    rollout = OmegaConf.select(cfg, "actor_rollout_ref.rollout.name", default=None, throw_on_missing=False)
    event("gpu", "stop", detail={"call": call, "resource_pool": gpus, "rollout": str(rollout),
                                 "tp": int(cfg.actor_rollout_ref.rollout.get("tensor_model_parallel_size", 1))})
    raise RuntimeError("verl-doctor dry run: stopped before %s (the first GPU call)" % call)


def setup_v1():
    """The V1 trainer (verl 0.9: TaskRunnerV1 -> PPOTrainer): its steps wrapped in this worker, and its
    first GPU call, _init_resource_pool_mgr (placement groups), replaced by the first batch, a reward
    on a real row and the stop. Nothing where this verl has no V1 trainer."""
    try:
        import transfer_queue as tq
        from verl.trainer.ppo.v1 import trainer_base as tb
    except ImportError:
        return
    wrap(tq, "init", "transfer-queue", "transfer_queue.init (the V1 trainer's data plane, Ray actors)")

    def tokenizer_detail(_v, a, kw):
        tok = a[0].tokenizer
        return {"class": type(tok).__name__, "vocab": len(tok), "eos": getattr(tok, "eos_token", None),
                "pad": getattr(tok, "pad_token", None)}
    wrap(tb.PPOTrainer, "_init_tokenizer", "model", "the model's files and tokenizer", tokenizer_detail,
         before=wait_stand_in)

    def loader_detail(_v, a, kw):
        self = a[0]
        cfg = self.config
        rows = len(self.train_dataset)
        batch = int(cfg.data.get("gen_batch_size", None) or cfg.data.train_batch_size)
        per_epoch = len(self.train_dataloader)
        return {"train_rows": rows, "batch_size": batch, "batches_per_epoch": per_epoch,
                "rows_dropped_per_epoch": rows - per_epoch * batch, "epochs": int(cfg.trainer.total_epochs),
                "total_training_steps": int(getattr(self, "total_training_steps", 0) or 0),
                "val_rows": len(self.val_dataset), "val_batches": len(self.val_dataloader)}
    wrap(tb.PPOTrainer, "_init_dataloader", "dataloader", "the train dataloader (verl's batch arithmetic: "
         "RayPPOTrainer._create_dataloader, PPOTrainer._init_dataloader)", loader_detail)

    def first_batch_then_stop(self, *a, **kw):
        batch = first_batch(self.train_dataloader)
        fn = None
        try:
            from verl.trainer.ppo.reward import get_custom_reward_fn
            fn = get_custom_reward_fn(self.config)
        except ImportError:
            pass
        if fn is None:
            from verl.utils.reward_score import default_compute_score as fn
        reward_on_a_row(fn, self, batch, None)
        stop_before_gpu(self.config, "PPOTrainer._init_resource_pool_mgr()")

    import verl.trainer.ppo.v1  # noqa: F401 - every trainer mode's class, to patch the ones that override

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)
    for cls in [tb.PPOTrainer, *subclasses(tb.PPOTrainer)]:
        if "_init_resource_pool_mgr" in cls.__dict__:
            cls._init_resource_pool_mgr = first_batch_then_stop


def reward_on_a_row(fn, trainer, batch, skipped):
    event("reward", "start", title="the reward function on a real row (compute_score)")
    try:
        if fn is None:
            event("reward", "end", detail={"skipped": skipped})
            return
        if "data_source" in batch and "reward_model" in batch:
            source, truth = batch["data_source"][0], batch["reward_model"][0]["ground_truth"]
        else:
            row = trainer.train_dataset[0]
            source, truth = row["data_source"], row["reward_model"]["ground_truth"]
        right = "#### %s\nThe answer is \\boxed{%s}" % (truth, truth)
        wrong = "#### %s1\nThe answer is \\boxed{%s1}" % (truth, truth)
        scores = []
        for text in (right, wrong):
            try:
                s = fn(data_source=source, solution_str=text, ground_truth=truth, extra_info=None)
            except TypeError:  # eras whose compute_score takes no extra_info
                s = fn(data_source=source, solution_str=text, ground_truth=truth)
            scores.append(s.get("score") if isinstance(s, dict) else s)
        detail = {"data_source": str(source), "ground_truth": str(truth), "function": getattr(fn, "__module__", "") + "." +
                  getattr(fn, "__qualname__", repr(fn)), "right_answer": scores[0], "wrong_answer": scores[1]}
        if not all(isinstance(s, (int, float)) for s in scores):
            raise TypeError("compute_score returned %r, not a number" % (scores,))
        if not scores[0] > scores[1]:
            event("reward", "warn", detail=detail, message="the reward function scores the right answer %s and a wrong "
                  "one %s: it does not tell them apart" % (scores[0], scores[1]))
        event("reward", "end", detail=detail)
    except BaseException as exc:
        event("reward", "fail", error=describe_exception(exc))
        raise


# -- the driver -------------------------------------------------------------------------------------




NICE_HEAD = 4


def _free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def v1_cpus_needed(config):
    """The Ray CPUs verl 0.9's V1 trainer takes before its first GPU call: TaskRunnerV1, the transfer
    queue's controller and its SimpleStorage units (one CPU each); None for the V0 trainer."""
    from omegaconf import OmegaConf

    if not OmegaConf.select(config, "trainer.use_v1", default=False) or "transfer_queue" not in config:
        return None
    backend = OmegaConf.select(config, "transfer_queue.backend.storage_backend", default="SimpleStorage")
    units = OmegaConf.select(config, "transfer_queue.backend.SimpleStorage.num_data_storage_units", default=0)
    return 2 + (int(units or 0) if backend == "SimpleStorage" else 0)


def start_head_early(tmp, num_cpus, asked):
    """Starts the private Ray head with Ray's own `ray start --head` while the driver imports the
    trainer: ray.init spends ~5 s of its ~6 s waiting for the head's processes, and the import is
    the driver's longest step, so they overlap. The head gets the private temp dir (no other
    session's address file or sockets are touched), free ports, no dashboard, the CPU count
    main_ppo will ask for; private_init joins it, or starts a fresh instance as before when it
    cannot (ray start failed, or main_ppo asked for other resources)."""
    import subprocess

    cmd = [_sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()",
           "start", "--head", "--port", str(_free_port()), "--ray-client-server-port", str(_free_port()),
           "--temp-dir", _os.path.join(tmp, "ray"), "--include-dashboard=false", "--disable-usage-stats"]
    if num_cpus is not None:
        cmd += ["--num-cpus", str(num_cpus)]
    log = open(_os.path.join(tmp, "ray-start.log"), "w")
    # One worker started at a time: when main_ppo's driver joins, Ray starts idle workers for the job (one
    # per core), and the TaskRunner takes one of them; the others only import Ray's worker code beside it
    # while it imports verl's trainer (on 2 cores: ~1 s of the dry run). The job's later actors (verl 0.9's
    # transfer queue) still start, one after the other.
    env = dict(_os.environ, RAY_worker_maximum_startup_concurrency="1")
    # Behind the driver's import for the CPU too (Ray's processes inherit it; by the time the TaskRunner's
    # worker starts, the driver only waits).
    return {"proc": subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=lambda: _os.nice(NICE_HEAD), env=env),
            "num_cpus": num_cpus, "asked": asked, "log": log.name}


# ray.init's arguments that it refuses when joining a running cluster: main_ppo asking for any of them
# means a fresh instance, as before.
_START_ONLY = ("num_gpus", "resources", "labels", "object_store_memory", "storage", "_system_config",
               "_enable_object_reconstruction")


def join_head(early, kw, tmp):
    """The address of the early head when main_ppo's ray.init can join it, else None (it is stopped)."""
    if early is None:
        return None
    asked_cpus = kw.get("num_cpus")
    try:
        rc = early["proc"].wait(timeout=60)
    except Exception:  # noqa: BLE001 - a head that does not come up is replaced, not waited for
        early["proc"].kill()
        rc = None
    address = None
    if rc == 0 and asked_cpus == early["asked"] and not any(kw.get(k) for k in _START_ONLY):
        try:
            with open(_os.path.join(tmp, "ray", "ray_current_cluster")) as fh:
                address = fh.read().strip() or None
        except OSError:
            address = None
    if address is None:
        result["ray"]["early_head"] = {"used": False, "exit": rc, "asked_cpus": asked_cpus}
        stop_private_ray(tmp)
    return address



def main():
    global _tmp
    result["verl"], cfg_dir = verl_config_dir()
    overrides = list(_req["overrides"])
    if _req.get("stand_in"):
        start_stand_in()

    config = step("config", "verl's Hydra config (ppo_trainer) with the recipe's overrides",
                  lambda: compose_ppo_trainer(cfg_dir, overrides),
                  lambda c: {"config_dir": cfg_dir, "overrides": len(overrides)})

    early = None
    try:
        from omegaconf import OmegaConf

        # 0.4: ray_init.num_cpus; 0.5+: ray_kwargs.ray_init.num_cpus; 0.2/0.3 pass none
        wants = OmegaConf.select(config, "ray_init.num_cpus", default=None)
        if wants is None:
            wants = OmegaConf.select(config, "ray_kwargs.ray_init.num_cpus", default=None)
        given = wants
        need = v1_cpus_needed(config)
        have = wants if wants is not None else _os.cpu_count()
        if need and have < need:
            # verl 0.9's V1 trainer places one-CPU actors before any GPU work; with fewer Ray CPUs it waits
            # forever. The dry run gives the private instance what the job asks for (logical CPUs: Ray
            # runs them on the cores there are) and says so: a run with these settings here would hang.
            given = need
            result["ray"]["cpus_short"] = {"ray_cpus": have, "needed": need, "storage_units": need - 2,
                                           "cores": _os.cpu_count()}
        _tmp = private_ray_dir(_req.get("temp_prefix") or "/tmp/vd-")
        early = start_head_early(_tmp, given, wants)
    except Exception as exc:  # noqa: BLE001 - the early head is an optimisation: ray.init starts one as before
        result["ray"]["early_head"] = {"used": False, "error": repr(exc)}

    def entry():
        with import_without_gc():
            import verl.trainer.main_ppo as mp
        return mp
    mp = step("entry", "import verl.trainer.main_ppo (the trainer's entry module)", entry)
    # A global of main_ppo that TaskRunner.run calls: the pickled class carries the driver's copy.
    wrap(mp, "load_reward_manager", "reward-manager", "the reward manager (load_reward_manager)",
         lambda v, a, kw: {"class": type(v).__name__})
    result["entry"] = "TaskRunner" if hasattr(mp, "TaskRunner") else ("main_task" if hasattr(mp, "main_task") else "main")
    try:
        use_v1 = bool(config.trainer.get("use_v1"))
    except Exception:
        use_v1 = False
    if hasattr(mp, "TaskRunnerV1") and use_v1:  # verl 0.9's default trainer (setup_v1 follows it in the worker)
        global TRAINER_V1
        TRAINER_V1 = True
        result["entry"] = "TaskRunnerV1"
        # (it builds the model's config from its files: the stand-in must be there)
        wrap(mp, "validate_config", "validate-config", "verl.utils.config.validate_config (main's batch and "
             "micro-batch checks)", before=wait_stand_in)

    import ray

    real_init = ray.init

    def private_init(*a, **kw):
        result["ray"]["asked"] = _json.loads(_json.dumps(
            {"runtime_env": kw.get("runtime_env"), "num_cpus": kw.get("num_cpus"),
             "address": kw.get("address") or (a[0] if a else None)}, default=str))
        env = dict(kw.get("runtime_env") or {})
        env["worker_process_setup_hook"] = worker_setup
        event("ray", "start", title="ray.init with main_ppo's arguments (a private instance)")
        address = join_head(early, kw, _tmp)
        if address is not None:  # joining a cluster takes no resources of its own: the head has them
            for k in ("num_cpus", *_START_ONLY):
                kw.pop(k, None)
            kw.update(address=address, runtime_env=env, log_to_driver=False)
            result["ray"]["early_head"] = {"used": True}
        else:
            kw.update(address="local", runtime_env=env, include_dashboard=False, log_to_driver=False)
            if result["ray"].get("cpus_short"):
                kw["num_cpus"] = result["ray"]["cpus_short"]["needed"]
        try:
            value = real_init(**kw)
        except BaseException as exc:
            event("ray", "fail", error=describe_exception(exc))
            raise
        event("ray", "end", detail={"num_cpus": kw.get("num_cpus"), "runtime_env": kw.get("runtime_env", {}).get("env_vars")})
        event("task-runner", "start", title="the TaskRunner scheduled in the job's runtime env", implicit=True)
        return value

    ray.init = private_init
    if _tmp is None:
        _tmp = private_ray_dir(_req.get("temp_prefix") or "/tmp/vd-")
    try:
        mp.main(config)
    except BaseException:  # noqa: BLE001 - the stop (or the failure) is the fact
        stops = [ev for ev in read_events() if ev["state"] == "stop"]
        if not stops:
            raise
        result["reached_gpu"] = True
        result["next_on_gpu"] = stops[-1].get("detail")
    else:
        raise RuntimeError("verl.trainer.main_ppo.main returned without reaching RayPPOTrainer.init_workers")
    finally:
        try:
            ray.shutdown()
        except BaseException:
            pass


threading.Thread(target=_watchdog, daemon=True).start()
try:
    main()
    finish()
except BaseException as _exc:  # noqa: BLE001 - the failure is the fact
    finish(describe_exception(_exc))
