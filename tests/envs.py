"""Builds the real virtualenvs the tests diagnose, with uv, from PyPI.

Every env starts from a hashed lockfile of lockfiles/ and applies one mutation that reproduces a
breakage from docs/research/STACK.md. All envs share one uv cache (hardlinks: a rebuild from a warm
cache takes seconds) and are reused within a run: an env is rebuilt only when its recipe changes.
Location: $VERL_DOCTOR_TEST_ENVS (default ~/.cache/verl-doctor-tests)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = Path(os.environ.get("VERL_DOCTOR_TEST_ENVS", Path.home() / ".cache" / "verl-doctor-tests"))
LOCK_041 = REPO / "lockfiles" / "verl041-vllm063post1-py3.11.txt"
LOCK_030 = REPO / "lockfiles" / "verl030-vllm063-py3.11.txt"
LOCK_091 = REPO / "lockfiles" / "verl091-vllm024-py3.11.txt"
EXCLUDE_NEWER = "2026-11-30T00:00:00Z"

# name -> (lockfile, mutation: list of uv pip argument lists applied after the sync, why)
RECIPES: dict[str, tuple[Path, list[list[str]], str]] = {
    "working": (LOCK_041, [], "the verified working set (install proof of the default lock)"),
    "verl030": (LOCK_030, [], "verl 0.3.0.post1 + vllm==0.6.3 (install proof of the second lock)"),
    "modern": (LOCK_091, [], "verl 0.9.1 + vllm 0.24.0 + torch 2.11 (install proof of the verl-modern lock, ~9.5 GB)"),
    "verl020post1": (LOCK_041, [["install", "verl==0.2.0.post1"]],
                     "verl 0.2.0.post1 + vllm 0.6.3.post1: the adapter rejects .post1"),
    "transformers5": (LOCK_041, [["install", "transformers==5.0.0"]],
                      "transformers 5.0.0: imports work, vLLM's tokenizer wrapper breaks"),
    "no-setuptools": (LOCK_041, [["uninstall", "setuptools"]],
                      "a uv venv without setuptools: triton, hence vllm, fails to import"),
    "protobuf318": (LOCK_041, [["install", "protobuf==3.18.3"]],
                    "protobuf 3.18.3 (inside ray 2.41's declared >=3.15.3): its protoc-3.19 gencode fails, import ray breaks"),
    "ray-no-msgpack": (LOCK_041, [["uninstall", "msgpack"]],
                       "a Ray dependency missing (msgpack): import ray fails with an error no signature knows"),
    "working-tf446": (LOCK_041, [["install", "transformers==4.46.3"]],
                      "the working set with transformers 4.46.3: a second Ray node for cluster drift"),
    "setuptools80": (LOCK_041, [["install", "setuptools==84.2.1"]],
                     "setuptools >= 80 (84.2.1: no pkg_resources since 82): import verl fails"),
    # A paper repository's vendored verl, as TinyZero and the repos built on it ship one: verl
    # 0.3.0.post1's own source (its PyPI sdist) with the fork's version string, `pip install -e`
    # into the verl 0.3 lock. The checkout lives beside the env (NAME-checkout).
    "verl-fork-editable": (LOCK_030, [["fork", "verl==0.3.0.post1", "0.1.0"]],
                           "an editable verl fork (verl 0.3.0.post1's code, version 0.1.0) over the verl 0.3 lock"),
    "verl-fork-post1": (LOCK_030, [["fork", "verl==0.3.0.post1", "0.1.0"], ["install", "--no-deps", "vllm==0.6.3.post1"]],
                        "the editable fork with vllm 0.6.3.post1 laid over: its own adapter rejects it"),
    # A pairwise pin (issue 24): datasets < 2.14.6 cannot load from fsspec > 2023.9.2; datasets 4.0 can.
    "datasets4-fsspec2025": (LOCK_041, [["install", "datasets==4.0.0", "fsspec==2025.3.0"]],
                             "datasets 4.0.0 + fsspec 2025.3.0: the fsspec pin's condition does not hold (healthy)"),
    # From the env batch of issue 24 (benchmarks/env_batch/CASES.yaml has the threads): a second NCCL wheel
    # that overwrites the cu12 libnccl.so.2 (uv pip check is clean), and pandas refusing an older numpy.
    "extra-nccl-cu11": (LOCK_041, [["install", "--no-deps", "nvidia-nccl-cu11==2.14.3"]],
                        "nvidia-nccl-cu11 2.14.3 writes nvidia/nccl/lib/libnccl.so.2 over nvidia-nccl-cu12's"),
    "pin-numpy1252": (LOCK_041, [["install", "--no-deps", "numpy==1.25.2"]],
                      "numpy 1.25.2 under pandas 3.0.6 ('Please upgrade numpy to >= 1.26.0')"),
    # CUDA 12 and CUDA 13 wheels in one env (field-modern class 7; vllm-project/vllm#43435): vLLM 0.24's
    # PyPI wheel (built with CUDA 13) laid over the seed's torch 2.4 (CUDA 12), as a `pip install -U vllm
    # --no-deps` into an older env does.
    "vllm024-over-cu12": (LOCK_041, [["install", "--no-deps", "vllm==0.24.0"]],
                          "vLLM 0.24.0 (links libcudart.so.13) over torch 2.4.0 (libcudart.so.12)"),
    "datasets2144-fsspec2025": (LOCK_041, [["install", "datasets==2.14.4"], ["install", "--no-deps", "fsspec==2025.3.0"]],
                                "datasets 2.14.4 (what the [stack] extra once resolved) with fsspec 2025.3.0: "
                                "load_dataset of a parquet fails"),
}

# The working set with one distribution pinned over it the way users do it (`pip install --no-deps
# X==V` of another project's pin): each breaks an import of the stack, found in the public record
# (tests/data/differential/CASES.yaml has the thread, the error it quotes and the one seen here).
# name -> (dist, version, thread)
PINNED_OVER: dict[str, tuple[str, str, str]] = {
    "pin-pydantic1": ("pydantic", "1.10.19", "https://github.com/vllm-project/vllm/issues/4004"),
    "pin-tokenizers020": ("tokenizers", "0.20.3", "https://github.com/Walter0807/RepBelief/issues/2"),
    "pin-hfhub023": ("huggingface-hub", "0.23.5", "https://github.com/lldacing/ComfyUI_PuLID_Flux_ll/issues/39"),
    "pin-typingext44": ("typing-extensions", "4.4.0", "https://github.com/vladmandic/sdnext/issues/1602"),
    "pin-torchvision020": ("torchvision", "0.20.1", "https://github.com/vllm-project/vllm/issues/7940"),
    "pin-safetensors040": ("safetensors", "0.4.0", "https://github.com/boundless-large-model/boundless-world-model/issues/8"),
    "pin-jinja2-2113": ("jinja2", "2.11.3", "https://github.com/hiyouga/LlamaFactory/issues/4852"),
    "pin-openai0281": ("openai", "0.28.1", "https://github.com/vllm-project/vllm/issues/7608"),
}
for _name, (_dist, _ver, _thread) in PINNED_OVER.items():
    RECIPES[_name] = (LOCK_041, [["install", "--no-deps", f"{_dist}=={_ver}"]],
                      f"{_dist} {_ver} laid over the working set with --no-deps ({_thread})")


def uv() -> str:
    from doctor.uv import uv_bin

    return uv_bin()


def _run(cmd: list[str], **kw) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def uv_env() -> dict:
    env = dict(os.environ)
    env.setdefault("UV_CACHE_DIR", str(ROOT / "uv-cache"))
    env["UV_NO_PROGRESS"] = "1"
    env.pop("VIRTUAL_ENV", None)
    return env


def recipe_key(name: str) -> str:
    lock, mutations, _ = RECIPES[name]
    h = hashlib.sha256(lock.read_bytes())
    h.update(json.dumps(mutations).encode())
    return h.hexdigest()


def python_of(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def build(name: str) -> Path:
    """Path to the env's interpreter, building the env if its recipe changed."""
    ROOT.mkdir(parents=True, exist_ok=True)
    env_dir = ROOT / "envs" / name
    stamp = env_dir / ".verl-doctor-test-recipe"
    with open(ROOT / f".{name}.lock", "w") as lockfh:  # parallel test workers build once
        fcntl.flock(lockfh, fcntl.LOCK_EX)
        key = recipe_key(name)
        if stamp.exists() and stamp.read_text() == key and python_of(env_dir).exists():
            return python_of(env_dir)
        _make(name, env_dir)
        stamp.write_text(key)
        return python_of(env_dir)


