# ruff: noqa: E501  (thread quotes and changes are kept verbatim on one line)
"""Builds a fresh batch of real broken envs for a first-look measurement (benchmarks/env_batch/CASES.yaml).

Every case is ONE change to a copy of the verified working set:
    uv venv -p python3.11 ROOT/NAME
    uv pip sync --require-hashes lockfiles/verl041-vllm063post1-py3.11.txt   (UV_EXCLUDE_NEWER, shared uv cache)
then the change: a uv pip operation (pin-over / upgrade / uninstall / extra-dist) or a setting (environment
variables applied when running python; files a setting points at are created under the env dir).

Each probe runs in its own process, sequentially, cwd /tmp, with the case's env vars. Results go to
ROOT/NAME/case.json and back into benchmarks/env_batch/CASES.yaml (breaks / uv_pip_check / seen).

    .venv/bin/python benchmarks/build_env_batch.py [--root /tmp/envbatch] [--only NAME ...] [--no-yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "lockfiles" / "verl041-vllm063post1-py3.11.txt"
CASES_YAML = REPO / "benchmarks" / "env_batch" / "CASES.yaml"
EXCLUDE_NEWER = "2026-11-30T00:00:00Z"
# the cache tests/envs.py uses (its ROOT / "uv-cache"), so wheels are hardlinked, not downloaded again
UV_CACHE = Path(os.environ.get("VERL_DOCTOR_TEST_ENVS", Path.home() / ".cache" / "verl-doctor-tests")) / "uv-cache"

IMPORTS = ["torch", "transformers", "ray", "vllm", "verl", "verl.trainer.main_ppo", "datasets"]

# First-use probes (cheap, no GPU, no network on success): name -> python source
PROBES = {
    "ray.init": "import ray; ray.init(num_cpus=1); print(ray.cluster_resources()); ray.shutdown()",
    "AutoConfig.from_pretrained": (
        "from transformers import AutoConfig; "
        "print(AutoConfig.from_pretrained('Qwen/Qwen2.5-0.5B-Instruct').model_type)"),
    "vllm.get_attn_backend": (
        "import torch; from vllm.attention.selector import get_attn_backend; "
        "print(get_attn_backend(64, None, torch.float16, None, 16, False))"),
    "pynvml.__file__": "import pynvml; print(pynvml.__file__)",
    # what verl's RLHFDataset does first: datasets.load_dataset("parquet", data_files=...) on a local file
    "datasets.load_dataset": (
        "import os, tempfile; import pyarrow as pa, pyarrow.parquet as pq; "
        "d = tempfile.mkdtemp(); f = os.path.join(d, 'x.parquet'); pq.write_table(pa.table({'prompt': ['hi']}), f); "
        "import datasets; print(datasets.load_dataset('parquet', data_files=f)['train'].num_rows)"),
}

# {ENV} in a setting's value or a prep command is replaced by the env dir.
CASES: list[dict] = [
    # ---------------------------------------------------------------- pin-over (install --no-deps X==V)
    dict(name="pin-numpy1252", kind="pin-over", ops=[["install", "--no-deps", "numpy==1.25.2"]],
         change="uv pip install --no-deps numpy==1.25.2",
         expect="numpy (1.25.2 < pandas 3.0.6's floor 1.26.0: pandas refuses it, 'Please upgrade numpy')",
         thread="https://github.com/alexnathanson/solar-protocol/issues/3",
         thread_quote="ImportError: this version of pandas is incompatible with numpy < 1.16.5\nyour numpy version is 1.16.2.\nPlease upgrade numpy to >= 1.16.5 to use this pandas version"),
    dict(name="pin-pydantic-core2272", kind="pin-over", ops=[["install", "--no-deps", "pydantic-core==2.27.2"]],
         change="uv pip install --no-deps pydantic-core==2.27.2",
         expect="pydantic-core (2.27.2, pydantic 2.14.4 needs exactly 2.50.5: the compiled core one layer under pydantic)",
         thread="https://github.com/Tavris1/ComfyUI-Easy-Install/issues/156",
         thread_quote="The installed pydantic-core version (2.23.4) is incompatible with the current pydantic version, which requires 2.41.5. If you encounter this error, make sure that you haven't upgraded pydantic-core manually."),
    dict(name="pin-torchdata071", kind="pin-over", ops=[["install", "--no-deps", "torchdata==0.7.1"]],
         change="uv pip install --no-deps torchdata==0.7.1",
         expect="torchdata (0.7.1 has no torchdata.stateful_dataloader; verl's ray_trainer imports StatefulDataLoader)",
         thread="https://github.com/pytorch/torchtitan/pull/353",
         thread_quote="`StatefulDataloader` is not in `torchdata` official release yet. Print helper message if user doesn't have a recent nightly installed. ... For my case I had tried to install but the version was wrong."),
    # ---------------------------------------------------------------- upgrade (install X==V with deps)
    dict(name="upgrade-opencv412-numpy2", kind="upgrade", ops=[["install", "opencv-python-headless==4.12.0.88"]],
         change="uv pip install opencv-python-headless==4.12.0.88   (with deps: drags numpy>=2,<2.3 in)",
         expect="numpy 2.x pulled in by the opencv-python-headless upgrade (numpy 1.x-built extensions fail)",
         thread="https://github.com/vllm-project/vllm/issues/34041",
         thread_quote="A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.2.6 as it may crash. ... opencv-python-headless wants numpy >= 2.0"),
    # ---------------------------------------------------------------- uninstall
    dict(name="uninstall-cublas", kind="uninstall", ops=[["uninstall", "nvidia-cublas-cu12"]],
         change="uv pip uninstall nvidia-cublas-cu12",
         expect="nvidia-cublas-cu12 (missing: libtorch_cuda.so cannot load libcublas.so.12; import name nvidia.cublas)",
         thread="https://github.com/pytorch/pytorch/issues/89417",
         thread_quote="OSError: libcublas.so.11: cannot open shared object file: No such file or directory"),
    dict(name="uninstall-pyyaml", kind="uninstall", ops=[["uninstall", "pyyaml"]],
         change="uv pip uninstall pyyaml",
         expect="pyyaml (imported as yaml)",
         thread="https://github.com/xnl-h4ck3r/knoxnl/issues/4",
         thread_quote="    import yaml\nModuleNotFoundError: No module named 'yaml'"),
    dict(name="uninstall-pillow", kind="uninstall", ops=[["uninstall", "pillow"]],
         change="uv pip uninstall pillow",
         expect="pillow (imported as PIL)",
         thread="https://github.com/iperov/DeepFaceLab/issues/5367",
         thread_quote="ModuleNotFoundError: No module named 'PIL'"),
    # ---------------------------------------------------------------- extra-dist
    dict(name="extra-nccl-cu11", kind="extra-dist", ops=[["install", "--no-deps", "nvidia-nccl-cu11==2.14.3"]],
         change="uv pip install --no-deps nvidia-nccl-cu11==2.14.3   (writes nvidia/nccl/lib/libnccl.so.2 over the cu12 one)",
         expect="nvidia-nccl-cu11 (its libnccl.so.2 2.14.3 replaced nvidia-nccl-cu12's file; torch needs ncclCommRegister)",
         thread="https://github.com/rwth-i6/returnn/issues/1802",
         thread_quote="ImportError: /home/runner/.local/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclMemFree ... [pip3] nvidia-nccl-cu11==2.14.3 [pip3] nvidia-nccl-cu12==2.27.3"),
    dict(name="extra-pynvml1150", kind="extra-dist", ops=[["install", "--no-deps", "pynvml==11.5.0"]],
         change="uv pip install --no-deps pynvml==11.5.0   (a pynvml/ package that shadows nvidia-ml-py's pynvml.py)",
         expect="pynvml (shadows nvidia-ml-py's pynvml module; vLLM warns on GPU machines) -- CONTROL on CPU",
         thread="https://github.com/flashinfer-ai/flashinfer/issues/720",
         thread_quote="WARNING 01-07 11:20:01 cuda.py:22] You are using a deprecated `pynvml` package. Please install `nvidia-ml-py` instead, and make sure to uninstall `pynvml`. When both of them are installed, `pynvml` will take precedence and cause errors.",
         probes=["pynvml.__file__"]),
    # ---------------------------------------------------------------- settings
    dict(name="set-vllm-use-modelscope", kind="setting", ops=[], env={"VLLM_USE_MODELSCOPE": "True"},
         change="env: {VLLM_USE_MODELSCOPE: 'True'}   (modelscope: a dist nothing in the set installs)",
         expect="VLLM_USE_MODELSCOPE=True (vllm then imports modelscope, which is not installed)",
         thread="https://github.com/vllm-project/vllm/pull/16524",
         thread_quote="$ export VLLM_USE_MODELSCOPE=True ... import modelscope\nModuleNotFoundError: No module named 'modelscope'"),
    dict(name="set-pythonpath-tf440", kind="setting", env={"PYTHONPATH": "{ENV}/pythonpath-old"},
         ops=[["install", "--no-deps", "--target", "{ENV}/pythonpath-old", "transformers==4.40.2"]],
         change="env: {PYTHONPATH: ENV/pythonpath-old}   (a dir holding transformers 4.40.2: uv pip install --target ENV/pythonpath-old --no-deps transformers==4.40.2)",
         expect="PYTHONPATH (shadows the env's transformers 4.47.1 with 4.40.2, which refuses tokenizers 0.21)",
         thread="https://github.com/YanWenKun/Hunyuan3D-2-WinPortable/issues/105",
         thread_quote="ImportError: tokenizers>=0.22.0,<=0.23.0 is required for a normal functioning of this module, but found tokenizers==0.21.4. ... I installed tokenizers and transformers, after that copy this libs manually, but ... The same"),
    dict(name="set-pythonpath-project-datasets", kind="setting", env={"PYTHONPATH": "{ENV}/project"},
         ops=[], prep=["mkdir -p {ENV}/project/datasets",
                       "echo \"DATA_DIR = 'data'  # the project's own data helpers\" > {ENV}/project/datasets/__init__.py"],
         change="env: {PYTHONPATH: ENV/project}   (a project checkout whose own package is named datasets: ENV/project/datasets/__init__.py)",
         expect="PYTHONPATH (ENV/project/datasets shadows Hugging Face datasets; verl's RLHFDataset calls datasets.load_dataset)",
         thread="https://github.com/nyu-mll/jiant/issues/1211",
         thread_quote="    dataset = datasets.load_dataset(path=path, name=name, version=version)\nAttributeError: module 'datasets' has no attribute 'load_dataset'\n... Might be naming conflict with `jiant/scripts/download_data/datasets/__init__.py`?",
         probes=["datasets.load_dataset"]),
    dict(name="set-ld-preload-nccl218", kind="setting", env={"LD_PRELOAD": "{ENV}/ld-nccl218/nvidia/nccl/lib/libnccl.so.2"},
         ops=[["install", "--no-deps", "--target", "{ENV}/ld-nccl218", "nvidia-nccl-cu12==2.18.1"]],
         change="env: {LD_PRELOAD: ENV/ld-nccl218/nvidia/nccl/lib/libnccl.so.2}   (NCCL 2.18.1's lib: uv pip install --target ENV/ld-nccl218 --no-deps nvidia-nccl-cu12==2.18.1)",
         expect="LD_PRELOAD (forces an NCCL 2.18.1 libnccl.so.2 in front of the env's 2.20.5)",
         thread="https://github.com/NVIDIA/nccl/issues/1180",
         thread_quote="torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister ... put libnccl.so.2 in the default library path or set LD_LIBRARY_PATH=/path/to/nccl/build/lib:$LD_LIBRARY_PATH"),
    dict(name="set-ld-library-path-nccl218", kind="setting", env={"LD_LIBRARY_PATH": "{ENV}/ld-nccl218/nvidia/nccl/lib"},
         ops=[["install", "--no-deps", "--target", "{ENV}/ld-nccl218", "nvidia-nccl-cu12==2.18.1"]],
         change="env: {LD_LIBRARY_PATH: ENV/ld-nccl218/nvidia/nccl/lib}   (same NCCL 2.18.1 lib dir as set-ld-preload-nccl218)",
         expect="nothing here -- CONTROL: libtorch_cuda.so carries DT_RPATH $ORIGIN/../../nvidia/nccl/lib, which wins over LD_LIBRARY_PATH",
         thread="https://github.com/NVIDIA/nccl/issues/1180",
         thread_quote="U can compile nccl 2.19.4 by yourself and put libnccl.so.2 in the default library path or set LD_LIBRARY_PATH=/path/to/nccl/build/lib:$LD_LIBRARY_PATH"),
    dict(name="set-ray-address-nowhere", kind="setting", ops=[], env={"RAY_ADDRESS": "ray://127.0.0.1:10001"},
         change="env: {RAY_ADDRESS: 'ray://127.0.0.1:10001'}   (a Ray Client address nothing listens on)",
         expect="RAY_ADDRESS (points at a cluster that is not there; ray.init() times out instead of starting a local one)",
         thread="https://github.com/vllm-project/vllm/issues/14349",
         thread_quote="INFO worker.py:1514 -- Using address **ray://192.168.1.67:6888** set in the environment variable RAY_ADDRESS ... UserWarning: Ray Client connection timed out. Ensure that the Ray Client port on the head node is reachable from your local machine.",
         probes=["ray.init"]),
    dict(name="set-hf-hub-offline", kind="setting", ops=[], dropped=True,
         env={"HF_HUB_OFFLINE": "1", "HF_HOME": "{ENV}/hf-home-empty"},
         prep=["mkdir -p {ENV}/hf-home-empty"],
         change="env: {HF_HUB_OFFLINE: '1', HF_HOME: ENV/hf-home-empty}   (offline, model Qwen/Qwen2.5-0.5B-Instruct not in the cache)",
         expect="HF_HUB_OFFLINE=1 with the model missing from HF_HOME",
         thread="https://github.com/vllm-project/vllm/issues/3719",
         thread_quote="huggingface_hub.utils._http.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/bigcode/starcoder: offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` environment variable.",
         probes=["AutoConfig.from_pretrained"]),
    dict(name="set-vllm-attn-backend-v1", kind="setting", ops=[], env={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN_VLLM_V1"},
         change="env: {VLLM_ATTENTION_BACKEND: FLASH_ATTN_VLLM_V1}   (a vLLM >= 0.7 backend name; 0.6.3 does not know it)",
         expect="VLLM_ATTENTION_BACKEND (value unsupported by vllm 0.6.3.post1)",
         thread="https://github.com/vllm-project/vllm-ascend/issues/4197",
         thread_quote="ValueError: Unknown attention backend: 'ASCEND'. Valid options are: FLASH_ATTN, TRITON_ATTN, XFORMERS, ...",
         probes=["vllm.get_attn_backend"]),
]
# Tried here and dropped (do not reproduce on this CPU-only, offline, Python 3.11 machine, or break nothing
# the probes can see); listed in the CASES.yaml header. Cases marked (built) were built by this script.
DROPPED = {
    "set-hf-hub-offline (built)": "HF_HUB_OFFLINE=1 + model missing: the first-use probe AutoConfig.from_pretrained fails, but it "
        "fails in the unmodified baseline too (this machine cannot reach huggingface.co), so the break is not the setting's",
    "set-cuda-visible-devices-empty": "CUDA_VISIBLE_DEVICES='': no GPU here, so hiding GPUs changes nothing an import or CPU probe sees",
    "set-pytorch-alloc-expandable": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: parsed only when the CUDA caching allocator starts (needs a GPU)",
    "set-vllm-worker-multiproc-fork / NCCL_*": "read only when vLLM starts workers / NCCL initialises a communicator (needs GPUs)",
    "set-vllm-attn-backend-flashinfer": "VLLM_ATTENTION_BACKEND=FLASHINFER without flashinfer: get_attn_backend() still returns "
        "FlashInferBackend on CPU (flashinfer is imported lazily at kernel time); replaced by the unknown-name case",
    "set-ray-address-unreachable": "RAY_ADDRESS=127.0.0.1:6379 (nothing listening): ray.init() retries the GCS for minutes "
        "(still hanging after 120 s here); replaced by the ray:// form, which times out in ~35 s",
    "set-ray-address-auto": "RAY_ADDRESS=auto with no cluster: ConnectionError at once in a first run, but 'auto' scans the "
        "machine's processes for any raylet/GCS, and another session runs Ray clusters here: not reproducible, replaced",
    "extra-attr032": "attr 0.3.2 installs attr.py, but attrs' attr/ package in the same dir wins the import: nothing shadowed",
    "extra-torch-npu240": "torch-npu 2.4.0: import torch_npu fails (libhccl.so), but transformers/accelerate/verl import and a "
        "tiny-model build work; nothing on the probed path calls it",
    "extra-opencv-python": "opencv-python next to -headless: needs libGL.so.1, which this machine has; and vllm imports cv2 lazily",
    "uninstall-pyzmq": "vllm 0.6.3 imports zmq only in the multiprocessing engine / shm_broadcast; all probes pass",
    "uninstall-pyairports": "baseline already lacks the module: the locked pyairports 0.0.1 ships no pyairports package, so "
        "vllm's outlines guided-decoding import fails with or without it",
    "upgrade-compressed-tensors (0.9.4 / 0.12.2)": "uv pip install compressed-tensors==V (vllm pins 0.6.0): import vllm still works",
    "upgrade-transformers4513": "uv pip install transformers==4.51.3: vllm and verl still import",
    "upgrade-pyarrow1402": "uv pip install pyarrow==14.0.2 (datasets 4.0 asks >=15): import datasets still works",
    "uninstall-triton": "torch, vllm and xformers all import without triton on this CPU machine",
    "uninstall-grpcio (nothing requires it)": "import ray, main_ppo and ray.init() all succeed (ray.init only skips the dashboard)",
}

# Baseline: the unmodified set, for the first-use probes (they are not run on every case).
BASELINE = dict(name="_baseline", kind="control", ops=[], change="(none: the working set)",
                probes=["ray.init", "AutoConfig.from_pretrained", "vllm.get_attn_backend"])


def uv_bin() -> str:
    for c in (shutil.which("uv"), str(REPO / ".venv" / "bin" / "uv")):
        if c and Path(c).exists():
            return c
    return f"{sys.executable} -m uv"


def uv_env() -> dict:
    env = dict(os.environ)
    env.update(UV_CACHE_DIR=str(UV_CACHE), UV_NO_PROGRESS="1", UV_EXCLUDE_NEWER=EXCLUDE_NEWER)
    env.pop("VIRTUAL_ENV", None)
    return env


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def must(cmd: list[str], **kw) -> None:
    p = run(cmd, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")


def sub(s: str, env_dir: Path) -> str:
    return s.replace("{ENV}", str(env_dir))


def build(case: dict, root: Path) -> Path:
    env_dir = root / case["name"]
    if env_dir.exists():
        shutil.rmtree(env_dir)
    uv, env = uv_bin(), uv_env()
    must([uv, "venv", "--quiet", "-p", "python3.11", str(env_dir)], env=env)
    py = str(env_dir / "bin" / "python")
    must([uv, "pip", "sync", "--quiet", "--require-hashes", "--python", py, str(LOCK)], env=env)
    for cmd in case.get("prep", []):
        must(["bash", "-c", sub(cmd, env_dir)])
    for op in case["ops"]:
        op = [sub(a, env_dir) for a in op]
        if "--target" in op:  # a directory a setting points at, not the env itself
            must([uv, "pip", op[0], "--quiet", *op[1:]], env=env)
        else:
            must([uv, "pip", op[0], "--quiet", "--python", py, *op[1:]], env=env)
    return env_dir


def probe(env_dir: Path, code: str, case_env: dict, timeout: int = 300) -> tuple[int, str, float, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "LD_PRELOAD")}
    env.update(case_env)
    t = time.time()
    try:
        p = run([str(env_dir / "bin" / "python"), "-c", code], cwd="/tmp", env=env, timeout=timeout)
        rc, err, out = p.returncode, p.stderr, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, err, out = 124, (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + "\n[timed out]", ""
    return rc, err, round(time.time() - t, 1), out


def measure(case: dict, root: Path) -> dict:
    t0 = time.time()
    env_dir = build(case, root)
    t_build = round(time.time() - t0, 1)
    case_env = {k: sub(v, env_dir) for k, v in case.get("env", {}).items()}
    results, first_fail = {}, None
    names = IMPORTS + case.get("probes", [])
    for name in names:
        code = PROBES.get(name, f"import {name}")
        rc, err, secs, out = probe(env_dir, code, case_env)
        results[name] = {"rc": rc, "secs": secs}
        if name in PROBES and out.strip():
            results[name]["stdout_tail"] = out.strip().splitlines()[-1][:300]
        if rc != 0:
            results[name]["stderr_tail"] = "\n".join(err.rstrip().splitlines()[-14:])
            first_fail = first_fail or name
    chk = run([uv_bin(), "pip", "check", "--python", str(env_dir / "bin" / "python")], env=uv_env())
    uv_check = (chk.stdout + chk.stderr).strip()
    lines = [ln for ln in uv_check.splitlines() if not ln.startswith(("Using Python", "Checked "))]
    record = {
        "name": case["name"], "kind": case["kind"], "change": case["change"], "env": case_env,
        "env_dir": str(env_dir), "build_secs": t_build,
        "breaks": [n for n in names if results[n]["rc"] != 0],
        "probes": results,
        "uv_pip_check": "clean" if chk.returncode == 0 and "All installed packages are compatible" in uv_check else uv_check,
        "uv_pip_check_lines": lines,
        "seen": {"probe": first_fail, "stderr_tail": results[first_fail]["stderr_tail"]} if first_fail else None,
        "total_secs": round(time.time() - t0, 1),
    }
    (env_dir / "case.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


class _Lit(str):
    pass


def _lit(dumper, data):
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")


yaml.add_representer(_Lit, _lit, Dumper=yaml.SafeDumper)


def write_yaml(records: dict, baseline: dict | None, root: Path, wall: float) -> None:
    out = []
    for c in CASES:
        r = records.get(c["name"])
        if r is None or c.get("dropped"):
            continue
        item = {"name": c["name"], "change": c["change"], "kind": c["kind"]}
        if c.get("env"):
            item["env"] = {k: sub(v, Path("ENV")) for k, v in c["env"].items()}
        item.update(thread=c["thread"], thread_quote=_Lit(c["thread_quote"]), expect=c["expect"],
                    env_dir=r["env_dir"], breaks=r["breaks"],
                    probes={k: ("ok" + (f" (prints {v['stdout_tail']})" if v.get("stdout_tail") else "") if v["rc"] == 0
                                else f"FAIL rc={v['rc']}") for k, v in r["probes"].items()},
                    uv_pip_check=r["uv_pip_check"] if r["uv_pip_check"] == "clean" else _Lit(r["uv_pip_check"]),
                    seen=_Lit(("# probe " + r["seen"]["probe"] + ": python -c " + repr(PROBES[r["seen"]["probe"]])
                               if r["seen"]["probe"] in PROBES else f"# python -c 'import {r['seen']['probe']}'")
                              + "\n" + r["seen"]["stderr_tail"]) if r["seen"] else None)
        if not r["breaks"]:
            item["note"] = "CONTROL: nothing fails here; see expect"
        out.append(item)
    head = (
        "# Fresh measurement batch (benchmarks/build_env_batch.py): ONE change to a copy of the working set\n"
        "# (uv venv -p python3.11 + uv pip sync --require-hashes lockfiles/verl041-vllm063post1-py3.11.txt,\n"
        f"#  UV_EXCLUDE_NEWER={EXCLUDE_NEWER}, UV_CACHE_DIR={UV_CACHE}); each probe in its own process, cwd /tmp,\n"
        "#  with the case's env vars. ENV in env values = the env dir (root: " + str(root) + ").\n"
        f"# Machine: CPU only (no GPU, no libcuda), Python 3.11.7, 2 cores. Generated {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, "
        f"build+probe wall time {wall:.0f} s.\n"
        "# Imports probed in every env: " + ", ".join(IMPORTS) + "; first-use probes only where a case names them.\n"
        "# breaks: [] marks a CONTROL (documented; nothing fails here).\n")
    if baseline:
        head += ("# BASELINE (unmodified set, " + baseline["env_dir"] + "): breaks " + json.dumps(baseline["breaks"])
                 + "; first-use probes: " + ", ".join(f"{k}={'ok' if v['rc'] == 0 else 'FAIL'}" for k, v in baseline["probes"].items()
                                                     if k not in IMPORTS) + "\n")
        for k, v in baseline["probes"].items():
            if v["rc"] != 0:
                head += "#   baseline " + k + ": " + v["stderr_tail"].splitlines()[-1][:300] + "\n"
    head += "# DROPPED (tried, did not reproduce or broke nothing the probes see):\n"
    for k, v in DROPPED.items():
        head += f"#   {k}: {v}\n"
    CASES_YAML.parent.mkdir(parents=True, exist_ok=True)
    CASES_YAML.write_text(head + yaml.safe_dump(out, sort_keys=False, allow_unicode=True, width=140))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/envbatch")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--no-yaml", action="store_true")
    ap.add_argument("--yaml-only", action="store_true", help="rewrite CASES.yaml from ROOT/*/case.json, build nothing")
    a = ap.parse_args()
    root = Path(a.root)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    records, baseline = {}, None
    bl_file = root / BASELINE["name"] / "case.json"
    if a.yaml_only:
        a.only, a.no_baseline = ["-"], True
    if not a.no_baseline:
        baseline = measure(BASELINE, root)
        print(f"{BASELINE['name']}: breaks={baseline['breaks']} ({baseline['total_secs']} s)", flush=True)
    elif bl_file.exists():
        baseline = json.loads(bl_file.read_text())
    for c in CASES:
        if a.only and c["name"] not in a.only:
            cj = root / c["name"] / "case.json"
            if cj.exists():
                records[c["name"]] = json.loads(cj.read_text())
            continue
        r = measure(c, root)
        records[c["name"]] = r
        print(f"{c['name']}: breaks={r['breaks']} check={'clean' if r['uv_pip_check'] == 'clean' else 'FLAGS'} "
              f"(build {r['build_secs']} s, total {r['total_secs']} s)", flush=True)
    wall = time.time() - t0
    if a.yaml_only:
        wall = json.loads((root / "batch.json").read_text())["wall_secs"]
        write_yaml(records, baseline, root, wall)
        return
    (root / "batch.json").write_text(json.dumps({"wall_secs": round(wall, 1), "cases": list(records)}, indent=2))
    if not a.no_yaml:
        write_yaml(records, baseline, root, wall)
    print(f"done in {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()
