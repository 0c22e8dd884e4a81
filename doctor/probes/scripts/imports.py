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
# verl 0.1-0.4 import pkg_resources (setuptools 82 removed it): try it as they do, so that its ✓ is earned
try:
    import warnings as _warnings

    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        importlib.import_module("pkg_resources")
    checks["pkg_resources"] = {"ok": True}
except KeyboardInterrupt:
    raise
except BaseException as exc:
    checks["pkg_resources"] = {"ok": False, **describe_exception(exc)}
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
    # where vLLM keeps its tokenizer wrapper: 0.6.x transformers_utils/tokenizer.py, 0.1x+ tokenizers/hf.py;
    # a module that does not exist is the next place to look, one that fails to import is the finding
    get_cached_tokenizer = None
    found_error = None
    for _where in ("vllm.transformers_utils.tokenizer", "vllm.tokenizers.hf"):
        try:
            get_cached_tokenizer = getattr(importlib.import_module(_where), "get_cached_tokenizer", None)
        except KeyboardInterrupt:
            raise
        except ModuleNotFoundError as exc:
            if exc.name and _where.startswith(exc.name):
                continue
            found_error = exc
        except BaseException as exc:
            found_error = exc
        break
    if found_error is not None:
        info = describe_exception(found_error)
        info["ok"] = False
        checks["vllm_tokenizer"] = info
    elif get_cached_tokenizer is None:
        checks["vllm_tokenizer"] = {"skipped": "this vLLM keeps get_cached_tokenizer in none of the places the probe knows"}
    else:
        try:
            from tokenizers import Tokenizer, models
            from transformers import PreTrainedTokenizerFast

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

# The attention backend a setting selects (VLLM_ATTENTION_BACKEND) is only loaded when the engine
# starts; exercise that choice now, on CPU: vLLM's own parsing of the name (an unknown name raises
# with the list of valid ones), then the import of that backend's module, as the engine would.
backend_name = os.environ.get("VLLM_ATTENTION_BACKEND")
if backend_name and "vllm" in sys.modules:
    check = {"name": backend_name, "ok": True}
    try:
        selector = importlib.import_module("vllm.attention.selector")
        parse = getattr(selector, "get_env_variable_attn_backend", None)
        backend = parse() if parse is not None else None
        module = None
        get_path = getattr(backend, "get_path", None)
        if callable(get_path):  # newer vLLM: the enum knows its class ("pkg.mod.Class")
            module = get_path().rsplit(".", 1)[0]
        else:
            import importlib.util as _iu
            stem = {"FLASH_ATTN": "flash_attn", "ROCM_FLASH": "rocm_flash_attn", "IPEX": "ipex_attn",
                    "BLOCK_SPARSE_FLASH_ATTN": "blocksparse_attn"}.get(backend_name, backend_name.lower())
            for cand in ("vllm.attention.backends." + stem, "vllm.v1.attention.backends." + stem):
                try:
                    if _iu.find_spec(cand) is not None:
                        module = cand
                        break
                except ImportError:
                    continue
        check["module"] = module
        if module:
            # A backend module guards its kernel library with try/except ImportError (vLLM 0.6.3's
            # flashinfer.py sets the wrappers to None): record the modules no finder found while
            # it imports — the library the chosen backend needs and this env does not have.
            class _Misses:
                names = []

                def find_spec(self, name, path=None, target=None):
                    frame = sys._getframe(1)
                    while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
                        frame = frame.f_back
                    # only the backend module's own imports: a library it loads may probe for
                    # optional extras of its own (xformers for flash_attn) without needing them
                    if frame is not None and frame.f_globals.get("__name__") == module and "." not in name:
                        self.names.append(name)
                    return None

            misses = _Misses()
            sys.meta_path.append(misses)
            try:
                importlib.import_module(module)
            finally:
                sys.meta_path.remove(misses)
            missing = sorted({n.split(".")[0] for n in misses.names})
            if missing:
                check.update(ok=False, missing=missing)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        check = {"name": backend_name, "ok": False, **describe_exception(exc)}
    checks["attention_backend"] = check

# The compiled extensions (scripts/extensions.py, prepended to this script), by file: torch and
# whatever the imports above loaded are already in this process.
emit_and_exit({"modules": results, "checks": checks, "extensions": load_extensions()})
