"""Build doctor/knowledge/api_history/<dist>.json: how the public Python API of key ML libraries changed.

For each distribution and each final release in its window, the release's archive is fetched with
`pip download --no-deps` (a wheel where one is pure Python or small, else the sdist) into a cache under
/tmp/api_history_cache (reused between runs), opened as a zip or tar WITHOUT installing or importing it,
and every .py file of the package is parsed with `ast`. Per release it records

  modules  every module of the package (`pkg/sub/__init__.py` is module `pkg.sub`)
  names    per module, what `from module import name` finds: top-level def/class/assignments/imports
           (also under top-level if/try/with), `from x import *` of same-dist modules (their __all__ or
           public names), transformers' lazy `_import_structure` (and huggingface_hub's `_SUBMOD_ATTRS`,
           vllm's `MODULE_ATTRS`), and for package __init__s calling define_import_structure/_LazyModule
           the `__all__` of their direct submodules. Names starting with `_` are skipped.
  kwargs   per callable `module.Qualname` (functions, methods; `module.Class` = its constructor): the
           parameters that can be passed by keyword; `"*"` when it takes **kwargs. A class without an
           __init__ of its own takes its constructor from @dataclass / attrs / pydantic fields (plus those
           of same-dist base classes) or from its first base; a base outside the distribution makes the
           set open (`"*"`).
  attrs    per class: methods, class-level assignments/fields, `self.X = ...` targets of its methods,
           plus those of same-dist bases.

and writes, per dist, only what changed across the window (see doctor/knowledge/api_history/README.md).

Standard library + `packaging` only:

    .venv/bin/python benchmarks/build_api_history.py [--dists accelerate,peft] [--jobs 3]
"""

from __future__ import annotations

import argparse
import ast
import builtins
import concurrent.futures
import datetime
import gzip
import hashlib
import json
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path
from types import SimpleNamespace

from packaging.utils import parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

CACHE = Path("/tmp/api_history_cache")
OUT_DIR = Path(__file__).resolve().parent.parent / "doctor" / "knowledge" / "api_history"
FACTS_VERSION = 4  # bump when the extraction changes: cached per-release facts are recomputed
MAX_BYTES = 2_750_000  # keep each file well under 3 MB
WHEEL_FALLBACK_MAX = 150 << 20  # a release without an sdist: its wheel, if no bigger than this

# dist, top-level packages, first release of the window, archive kind, releases per window
#   kind: "wheel" = pip download --only-binary (sdist if a release has no wheel);
#         "sdist" = pip download --no-binary :all:, falling back to the index's file URL (sha256-checked)
#                   when pip cannot prepare the sdist's metadata;
#         "sdist-url" = the sdist from the index's file URL directly (pip download of it needs its build
#                   dependencies, e.g. torch/CUDA for vllm).
#   per: "all" = every final release; "minor" = the latest patch of each minor.
DISTS = [
    ("transformers", ["transformers"], "4.30", "wheel", "minor"),
    ("accelerate", ["accelerate"], "0.20", "wheel", "all"),
    ("peft", ["peft"], "0.4", "wheel", "all"),
    ("trl", ["trl"], "0.7", "wheel", "all"),
    ("huggingface-hub", ["huggingface_hub"], "0.16", "wheel", "all"),
    ("datasets", ["datasets"], "2.12", "wheel", "all"),
    ("bitsandbytes", ["bitsandbytes"], "0.41", "wheel", "minor"),
    ("deepspeed", ["deepspeed"], "0.10", "sdist", "all"),
    ("vllm", ["vllm"], "0.4.0", "sdist-url", "all"),
]

PIP = [sys.executable, "-m", "pip"]


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- index
def index_url() -> str:
    try:
        out = subprocess.run(PIP + ["config", "get", "global.index-url"], capture_output=True, text=True, timeout=60)
        url = out.stdout.strip()
        if out.returncode == 0 and url.startswith("http"):
            return url.rstrip("/")
    except Exception:
        pass
    return "https://pypi.org/simple"


