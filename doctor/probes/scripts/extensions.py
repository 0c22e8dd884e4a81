# Load the compiled extensions by file, after torch (which they link against), without running
# their packages' __init__. A library, not a probe: the imports probe calls load_extensions() after
# its imports, in the same process, so torch is already loaded there (a process of its own spent
# ~3 s of CPU re-importing torch, on 2 cores in parallel with the other deep probes).
import ctypes
import importlib.machinery
import importlib.util
import os
import sys

# name -> (top-level package, file stem inside it or None for a top-level module, how it loads).
# xformers._C is a torch op library (torch.ops.load_library), not a Python module: dlopen it.
targets = {
    "flash_attn_2_cuda": ("flash_attn_2_cuda", None, "module"),
    "xformers._C": ("xformers", "_C", "library"),
    "vllm._C": ("vllm", "_C", "module"),
}

def find_extension(top, sub):
    if sub is None:
        spec = importlib.util.find_spec(top)
        return spec.origin if spec else None
    for base in sys.path:
        pkg = os.path.join(base or ".", top)
        if os.path.isdir(pkg):
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                cand = os.path.join(pkg, sub + suffix)
                if os.path.exists(cand):
                    return cand
            return None
    return None


def load_extensions():
    """{name: {ok, present, path, + describe_exception()}} plus "_torch": whether torch imports.
    An extension already loaded by its package is not run twice: CPython hands back the module it
    initialised, and dlopen the handle it holds, so this reports the same outcome either way."""
    out = {}
    try:
        import torch  # noqa: F401  - the extensions need libtorch loaded first
        out["_torch"] = {"ok": True}
    except KeyboardInterrupt:  # Ctrl-C, TERM and HUP reach probes as SIGINT: stop now
        raise
    except BaseException as exc:
        out["_torch"] = dict(describe_exception(exc), ok=False)
    for name, (top, sub, kind) in targets.items():
        try:
            path = find_extension(top, sub)
        except KeyboardInterrupt:  # Ctrl-C, TERM and HUP reach probes as SIGINT: stop now
            raise
        except BaseException as exc:
            out[name] = dict(describe_exception(exc), ok=False, present=False)
            continue
        if not path:
            out[name] = {"ok": False, "present": False}
            continue
        try:
            if kind == "library":
                ctypes.CDLL(path)  # RTLD_NOW: unresolved symbols fail here, as in torch.ops.load_library
            else:
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                spec = importlib.util.spec_from_file_location(name, path, loader=loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
            out[name] = {"ok": True, "present": True, "path": path}
        except KeyboardInterrupt:  # Ctrl-C, TERM and HUP reach probes as SIGINT: stop now
            raise
        except BaseException as exc:
            out[name] = dict(describe_exception(exc), ok=False, present=True, path=path)

    return out
