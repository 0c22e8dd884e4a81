"""Failure classes learnt from the libraries' own messages, not from one thread (issue 25): each text
below is the message a library prints (its source named beside it), in the shape a paste shows it.
Triage must name the class with the detail a fix needs, the run must count as failed, and the class
must not fire on the harmless pastes (the batch tests check those)."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.triage import triage_text

TB = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    main()\n'

CASES = [
    # torch/utils/cpp_extension.py; gcc killed by the OOM killer in a ninja build; CPython headers
    ("RuntimeError: \nThe detected CUDA version (12.1) mismatches the version that was used to compile\nPyTorch (11.8). "
     "Please make sure to use the same CUDA versions.", "build.cuda-version-mismatch", ["12.1", "11.8", "CUDA_HOME"]),
    ("RuntimeError: Ninja is required to load C++ extensions", "build.ninja-missing", ["pip install ninja"]),
    ("      c++: fatal error: Killed signal terminated program cc1plus\n      compilation terminated.\n"
     "      ninja: build stopped: subcommand failed.", "build.out-of-memory", ["MAX_JOBS"]),
    ("      csrc/a.cpp:1:10: fatal error: Python.h: No such file or directory\n      compilation terminated.",
     "build.python-headers-missing", ["-dev"]),
    ("OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.",
     "build.nvcc-missing", ["CUDA_HOME"]),
    # pip and uv
    ("ERROR: Package 'verl' requires a different Python: 3.8.10 not in '>=3.10'", "install.python-unsupported",
     ["verl", "3.8.10", ">=3.10"]),
    ("ERROR: flash_attn-2.5.8+cu122torch2.3cxx11abiFALSE-cp310-cp310-linux_x86_64.whl is not a supported wheel on "
     "this platform.", "install.wheel-unsupported", ["cp310", "python -V"]),
    ("ERROR: Could not find a version that satisfies the requirement vllm==0.6.3 (from versions: none)\n"
     "ERROR: No matching distribution found for vllm==0.6.3", "install.no-matching-distribution", ["vllm"]),
    ("  × No solution found when resolving dependencies:\n  ╰─▶ Because vllm==0.6.3 depends on torch==2.4.0 and "
     "you require torch==2.5.1, we can conclude that your requirements and vllm==0.6.3 are incompatible.",
     "install.conflict", ["Because"]),
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
     "gpu.container-runtime-missing", ["nvidia-ctk"]),
    # ray/exceptions.py; the GCS's health check
    (TB + "ray.exceptions.ObjectStoreFullError: Failed to put object ffff in object store because it is full.",
     "runtime.ray-object-store-full", ["--object-store-memory", "shm-size"]),
    ("(raylet) The node with node id: 5d1f and address: 10.0.0.3 and node name: 10.0.0.3 has been marked dead "
     "because the detector has missed too many heartbeats from it.", "runtime.ray-node-died", ["dmesg"]),
    # torch/cuda/__init__.py; multiprocessing/spawn.py; torch's Windows DLL loader; triton's libcuda lookup
    (TB + "AssertionError: Torch not compiled with CUDA enabled", "runtime.torch-cpu-build", ["download.pytorch.org"]),
    ("RuntimeError: \n        An attempt has been made to start a new process before the\n        current process "
     "has finished its bootstrapping phase.", "runtime.spawn-main-guard", ["__name__"]),
    ('OSError: [WinError 126] The specified module could not be found. Error loading "C:\\v\\torch\\lib\\fbgemm.dll" '
     "or one of its dependencies.", "runtime.windows-dll-load", ["Visual C++"]),
    ("Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file: No such "
     "file or directory\nAborted (core dumped)", "runtime.libcuda-not-found", ["/usr/lib/wsl/lib", "ldconfig"]),
    # torch autograd / amp / multinomial; accelerate's FSDP plugin; peft's injection; transformers' VL models
    (TB + "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
     "runtime.no-grad-path", ["enable_input_require_grads"]),
    (TB + "ValueError: Attempting to unscale FP16 gradients.", "runtime.fp16-master-weights", ["float32", "bf16"]),
    (TB + "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0", "runtime.nan-in-sampling",
     ["bfloat16"]),
    (TB + "Exception: Could not find the transformer layer class to wrap in the model.", "config.fsdp-wrap-class",
     ["DecoderLayer"]),
    (TB + "ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model. Please check the target "
     "modules and try again.", "config.lora-target-modules", ["query_key_value", "all-linear"]),
    (TB + "ValueError: Image features and image tokens do not match: tokens: 0, features 1176",
     "runtime.image-tokens-mismatch", ["max_pixels", "cutoff_len"]),
    (TB + "ValueError: At most 1 image(s) may be provided in one request.", "config.mm-limit-per-prompt",
     ["--limit-mm-per-prompt"]),
    # antlr4's runtime check; the Hub's rate limit; torch's zip reader
    ("ANTLR runtime and generated code versions disagree: 4.9.3!=4.11.1\n" + TB +
     "Exception: Could not deserialize ATN with version 4 (expected 3).", "runtime.library-version",
     ["antlr4-python3-runtime", "4.11.1"]),
    ("huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
     "https://huggingface.co/api/datasets/openai/gsm8k", "runtime.hf-rate-limited", ["HF_HUB_OFFLINE"]),
    (TB + "RuntimeError: unexpected EOF, expected 1234567 more bytes. The file might be corrupted.",
     "runtime.checkpoint-load-failed", ["downloaded again"]),
    ("OSError: [Errno 30] Read-only file system: '/data/checkpoints/global_step_100'", "runtime.permission-denied",
     ["/data/checkpoints/global_step_100"]),
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
     "system.shm-small", ["shm"]),
    # torch's embedding check, CUDA's assert; flash-attn's input checks; Triton's launch check; apex's extensions
    (TB + "IndexError: index out of range in self", "runtime.token-id-out-of-range", ["resize_token_embeddings"]),
    (TB + "RuntimeError: CUDA error: device-side assert triggered", "runtime.device-assert", ["CUDA_LAUNCH_BLOCKING=1"]),
    (TB + "RuntimeError: FlashAttention only support fp16 and bf16 data type", "runtime.flash-attn-input",
     ["torch_dtype=torch.bfloat16"]),
    (TB + "RuntimeError: FlashAttention forward only supports head dimension at most 256", "runtime.flash-attn-input",
     ["sdpa", "256"]),
    (TB + "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: "
     "65536. Reducing block sizes or `num_stages` may help.", "gpu.kernel-out-of-resources", ["use_liger_kernel=False"]),
    (TB + "ModuleNotFoundError: No module named 'amp_C'", "runtime.module-missing", ["--cuda_ext"]),
    # torch.distributed's TCP store; DeepSpeed's JIT ops; sentencepiece without its file
    (TB + "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     "runtime.rendezvous-failed", ["MASTER_ADDR"]),
    (TB + "RuntimeError: Error building extension 'fused_adam'", "build.jit-extension-missing", ["ninja"]),
    (TB + '  File "/x/site-packages/sentencepiece/__init__.py", line 310, in LoadFromFile\n'
     "    return _sentencepiece.SentencePieceProcessor_LoadFromFile(self, arg)\nTypeError: not a string",
     "runtime.tokenizer-file-missing", ["tokenizer.model"]),
]


@pytest.mark.parametrize("text,fid,words", CASES, ids=[c[1] + f"-{i}" for i, c in enumerate(CASES)])
def test_a_librarys_own_message_names_its_class(text, fid, words):
    _assert_named(text + "\n", "x.log", fid, words)


def _assert_named(text: str, name: str, fid: str, words: list[str]) -> None:
    """The paste fails, its first error finding is `fid`, and its title and fix say every word."""
    t = triage_text(text, name)
    assert t.failed, t.status
    f = next(f for f in t.findings if f.severity == "error")
    shown = " ".join([f.title, f.fix.summary, *f.fix.commands])
    assert f.id == fid, (f.id, f.title)
    assert all(w in shown for w in words), (words, shown)


# -- the structures batches dd-jj taught, each on its real paste (threads cited in the batches' INDEX.yaml) --

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"

PASTES = [
    # a module imported as a bare directory ("(unknown location)"): not a version mismatch
    ("fresh-2026-12-03jj/llamafactory-6261.log", "python.namespace-package", ["pip uninstall vllm"]),
    # NumPy's and Python's own removals name the release that removed the name
    ("fresh-2026-12-03jj/vllm-ascend-1875.log", "runtime.numpy-removed-name", ["numpy<2.0"]),
    ("fresh-2026-12-03hh/opencompass-1976.log", "python.stdlib-removed", ["inspect.getargspec", "3.10"]),
    # a fp16 model on the CPU; a DataParallel prefix quoted in prose; W&B's 403 for another entity
    ("fresh-2026-12-03jj/mergekit-175.log", "runtime.half-on-cpu", ["float32"]),
    ("fresh-2026-12-03ff/pytorch-3805.log", "runtime.state-dict-prefix", ["module."]),
    ("fresh-2026-12-03ff/wandb-673.log", "runtime.logger-entity-denied", ["wandb", "entity"]),
    # a class keyed by the region's text: a message wrapped over lines, a usage line above its error
    ("fresh-2026-12-03ee/xformers-748.log", "build.cuda-version-mismatch", ["12.1", "11.8"]),
    ("fresh-2026-12-03ii/litgpt-1797.log", "runtime.api-mismatch", ["litgpt", "finetune_lora"]),
    # a full-width colon after the exception's name; "undefined symbol" right after a CJK character
    ("fresh-2026-12-03jj/llamafactory-7986.log", "runtime.npu-cuda-path", ["torch_npu"]),
    ("fresh-2026-12-03jj/vllm-ascend-1144.log", "extension.symbol-missing", ["ABI"]),
    # ENOSPC in multiprocessing's semaphores is /dev/shm; a top-level .so is its importer's package
    ("fresh-2026-12-03ii/megatron-lm-878.log", "system.shm-small", ["shm"]),
    ("fresh-2026-12-03ee/mamba-331.log", "extension.abi-mismatch", ["mamba_ssm"]),
    # a model class transformers does not have yet: the release that added its family
    ("fresh-2026-12-03gg/vlmevalkit-460.log", "runtime.model-too-new", ["4.45.0"]),
    # -- batches kk-qq --
    # another NCCL (or a system CUDA library) loaded into torch: a symbol missing, in a title without its colon
    ("fresh-2026-12-03oo/pytorch-119932.log", "torch.cuda-libs-mismatch", ["nccl", "uninstall"]),
    ("fresh-2026-12-03pp/vllm-5222.log", "gpu.hardware-fault", ["ECC"]),
    ("fresh-2026-12-03qq/kohya_ss-449.log", "runtime.windows-pagefile", ["page file"]),
    ("fresh-2026-12-03qq/whisperuidemo-1.log", "runtime.executable-missing", ["ffmpeg"]),
    ("fresh-2026-12-03qq/comfyui-yolo-11.log", "runtime.pickle-class-missing", ["ultralytics", "C3k2"]),
    ("fresh-2026-12-03qq/kohya-trainer-246.log", "gpu.bf16-unsupported", ["float16"]),
    ("fresh-2026-12-03kk/vllm-13563.log", "build.jit-extension-missing", ["ninja"]),
    # "after upgrading from A to B": the release that broke it, the owner of the class the line names
    ("fresh-2026-12-03mm/trl-1202.log", "runtime.release-regression", ["trl", "0.7.5", "0.7.8"]),
    # the watchdog's timeout at the run's start: one rank's long work, not the network
    ("fresh-2026-12-03nn/llamafactory-2424.log", "runtime.collective-timeout", ["ddp_timeout", "1800000"]),
    ("fresh-2026-12-03oo/nccl-1488.log", "runtime.nccl-nvls-failed", ["fabricmanager"]),
    ("fresh-2026-12-03pp/vllm-ascend-477.log", "extension.abi-mismatch", ["torchvision"]),
    ("fresh-2026-12-03nn/llama-cpp-12933.log", "build.system-library-missing", ["libcurl4-openssl-dev"]),
    ("fresh-2026-12-03ll/awesome-ml-sys-tutorial-185.log", "install.prerelease-needed", ["--prerelease=allow"]),
    ("fresh-2026-12-03mm/trl-2291.log", "config.trainer-args-class", ["DPOConfig", "model_init_kwargs"]),
    # typographic quotes around the names of an ImportError
    ("fresh-2026-12-03kk/sglang-194.log", "import.name-missing", ["outlines"]),
    # a framework refusing a model type its transformers does not have
    ("fresh-2026-12-03nn/ms-swift-5291.log", "runtime.model-too-new", ["4.55"]),
    # an issue title in Chinese ("运行失败") above a library's error line
    ("fresh-2026-12-03kk/lmdeploy-2109.log", "triton.broken", ["reinstall"]),
    # -- batches rr-xx --
    ("fresh-2026-12-03rr/mgm-91.log", "build.cuda-version-mismatch", ["12.2", "11.7"]),
    # a bare "Exception: …" line (raise Exception(...)) under a line of Chinese prose
    ("fresh-2026-12-03rr/llamafactory-315.log", "runtime.fp16-overflow", ["bf16"]),
    ("fresh-2026-12-03rr/llamafactory-8706.log", "runtime.launcher-local-rank", ["FORCE_TORCHRUN=1"]),
    # an upper-case KeyError is an environment variable read without a default
    ("fresh-2026-12-03rr/deepspeed-5318.log", "runtime.env-var-missing", ["export PDSH_SSH_ARGS_APPEND"]),
    ("fresh-2026-12-03rr/llamafactory-6194.log", "runtime.library-version", ["deepspeed", "0.15.4"]),
    ("fresh-2026-12-03rr/deepspeed-7410.log", "config.setting-rejected", ["autotp"]),
    # Markdown ate the dunder and the argument's underscore: "Accelerator.init got … 'dispatch batches'"
    ("fresh-2026-12-03ss/llm-dev-4.log", "runtime.api-mismatch", ["accelerate", "dispatch_batches"]),
    ("fresh-2026-12-03ss/llamafactory-2837.log", "config.generation-config-invalid", ["do_sample"]),
    ("fresh-2026-12-03ss/fastchat-399.log", "gpu.bf16-unsupported", ["float16"]),
    # transformers passes cache_position to model code written for an older transformers
    ("fresh-2026-12-03ss/llm2vec-119.log", "runtime.api-mismatch", ["downgrade transformers"]),
    ("fresh-2026-12-03tt/flash-attention-79.log", "runtime.flash-attn-input", ["sm80"]),
    ("fresh-2026-12-03tt/flashinfer-528.log", "runtime.flash-attn-input", ["flashinfer"]),
    ("fresh-2026-12-03tt/sglang-25877.log", "gpu.capability-too-low", ["deepgemm"]),
    ("fresh-2026-12-03tt/apex-428.log", "extension.abi-mismatch", ["apex"]),
    ("fresh-2026-12-03uu/llamafactory-7526.log", "runtime.arrow-offset-overflow", ["smaller files"]),
    ("fresh-2026-12-03uu/openchatkit-174.log", "version.fsspec", ["fsspec"]),
    ("fresh-2026-12-03ww/internvl-373.log", "runtime.remote-code-mismatch", ["latest revision"]),
    ("fresh-2026-12-03ww/internvl-197.log", "flash-attn.missing", ["sdpa"]),
    ("fresh-2026-12-03ww/vllm-5993.log", "runtime.vllm-kv-cache", ["max_model_len"]),
    ("fresh-2026-12-03xx/kuberay-4287.log", "runtime.host-oom-killed", ["resources.limits.memory"]),
    ("fresh-2026-12-03xx/torchdr-249.log", "runtime.port-in-use", ["--standalone"]),
]


@pytest.mark.parametrize("path,fid,words", PASTES, ids=[p[0].split("/")[1] for p in PASTES])
def test_a_structure_learnt_from_a_batch_names_its_cause(path, fid, words):
    _assert_named((CORPUS / path).read_text(), path, fid, words)
