# Real imports of the stack's modules, in order, in one process (as verl's main_ppo would load
# them), plus the functional checks an import alone does not reveal.
import importlib
import importlib.metadata as md
import os
import sys
import time

modules = sys.argv[1].split(",")
_top_to_dists = []  # packages_distributions() reads every RECORD: only when a failure needs it


def top_to_dists():
    if not _top_to_dists:
        try:
            _top_to_dists.append(md.packages_distributions())
        except Exception:
            _top_to_dists.append({})
    return _top_to_dists[0]

site_roots = sorted({os.path.dirname(p) for p in sys.path if p.endswith("site-packages")} | {p for p in sys.path if p.endswith("site-packages")}, key=len, reverse=True)  # noqa: E501


def dist_of_file(path):
    """The distribution that owns a traceback frame's file, by its top-level package."""
    for root in site_roots:
        if path.startswith(root + os.sep):
            top = path[len(root) + 1:].split(os.sep)[0]
            top = top[:-3] if top.endswith(".py") else top
            found = top_to_dists().get(top)
            if found:
                return found[0]
    return None


results = {}
for name in modules:
    t0 = time.perf_counter()
    try:
        mod = importlib.import_module(name)
        results[name] = {"ok": True, "seconds": round(time.perf_counter() - t0, 3),
                         "version": getattr(mod, "__version__", None) if "." not in name else None,
                         "file": getattr(mod, "__file__", None)}
    except KeyboardInterrupt:  # Ctrl-C, TERM and HUP reach probes as SIGINT: stop now
        raise
    except BaseException as exc:  # SystemExit and friends from a broken package count too
        info = describe_exception(exc)
        info["ok"] = False
        info["seconds"] = round(time.perf_counter() - t0, 3)
        owners = [d for d in (dist_of_file(c.rsplit(":", 1)[0]) for c in info["chain"]) if d]
        info["chain_dists"] = owners
        # The deepest frame outside the standard library is where the failure surfaced.
        info["failing_dist"] = owners[-1] if owners else None
        results[name] = info

checks = {}
torch = sys.modules.get("torch")
if torch is not None:
    try:
        checks["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda,
                           "cuda_available": bool(torch.cuda.is_available())}
    except Exception as exc:
        checks["torch"] = {"error": describe_exception(exc)}

# vLLM 0.6.3's tokenizer wrapper reads attributes transformers 5 removed; an import does not show
# it. Exercise it on a tiny in-memory tokenizer (nothing is downloaded).
if "vllm" in sys.modules and "transformers" in sys.modules:
    try:
        from tokenizers import Tokenizer, models
        from transformers import PreTrainedTokenizerFast
        from vllm.transformers_utils.tokenizer import get_cached_tokenizer

        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0, "a": 1}, unk_token="<unk>")),
                                      unk_token="<unk>")
        get_cached_tokenizer(tok)
        checks["vllm_tokenizer"] = {"ok": True}
    except KeyboardInterrupt:  # Ctrl-C, TERM and HUP reach probes as SIGINT: stop now
        raise
    except BaseException as exc:
        info = describe_exception(exc)
        info["ok"] = False
        checks["vllm_tokenizer"] = info

# The compiled extensions (scripts/extensions.py, prepended to this script), by file: torch and
# whatever the imports above loaded are already in this process.
emit_and_exit({"modules": results, "checks": checks, "extensions": load_extensions()})
