# vLLM's Qwen2ForCausalLM inspection, the way vLLM 0.6.3 does it: the child command
# `sys.executable -m vllm.model_executor.models.registry`, fed a pickled (fn, output_path) on stdin,
# where fn computes _ModelInfo.from_model_cls(Qwen2ForCausalLM). The child's stderr is the real
# cause whenever vLLM would say "Model architectures ['Qwen2ForCausalLM'] are not supported".
#
# The payload is built with stdlib pickle from *references* (module + attribute names) so that this
# parent process does not need to import vllm itself (that alone takes ~15 s); the child resolves
# them exactly as it would resolve cloudpickle's by-reference globals.
import functools
import importlib
import importlib.util
import pickle
import subprocess
import sys
import tempfile
import time

ARCH_MODULE, ARCH_CLASS = "vllm.model_executor.models.qwen2", "Qwen2ForCausalLM"
REGISTRY = "vllm.model_executor.models.registry"


class _Module:
    def __init__(self, name):
        self.name = name

    def __reduce__(self):
        return (importlib.import_module, (self.name,))


class _Attr:
    def __init__(self, obj, attr):
        self.obj, self.attr = obj, attr

    def __call__(self, *a, **k):  # functools.partial wants a callable; never called here
        raise RuntimeError("reference only")

    def __reduce__(self):
        return (getattr, (self.obj, self.attr))


class _Any:
    """Stands in for any class when reading the child's pickled _ModelInfo back."""

    def __init__(self, *a, **k):
        pass

    def __setstate__(self, state):
        if isinstance(state, tuple):  # (dict, slots)
            state = {k: v for part in state if part for k, v in part.items()}
        self.__dict__.update(state or {})


class _Reader(pickle.Unpickler):
    def find_class(self, module, name):
        if module in ("builtins", "copyreg", "collections"):
            return super().find_class(module, name)
        return _Any


def main():
    spec = importlib.util.find_spec("vllm")
    if spec is None:
        emit({"ran": False, "reason": "vllm is not installed"})
        return
    from_model_cls = _Attr(_Attr(_Module(REGISTRY), "_ModelInfo"), "from_model_cls")
    arch = _Attr(_Module(ARCH_MODULE), ARCH_CLASS)
    fn = functools.partial(from_model_cls, arch)
    t0 = time.perf_counter()
    with tempfile.NamedTemporaryFile() as output_file:
        payload = pickle.dumps((fn, output_file.name))
        cmd = [sys.executable, "-m", REGISTRY]
        proc = subprocess.run(cmd, input=payload, capture_output=True)
        seconds = round(time.perf_counter() - t0, 3)
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            emit({"ran": True, "ok": False, "returncode": proc.returncode, "command": cmd,
                  "stderr_tail": stderr.strip().splitlines()[-25:], "seconds": seconds})
            return
        with open(output_file.name, "rb") as fh:
            info = _Reader(fh).load()
    emit({"ran": True, "ok": bool(getattr(info, "is_text_generation_model", False)),
          "model_info": dict(vars(info)), "command": cmd, "seconds": seconds,
          "stderr_tail": stderr.strip().splitlines()[-5:]})


main()