def _make(name: str, env_dir: Path) -> Path:
    """A fresh env at env_dir from NAME's recipe: venv, sync to the lockfile, then the mutations."""
    lock, mutations, _ = RECIPES[name]
    if env_dir.exists():
        shutil.rmtree(env_dir)
    env = uv_env()
    _run([uv(), "venv", "--quiet", "--python", sys.executable, str(env_dir)], env=env)
    py = str(python_of(env_dir))
    _run([uv(), "pip", "sync", "--quiet", "--require-hashes", "--python", py, str(lock)], env=env)
    for args in mutations:
        if args[0] == "fork":
            _install_fork(py, env_dir, args[1], args[2], env)
            continue
        extra = ["--exclude-newer", EXCLUDE_NEWER] if args[0] == "install" else []
        _run([uv(), "pip", *args[:1], "--quiet", "--python", py, *extra, *args[1:]], env=env)
    return python_of(env_dir)


def _install_fork(py: str, env_dir: Path, requirement: str, version: str, env: dict) -> None:
    """The sdist of `requirement` unpacked as the user's checkout, its version file set to the
    fork's, installed editable (no deps: the lock has them) — a real `pip install -e .`."""
    import tarfile
    import tempfile

    checkout = env_dir.parent / (env_dir.name + "-checkout")
    shutil.rmtree(checkout, ignore_errors=True)
    checkout.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "-d", tmp, requirement])
        (sdist,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(sdist) as tf:
            tf.extractall(tmp, filter="data")
        (src,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
        shutil.move(str(src), checkout)
    (checkout / "verl" / "version" / "version").write_text(version + "\n")
    _run([uv(), "pip", "install", "--quiet", "--python", py, "--exclude-newer", EXCLUDE_NEWER, "--no-deps",
          "-e", str(checkout)], env=env)


def build_copy(name: str, dest_dir: Path) -> Path:
    """A fresh, private env at dest_dir from NAME's recipe (same lockfile, same mutations, same uv
    cache), for tests that change the env (doctor fix / rollback): the shared envs of build() are
    read by other tests and must never be mutated. Returns the interpreter path."""
    ROOT.mkdir(parents=True, exist_ok=True)
    return _make(name, Path(dest_dir))


if __name__ == "__main__":  # python tests/envs.py [NAME ...]: prebuild (CI does this once)
    for n in sys.argv[1:] or list(RECIPES):
        print(n, build(n), flush=True)
