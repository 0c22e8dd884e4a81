# Runs INSIDE the target interpreter (prepended with probes/scripts/_prelude.py and verl_config.py): compose verl's own
# Hydra config with the given overrides exactly as verl.trainer.main_ppo does
# (@hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)), from the
# installed verl package's config dir, without importing verl itself (that would load torch).
# argv[1]: JSON {"overrides": [...], "readers": {"key": ["regex", ...]}}.
# Reports: verl version, config dir, every override Hydra refused (with its message; composition is
# retried without it so that every unknown key is found, not only the first), the composed config,
# its flattened key set, and, for each key in "readers", the verl source lines that read it.
import importlib.metadata as _md
import re as _re

_req = _json.loads(_sys.argv[1])
_out = {"verl": None, "hydra": None, "config_dir": None, "rejected": [], "config": None, "keys": [],
        "readers": {}, "error": None}
try:
    _out["verl"], _cfg_dir = verl_config_dir()
except ImportError as exc:
    _out["error"] = str(exc)
    emit(_out)
    _sys.exit(0)
_verl_dir = _os.path.dirname(_os.path.dirname(_cfg_dir))
_out["config_dir"] = _cfg_dir
if not _os.path.isfile(_os.path.join(_cfg_dir, "ppo_trainer.yaml")):
    _out["error"] = "the installed verl has no trainer/config/ppo_trainer.yaml"
    emit(_out)
    _sys.exit(0)
try:
    import hydra as _hydra  # noqa: F401 - importable, or the error says so before any composition
    from omegaconf import OmegaConf as _OC
    _out["hydra"] = _md.version("hydra-core")
except Exception as exc:
    _out["error"] = "cannot import hydra/omegaconf in the target: " + describe_exception(exc)["message"]
    emit(_out)
    _sys.exit(0)


def _bad_override(msg, overrides):
    # Hydra names the failing override in its message: "Could not override 'a.b'" /
    # "Could not append to config. An item is already at 'a.b'" / "Key 'x' is not in struct".
    m = _re.search(r"override '([^']+)'", msg) or _re.search(r"already at '([^']+)'", msg) \
        or _re.search(r"full_key: ([^\s]+)", msg)
    if m:
        key = m.group(1)
        for o in overrides:
            k = o.split("=", 1)[0].lstrip("+~")
            if k == key:
                return o, key
    for o in overrides:  # fallback: the override text appears in the message
        if o in msg or o.split("=", 1)[0] in msg:
            return o, o.split("=", 1)[0].lstrip("+~")
    return None, None


_overrides = list(_req["overrides"])
_cfg = None
for _attempt in range(len(_overrides) + 1):
    try:
        _cfg = compose_ppo_trainer(_cfg_dir, _overrides)
        break
    except Exception as exc:
        msg = " ".join(str(exc).split())
        if getattr(exc, "__cause__", None) is not None:
            msg = msg + " | " + " ".join(str(exc.__cause__).split())
        o, key = _bad_override(msg, _overrides)
        if o is None:
            _out["error"] = type(exc).__name__ + ": " + msg
            break
        _out["rejected"].append({"override": o, "key": key, "type": type(exc).__name__, "message": msg})
        _overrides.remove(o)

if _cfg is not None:
    try:
        _out["config"] = _OC.to_container(_cfg, resolve=True)
        _out["resolved"] = True
    except Exception as exc:
        _out["config"] = _OC.to_container(_cfg, resolve=False)
        _out["resolved"] = False
        _out["resolve_error"] = str(exc).splitlines()[0]

    def _flat(d, prefix=""):
        for k, v in d.items():
            p = prefix + str(k)
            if isinstance(v, dict) and v:
                yield p
                yield from _flat(v, p + ".")
            else:
                yield p
    _out["keys"] = sorted(_flat(_out["config"]))

# Who reads each key in the installed verl's code (outside the YAML, vendored vLLM and tests).
_readers = _req.get("readers") or {}
if _readers:
    _pats = {k: [_re.compile(p) for p in ps] for k, ps in _readers.items()}
    _found = {k: [] for k in _readers}
    for _root, _dirs, _files in _os.walk(_verl_dir):
        _dirs[:] = [d for d in _dirs if d not in ("third_party", "__pycache__", "tests")]
        for _f in _files:
            if not _f.endswith(".py"):
                continue
            _p = _os.path.join(_root, _f)
            try:
                with open(_p, encoding="utf-8", errors="replace") as _fh:
                    for _n, _line in enumerate(_fh, 1):
                        for k, ps in _pats.items():
                            if any(p.search(_line) for p in ps):
                                _found[k].append(_os.path.relpath(_p, _os.path.dirname(_verl_dir)) + ":" + str(_n)
                                                 + ": " + _line.strip()[:160])
            except OSError:
                pass
    _out["readers"] = _found
emit(_out)