def project_files(dist: str) -> dict:
    """The PyPI simple JSON API (PEP 691) page of `dist`, cached for the day."""
    path = CACHE / "index" / f"{dist}-{datetime.date.today().isoformat()}.json"
    if path.exists():
        return json.loads(path.read_text())
    req = urllib.request.Request(f"{index_url()}/{dist}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    for attempt in range(4):
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                data = json.load(r)
            break
        except Exception as e:  # pragma: no cover - network
            log("index retry", dist, e)
            time.sleep(5 * (attempt + 1))
    else:
        raise RuntimeError(f"cannot read the index page of {dist}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return data


def file_version(fn: str):
    try:
        if fn.endswith(".whl"):
            return "wheel", parse_wheel_filename(fn)[1]
        if fn.endswith((".tar.gz", ".zip")):
            return "sdist", parse_sdist_filename(fn)[1]
    except Exception:
        return None, None
    return None, None


def releases(dist: str, start: str, per: str) -> tuple[list[str], dict]:
    """Final, non-yanked releases >= start (ascending) and the files of each."""
    data = project_files(dist)
    files: dict[Version, list[dict]] = {}
    for f in data["files"]:
        kind, v = file_version(f["filename"])
        if kind:
            f = dict(f, kind=kind)
            files.setdefault(v, []).append(f)
    vs = []
    for v, fs in files.items():
        if v.is_prerelease or v.is_devrelease or v < Version(start):
            continue
        if all(f.get("yanked") for f in fs):
            continue
        vs.append(v)
    vs.sort()
    if per == "minor":
        best: dict = {}
        for v in vs:
            best[(v.major, v.minor)] = v
        vs = sorted(best.values())
    by_str = {str(v): [f for f in files[v] if not f.get("yanked")] for v in vs}
    return [str(v) for v in vs], by_str


# -------------------------------------------------------------------------------------------- download
def fetch_url(f: dict, dest: Path) -> Path:
    target = dest / f["filename"]
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == f["hashes"].get("sha256"):
        return target
    tmp = target.with_suffix(".part")
    with urllib.request.urlopen(f["url"], timeout=600) as r, open(tmp, "wb") as out:
        while chunk := r.read(1 << 20):
            out.write(chunk)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    if digest != f["hashes"].get("sha256"):
        tmp.unlink()
        raise RuntimeError(f"sha256 mismatch for {f['filename']}")
    tmp.rename(target)
    return target


def download(dist: str, version: str, kind: str, vfiles: list[dict]) -> tuple[Path, str]:
    """Returns (archive path, how it was fetched)."""
    dest = CACHE / dist / version
    dest.mkdir(parents=True, exist_ok=True)
    existing = [p for p in dest.iterdir() if p.suffix in (".whl", ".gz", ".zip") and not p.name.endswith(".part")]
    if existing:
        p = existing[0]
        return p, ("wheel" if p.suffix == ".whl" else "sdist")
    has_wheel = any(f["kind"] == "wheel" for f in vfiles)
    want = "wheel" if kind == "wheel" and has_wheel else "sdist"
    if kind != "sdist-url":
        flag = ["--only-binary", ":all:"] if want == "wheel" else ["--no-binary", ":all:"]
        cmd = PIP + ["download", "--no-deps", "-q", *flag, f"{dist}=={version}", "-d", str(dest)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            ok = r.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        got = [p for p in dest.iterdir() if p.suffix in (".whl", ".gz", ".zip")]
        if ok and got:
            return got[0], want
        if want == "wheel":
            raise RuntimeError(f"pip download failed for {dist}=={version}: {r.stderr[-500:]}")
    sd = [f for f in vfiles if f["kind"] == "sdist"]
    if not sd:
        sizes = [f.get("size") or 0 for f in vfiles if f["kind"] == "wheel"]
        if sizes and min(sizes) <= WHEEL_FALLBACK_MAX:
            cmd = PIP + ["download", "--no-deps", "-q", "--only-binary", ":all:", f"{dist}=={version}", "-d", str(dest)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            got = [p for p in dest.iterdir() if p.suffix == ".whl"]
            if r.returncode == 0 and got:
                return got[0], "wheel"
        raise RuntimeError(f"no sdist for {dist}=={version} (and no wheel under {WHEEL_FALLBACK_MAX >> 20} MiB)")
    return fetch_url(sd[0], dest), "sdist-url"


def iter_sources(archive: Path, pkgs: list[str]):
    """Yields (module, is_package, source) for every .py file of the packages in the archive."""

    def module_of(name: str):
        parts = name.split("/")
        if not parts[-1].endswith(".py"):
            return None
        for i in range(0, 3):
            if i < len(parts) and parts[i] in pkgs:
                pre = parts[:i]
                if i == 0 or (i == 1 and archive.suffix != ".whl") or (i == 2 and pre[1] == "src"):
                    break
        else:
            return None
        comps = parts[i:-1] + [parts[-1][:-3]]
        is_pkg = comps[-1] == "__init__"
        if is_pkg:
            comps = comps[:-1]
        if not all(c.isidentifier() for c in comps):
            return None
        return ".".join(comps), is_pkg

    if archive.suffix == ".whl" or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            for n in z.namelist():
                m = module_of(n)
                if m:
                    yield m[0], m[1], z.read(n)
    else:
        with tarfile.open(archive) as t:
            for mem in t:
                if not mem.isfile():
                    continue
                m = module_of(mem.name)
                if m:
                    fh = t.extractfile(mem)
                    if fh:
                        yield m[0], m[1], fh.read()


# --------------------------------------------------------------------------------------------- extract
def flat(stmts):
    """Statements of a block, descending into if/try/with blocks (they run at import time)."""
    for s in stmts:
        yield s
        if isinstance(s, ast.If):
            yield from flat(s.body)
            yield from flat(s.orelse)
        elif isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            yield from flat(s.body)
            for h in s.handlers:
                yield from flat(h.body)
            yield from flat(s.orelse)
            yield from flat(s.finalbody)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            yield from flat(s.body)


def target_names(t):
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in target_names(e)]
    if isinstance(t, ast.Starred):
        return target_names(t.value)
    return []


def dotted(e):
    """'a.b.C' for Name/Attribute chains (Subscript unwrapped), else None."""
    if isinstance(e, ast.Subscript):
        e = e.value
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        parts.append(e.id)
        return ".".join(reversed(parts))
    return None


def strings(e):
    if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
        return [x.value for x in e.elts if isinstance(x, ast.Constant) and isinstance(x.value, str)]
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return [e.value]
    return []


def deco_names(node):
    out = []
    for d in node.decorator_list:
        if isinstance(d, ast.Call):
            d = d.func
        n = dotted(d)
        if n:
            out.append(n)
    return out


DC_DECOS = {"dataclass", "dataclasses.dataclass", "pydantic.dataclasses.dataclass", "attr.s", "attr.attrs", "attrs",
            "attr.define", "attrs.define", "define", "attr.frozen", "attrs.frozen", "frozen", "attr.mutable",
            "attrs.mutable", "mutable"}
FIELD_MARKER_BASES = {"BaseModel", "BaseSettings", "RootModel", "NamedTuple", "TypedDict"}
TRANSPARENT = {"object", "ABC", "abc.ABC", "Generic", "typing.Generic", "Protocol", "typing.Protocol"}


def is_dc(node) -> bool:
    for n in deco_names(node):
        if n in DC_DECOS or n.endswith(".dataclass"):
            return True
    return False


def params(fn, method: bool):
    """Parameters that can be passed by keyword (positional-only ones and self/cls excluded); '*' = **kwargs."""
    a = fn.args
    static = any(d.endswith("staticmethod") for d in deco_names(fn))
    drop = 1 if method and not static else 0
    args = a.args[max(0, drop - len(a.posonlyargs)):]
    ps = [x.arg for x in args] + [x.arg for x in a.kwonlyargs]
    if a.kwarg:
        ps.append("*")
    return ps


def field_excluded(stmt) -> bool:
    ann = ast.unparse(stmt.annotation) if isinstance(stmt, ast.AnnAssign) else ""
    if "ClassVar" in ann or ann in ("KW_ONLY", "dataclasses.KW_ONLY"):
        return True
    v = stmt.value
    if isinstance(v, ast.Call):
        for kw in v.keywords:
            if kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                return True
    return False


class ModuleScan:
    def __init__(self, mod: str, is_pkg: bool, tree: ast.Module):
        self.mod, self.is_pkg = mod, is_pkg
        self.names: set[str] = set()
        self.bind: dict[str, tuple] = {}
        self.stars: list[str] = []
        self.all: list[str] | None = None
        self.struct: dict[str, set[str]] = {}
        self.lazy = False
        self.lazy_dirs: list[str] = []
        self.funcs: dict[str, set[str]] = {}
        self.classes: dict[str, dict] = {}
        self.scan(tree)

    def absmod(self, level: int, module: str | None) -> str:
        if level == 0:
            return module or ""
        base = self.mod.split(".") if self.is_pkg else self.mod.split(".")[:-1]
        if level > 1:
            base = base[: max(0, len(base) - (level - 1))]
        return ".".join(base + ([module] if module else []))

    def add(self, name: str, how: tuple):
        self.names.add(name)
        self.bind[name] = how

    def scan(self, tree):
        for s in flat(tree.body):
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.add(s.name, ("local", "def"))
                q = f"{self.mod}.{s.name}"
                if "overload" in " ".join(deco_names(s)) and q in self.funcs:
                    continue
                self.funcs.setdefault(q, set()).update(params(s, False))
            elif isinstance(s, ast.ClassDef):
                self.add(s.name, ("local", "class"))
                self.scan_class(s, f"{self.mod}.{s.name}")
            elif isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    for n in target_names(t):
                        self.add(n, ("local", "var"))
                    self.assign_special(t, s)
            elif isinstance(s, ast.Import):
                for a in s.names:
                    if a.asname:
                        self.add(a.asname, ("mod", a.name))
                    else:
                        top = a.name.split(".")[0]
                        self.add(top, ("mod", top))
            elif isinstance(s, ast.ImportFrom):
                src = self.absmod(s.level, s.module)
                for a in s.names:
                    if a.name == "*":
                        self.stars.append(src)
                    else:
                        self.add(a.asname or a.name, ("from", src, a.name))
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                f = s.value.func
                if isinstance(f, ast.Attribute) and f.attr in ("extend", "append") and s.value.args:
                    owner = f.value
                    vals = strings(s.value.args[0])
                    if isinstance(owner, ast.Name) and owner.id == "__all__":
                        self.all = (self.all or []) + vals
                    elif isinstance(owner, ast.Subscript):
                        key = self.struct_key(owner)
                        if key is not None:
                            self.struct.setdefault(key, set()).update(vals)
            for node in ast.walk(s) if isinstance(s, (ast.Assign, ast.Expr)) else ():
                if isinstance(node, ast.Call):
                    n = dotted(node.func) or ""
                    if n.endswith("define_import_structure") or n.endswith("_LazyModule"):
                        self.lazy = True
                    if n.endswith("define_import_structure"):
                        # define_import_structure(Path(__file__).parent / "models", prefix="models")
                        for a in list(node.args) + [k.value for k in node.keywords]:
                            for c in ast.walk(a):
                                if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.isidentifier():
                                    if c.value not in self.lazy_dirs:
                                        self.lazy_dirs.append(c.value)

    def struct_key(self, sub):
        if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id in (
                "_import_structure", "_SUBMOD_ATTRS"):
            k = sub.slice
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                return k.value
        return None

    def assign_special(self, t, s):
        v = s.value
        if v is None:
            return
        if isinstance(t, ast.Name):
            if t.id == "__all__":
                vals = strings(v)
                if isinstance(s, ast.AugAssign):
                    self.all = (self.all or []) + vals
                elif vals or isinstance(v, (ast.List, ast.Tuple)):
                    self.all = vals
            elif t.id in ("_import_structure", "_SUBMOD_ATTRS") and isinstance(v, ast.Dict):
                for k, val in zip(v.keys, v.values):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        self.struct.setdefault(k.value, set()).update(strings(val))
            elif t.id == "MODULE_ATTRS" and isinstance(v, ast.Dict):
                for k in v.keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        self.names.add(k.value)
        else:
            key = self.struct_key(t)
            if key is not None:
                self.struct.setdefault(key, set()).update(strings(v))

    def scan_class(self, node: ast.ClassDef, qual: str):
        own_init = None
        fields: list[str] = []
        attrs: set[str] = set()
        dc = is_dc(node)
        bases = []
        for b in node.bases:
            n = dotted(b)
            bases.append(n or "?")
            if n and n.split(".")[-1] in FIELD_MARKER_BASES:
                dc = True
        attrs_s = any(n in ("attr.s", "attr.attrs", "attrs") for n in deco_names(node))
        for s in flat(node.body):
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                attrs.add(s.name)
                mq = f"{qual}.{s.name}"
                decos = deco_names(s)
                is_prop = any(d.endswith(("property", "setter", "getter", "deleter", "cached_property")) for d in decos)
                if s.name == "__init__":
                    own_init = (own_init or set()) | set(params(s, True))
                if not is_prop and not ("overload" in " ".join(decos) and mq in self.funcs):
                    self.funcs.setdefault(mq, set()).update(params(s, True))
                if not any(d.endswith("staticmethod") for d in decos):
                    a = s.args.posonlyargs + s.args.args
                    if a:
                        me = a[0].arg
                        for sub in ast.walk(s):
                            ts = []
                            if isinstance(sub, ast.Assign):
                                ts = sub.targets
                            elif isinstance(sub, (ast.AnnAssign, ast.AugAssign)):
                                ts = [sub.target]
                            for t in ts:
                                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == me:
                                        attrs.add(e.attr)
            elif isinstance(s, ast.ClassDef):
                attrs.add(s.name)
                self.scan_class(s, f"{qual}.{s.name}")
            elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                attrs.add(s.target.id)
                if not field_excluded(s):
                    fields.append(s.target.id)
            elif isinstance(s, ast.Assign):
                for t in s.targets:
                    for n in target_names(t):
                        attrs.add(n)
                        if attrs_s and isinstance(s.value, ast.Call) and (dotted(s.value.func) or "").split(".")[-1] in (
                                "ib", "attrib", "field") and not field_excluded(s):
                            fields.append(n.lstrip("_"))
        self.classes[qual] = {
            "init": sorted(own_init) if own_init is not None else None,
            "dc": dc, "fields": fields, "bases": bases, "attrs": sorted(attrs), "mod": self.mod,
        }


BUILTIN_EXC = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
               and issubclass(getattr(builtins, n), BaseException)}


def scan_release(dist: str, version: str, kind: str, vfiles: list[dict], pkgs: list[str]) -> dict:
    """The raw per-module scans of one release (cached as gzip JSON next to the archive)."""
    cache = CACHE / dist / version / f"scan-v{FACTS_VERSION}.json.gz"
    if cache.exists():
        return json.loads(gzip.decompress(cache.read_bytes()))
    archive, how = download(dist, version, kind, vfiles)
    mods = {}
    failed = []
    for mod, is_pkg, src in iter_sources(archive, pkgs):
        try:
            tree = ast.parse(src.decode("utf-8", "replace"))
        except (SyntaxError, ValueError):
            failed.append(mod)
            continue
        m = ModuleScan(mod, is_pkg, tree)
        mods[mod] = {"is_pkg": is_pkg, "names": sorted(m.names), "bind": m.bind, "stars": m.stars, "all": m.all,
                     "struct": {k: sorted(v) for k, v in m.struct.items()}, "lazy": m.lazy, "lazy_dirs": m.lazy_dirs,
                     "funcs": {q: sorted(v) for q, v in m.funcs.items()}, "classes": m.classes}
    raw = {"archive": archive.name, "how": how, "failed": sorted(failed), "modules": mods}
    cache.write_bytes(gzip.compress(json.dumps(raw, sort_keys=True).encode(), 6))
    return raw


def extract(dist: str, version: str, kind: str, vfiles: list[dict], pkgs: list[str]) -> dict:
    """Per-release facts: scan (cached) + resolution of star imports, lazy structures and base classes."""
    raw = scan_release(dist, version, kind, vfiles, pkgs)
    scans = {}
    for mod, d in raw["modules"].items():
        ns = SimpleNamespace(**d)
        ns.mod = mod
        ns.bind = {k: tuple(v) for k, v in d["bind"].items()}
        ns.struct = {k: set(v) for k, v in d["struct"].items()}
        ns.lazy_dirs = d.get("lazy_dirs", [])
        scans[mod] = ns
    facts = resolve(scans, pkgs)
    facts.update(archive=raw["archive"], how=raw["how"], failed=raw["failed"])
    return facts


def resolve(scans: dict[str, ModuleScan], pkgs: list[str]) -> dict:
    def in_dist(m: str) -> bool:
        return m.split(".")[0] in pkgs

    # names: own names + lazy structures + star imports (fixpoint) + define_import_structure submodules
    names = {m: set(s.names) for m, s in scans.items()}
    children: dict[str, list[str]] = {}
    for m in scans:
        if "." in m:
            children.setdefault(m.rsplit(".", 1)[0], []).append(m)
    for m, s in scans.items():
        for key, vals in s.struct.items():
            names[m].update(vals)
        if s.lazy and s.is_pkg:
            for c in children.get(m, []):
                if scans[c].all:
                    names[m].update(scans[c].all)
        for d in s.lazy_dirs:  # a lazy structure built from a whole subtree: every __all__ in it
            sub = f"{m}.{d}"
            for c, cs in scans.items():
                if (c == sub or c.startswith(sub + ".")) and cs.all:
                    names[m].update(cs.all)

    def exported(m):
        s = scans[m]
        return set(s.all) if s.all is not None else {n for n in names[m] if not n.startswith("_")}

    for _ in range(12):
        changed = False
        for m, s in scans.items():
            for src in s.stars:
                if src in scans and src != m:
                    new = exported(src) - names[m]
                    if new:
                        names[m] |= new
                        changed = True
        if not changed:
            break

    # classes by simple name, for the last-resort base resolution
    by_simple: dict[str, list[str]] = {}
    classes = {}
    for s in scans.values():
        classes.update(s.classes)
    for q in classes:
        by_simple.setdefault(q.rsplit(".", 1)[1], []).append(q)

    def export_of(m: str, name: str, depth=0):
        """Class qualname that `from m import name` gives, '!open' for outside the dist, None if unknown."""
        if depth > 10 or m not in scans:
            return None
        q = f"{m}.{name}"
        if q in classes:
            return q
        s = scans[m]
        b = s.bind.get(name)
        if b and b[0] == "from":
            if not in_dist(b[1]):
                return "!open"
            r = export_of(b[1], b[2], depth + 1)
            if r:
                return r
        for key, vals in s.struct.items():
            if name in vals:
                r = export_of(f"{m}.{key}", name, depth + 1)
                if r:
                    return r
        for src in s.stars:
            if in_dist(src):
                r = export_of(src, name, depth + 1)
                if r:
                    return r
        return None

    def resolve_base(mod: str, qual: str, text: str):
        parts = text.split(".")
        last = parts[-1]
        if last in FIELD_MARKER_BASES or text in TRANSPARENT or last in ("ABC", "Generic", "Protocol"):
            return "!transparent"
        head = parts[0]
        s = scans[mod]
        # nested class of the same scope / local class of the module
        outer = qual.rsplit(".", 1)[0]
        for scope in (outer, mod):
            q = f"{scope}.{text}"
            if q in classes and q != qual:
                return q
        b = s.bind.get(head)
        if b:
            if b[0] == "local":
                return None
            if b[0] == "from":
                if not in_dist(b[1]):
                    return "!open"
                if len(parts) == 1:
                    return export_of(b[1], b[2]) or by_name(last)
                target = f"{b[1]}.{b[2]}"
            else:
                if not in_dist(b[1]):
                    return "!open"
                target = b[1]
            if len(parts) == 1:
                return by_name(last)
            modpath = ".".join([target] + parts[1:-1])
            return export_of(modpath, last) or by_name(last)
        for src in s.stars:
            if in_dist(src):
                r = export_of(src, head)
                if r:
                    return r
        if len(parts) == 1 and head in BUILTIN_EXC:
            return "!exc"
        if len(parts) == 1 and hasattr(builtins, head):
            return "!open"
        return by_name(last) if s.stars else "!open"

    def by_name(last):
        c = by_simple.get(last, [])
        return c[0] if len(c) == 1 else "!open"

    rbases = {}
    for q, c in classes.items():
        rbases[q] = [resolve_base(c["mod"], q, t) or "!open" for t in c["bases"]]

    memo_ctor, memo_fields, memo_attrs = {}, {}, {}

    def fields_all(q, seen):
        """Dataclass-style fields: own (if the class is a dataclass/attrs/pydantic one) + those of its bases."""
        if q in memo_fields:
            return memo_fields[q]
        if q in seen:
            return set()
        seen = seen | {q}
        c = classes[q]
        out = set(c["fields"]) if c["dc"] else set()
        for b in rbases[q]:
            if b in classes:
                out |= fields_all(b, seen)
            elif b == "!open":
                out.add("*")
        memo_fields[q] = out
        return out

    def ctor(q, seen=frozenset()):
        if q in memo_ctor:
            return memo_ctor[q]
        if q in seen:
            return {"*"}
        seen = seen | {q}
        c = classes[q]
        if c["init"] is not None:
            out = set(c["init"])
        elif c["dc"]:
            out = fields_all(q, frozenset())
        else:
            out = set()
            for b in rbases[q]:
                if b == "!transparent":
                    continue
                if b == "!exc":
                    break
                if b == "!open":
                    out = {"*"}
                    break
                out = set(ctor(b, seen))
                break
        memo_ctor[q] = out
        return out

    def attrs_all(q, seen=frozenset()):
        if q in memo_attrs:
            return memo_attrs[q]
        if q in seen:
            return set()
        seen = seen | {q}
        out = set(classes[q]["attrs"])
        for b in rbases[q]:
            if b in classes:
                out |= attrs_all(b, seen)
        memo_attrs[q] = out
        return out

    imported = {}
    for m, s in scans.items():
        if not s.is_pkg:
            imp = {n for n in names[m] if not n.startswith("_") and (s.bind.get(n, ("star",))[0] != "local")}
            if imp:
                imported[m] = sorted(imp)

    kwargs = {q: sorted(p) for s in scans.values() for q, p in s.funcs.items()}
    for q in classes:
        kwargs[q] = sorted(ctor(q))
    return {
        "modules": sorted(scans),
        "names": {m: sorted(n for n in ns if not n.startswith("_")) for m, ns in names.items()},
        "kwargs": kwargs,
        "attrs": {q: sorted(attrs_all(q)) for q in classes},
        "imported": imported,
    }


# ------------------------------------------------------------------------------------------- aggregate
def ranges(mask: int, n: int) -> list[list[int]]:
    out, i = [], 0
    while i < n:
        if mask >> i & 1:
            j = i
            while j + 1 < n and mask >> (j + 1) & 1:
                j += 1
            out.append([i, j])
            i = j + 1
        else:
            i += 1
    return out


# Size cuts, applied in this order until a file fits under MAX_BYTES; each is (what, module prefix) and is
# named in "source". Only transformers and vllm need them.
CUT_TEXT = {
    "attrs": "attrs of classes under {p}* dropped",
    "open-kwargs": "kwargs of callables under {p}* that take **kwargs in every release they exist in dropped "
                   "(they never raise 'unexpected keyword argument')",
    "imported-names": "names of non-package modules under {p}* that are bound by an import there (not defined "
                      "there) in some release dropped",
    "private-attrs": "attrs starting with '_' of classes under {p}* dropped",
    "method-kwargs": "kwargs of methods under {p}* other than forward dropped (constructors and module-level "
                     "functions kept)",
    "forward-kwargs": "kwargs of forward methods under {p}* dropped",
    "private-kwargs": "kwargs of callables under {p}* whose own name starts with '_' (not dunders) dropped",
}
CUTS = {
    "transformers": [("attrs", "transformers.models."), ("open-kwargs", "transformers.models."),
                     ("imported-names", "transformers.models."), ("method-kwargs", "transformers.models."),
                     ("forward-kwargs", "transformers.models."), ("imported-names", "transformers."),
                     ("private-kwargs", "transformers.")],
    "vllm": [("attrs", "vllm.model_executor.models."), ("open-kwargs", "vllm.model_executor.models."),
             ("imported-names", "vllm.model_executor.models."), ("open-kwargs", "vllm."),
             ("imported-names", "vllm."), ("private-attrs", "vllm."), ("method-kwargs", "vllm.model_executor.models."),
             ("forward-kwargs", "vllm.model_executor.models."), ("attrs", "vllm.model_executor.layers."),
             ("private-kwargs", "vllm."), ("method-kwargs", "vllm.model_executor."), ("attrs", "vllm.v1.attention."),
             ("method-kwargs", "vllm.v1.attention."), ("attrs", "vllm.distributed.kv_transfer."),
             ("method-kwargs", "vllm.distributed.kv_transfer."), ("attrs", "vllm.v1.worker.")],
}


class Masks:
    """Presence bit masks (bit i = releases[i]) of everything, over all releases of a dist."""

    def __init__(self, all_facts: list[dict]):
        self.n = len(all_facts)
        self.mods, self.names, self.calls, self.kws, self.cls, self.attrs = {}, {}, {}, {}, {}, {}
        self.imported: set[tuple[str, str]] = set()
        for i, f in enumerate(all_facts):
            bit = 1 << i
            for m in f["modules"]:
                self.mods[m] = self.mods.get(m, 0) | bit
            for m, ns in f["names"].items():
                d = self.names.setdefault(m, {})
                for x in ns:
                    d[x] = d.get(x, 0) | bit
            for m, ns in f.get("imported", {}).items():
                self.imported.update((m, x) for x in ns)
            for q, as_ in f["attrs"].items():
                self.cls[q] = self.cls.get(q, 0) | bit
                d = self.attrs.setdefault(q, {})
                for a in as_:
                    if not (a.startswith("__") and a.endswith("__")):
                        d[a] = d.get(a, 0) | bit
            for q, ps in f["kwargs"].items():
                # `C.__init__` is the same parameter list as the constructor entry `C`
                if q.endswith(".__init__") and q[: -len(".__init__")] in f["attrs"]:
                    continue
                self.calls[q] = self.calls.get(q, 0) | bit
                d = self.kws.setdefault(q, {})
                for p in ps:
                    d[p] = d.get(p, 0) | bit


def aggregate(dist: str, vers: list[str], mk: Masks, source: str, cuts=()) -> dict:
    def cut(key, q):
        return any(k == key and q.startswith(p) for k, p in cuts)

    n = len(vers)
    full = (1 << n) - 1
    out = {"dist": dist, "generated": datetime.date.today().isoformat(), "source": source, "releases": vers,
           "modules": {m: ranges(k, n) for m, k in mk.mods.items() if k != full},
           "names": {}, "kwargs": {}, "callables": {}, "attrs": {}, "classes": {}}
    for m, d in mk.names.items():
        imp = cut("imported-names", m)
        e = {x: ranges(k, n) for x, k in d.items() if k != mk.mods[m] and not (imp and (m, x) in mk.imported)}
        if e:
            out["names"][m] = e
    for q, d in mk.kws.items():
        if cut("open-kwargs", q) and d.get("*") == mk.calls[q]:
            continue
        parent, last = q.rsplit(".", 1)
        if cut("private-kwargs", q) and last.startswith("_") and not last.endswith("__"):
            continue
        if parent in mk.cls and cut("method-kwargs", q) and last != "forward":
            continue
        if parent in mk.cls and cut("forward-kwargs", q) and last == "forward":
            continue
        var = {p: k for p, k in d.items() if k != mk.calls[q]}
        if var:
            if "*" in d:
                var["*"] = d["*"]
            out["kwargs"][q] = {p: ranges(k, n) for p, k in var.items()}
            out["callables"][q] = ranges(mk.calls[q], n)
    for q, d in mk.attrs.items():
        if cut("attrs", q):
            continue
        priv = cut("private-attrs", q)
        e = {a: ranges(k, n) for a, k in d.items() if k != mk.cls[q] and not (priv and a.startswith("_"))}
        if e:
            out["attrs"][q] = e
            out["classes"][q] = ranges(mk.cls[q], n)
    return out


def build(dist, pkgs, start, kind, per, jobs) -> Path:
    vers, files = releases(dist, start, per)
    log(dist, len(vers), "releases", vers[0], "->", vers[-1])
    facts: dict[str, dict] = {}
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as ex:
        futs = {ex.submit(extract, dist, v, kind, files[v], pkgs): v for v in vers}
        for fut in concurrent.futures.as_completed(futs):
            v = futs[fut]
            try:
                facts[v] = fut.result()
                log(dist, v, facts[v]["how"], len(facts[v]["modules"]), "modules",
                    f"{len(facts[v]['failed'])} unparsable" if facts[v]["failed"] else "")
            except Exception as e:
                log("FAILED", dist, v, repr(e)[:300])
    done = [v for v in vers if v in facts]
    hows = {}
    for v in done:
        hows.setdefault(facts[v]["how"], []).append(v)
    unparsable = sorted({m for v in done for m in facts[v]["failed"]})
    parts = []
    for how, vs in sorted(hows.items()):
        label = {"wheel": "wheels (pip download --no-deps --only-binary :all:)",
                 "sdist": "sdists (pip download --no-deps --no-binary :all:)",
                 "sdist-url": "sdists fetched from the index's file URL, sha256-checked (pip download cannot "
                              "prepare their metadata without the build dependencies)"}[how]
        parts.append(f"{label} for {len(vs)} release(s)" + ("" if len(vs) == len(done) else f": {', '.join(vs)}"))
    window = f"every final release >= {start}" if per == "all" else f"the latest patch of each minor >= {start}"
    source = (f"benchmarks/build_api_history.py: {window} on the PyPI index (pre/dev/yanked skipped); "
              + "; ".join(parts) + "; every .py file of the package parsed with ast (nothing installed or imported)")
    if unparsable:
        source += f"; files ast could not parse were skipped: {', '.join(unparsable[:5])}" + (
            f" (+{len(unparsable) - 5})" if len(unparsable) > 5 else "")
    missing = [v for v in vers if v not in facts]
    if missing:
        source += (f"; releases in the window NOT examined (no sdist and the only wheels are over "
                   f"{WHEEL_FALLBACK_MAX >> 20} MiB, or the download failed): {', '.join(missing)}")
    mk = Masks([facts[v] for v in done])
    del facts
    plan = CUTS.get(dist, [])
    cuts: list[tuple[str, str]] = []
    while True:
        notes = "".join(f"; {CUT_TEXT[k].format(p=p)} (size)" for k, p in cuts)
        out = aggregate(dist, done, mk, source + notes, cuts)
        text = json.dumps(out, sort_keys=True, separators=(",", ":"))
        log(dist, "cuts", cuts, len(text), "bytes")
        if len(text) <= MAX_BYTES or len(cuts) == len(plan):
            break
        cuts.append(plan[len(cuts)])
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{dist}.json"
    path.write_text(text)
    log(dist, "wrote", path, len(text), "bytes")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dists", default="", help="comma-separated subset (default: all, in order)")
    ap.add_argument("--jobs", type=int, default=3)
    a = ap.parse_args()
    want = [d for d in a.dists.split(",") if d]
    for dist, pkgs, start, kind, per in DISTS:
        if want and dist not in want:
            continue
        build(dist, pkgs, start, kind, per, a.jobs)


if __name__ == "__main__":
    main()
