# Kernels probe (fatbin.py is prepended): which GPU architectures each compiled CUDA library of the
# stack carries code for, read from the files themselves (no import, no GPU). The libraries come
# from each distribution's RECORD, so a file the RECORD lists but the disk lacks is a fact too.
# argv: [JSON {dist: [glob, ...]}]
import fnmatch
import importlib.metadata as _md
import time

wanted = _json.loads(_sys.argv[1]) if len(_sys.argv) > 1 else {}
t0 = time.perf_counter()
out = {"libraries": {}, "missing": [], "seconds": 0.0}
for dist_name, patterns in wanted.items():
    try:
        dist = _md.distribution(dist_name)
    except _md.PackageNotFoundError:
        continue
    for f in dist.files or []:
        rel = str(f).replace("\\", "/")
        if not rel.endswith(".so") and ".so." not in rel:
            continue
        if not any(fnmatch.fnmatch(rel, pat) for pat in patterns):
            continue
        path = str(f.locate())
        if not _os.path.exists(path):
            out["missing"].append({"dist": dist.metadata["Name"], "file": rel})
            continue
        a = archs(path)
        a.pop("relocatable", None)
        out["libraries"][rel] = dict(a, dist=dist.metadata["Name"], version=dist.version,
                                     size=_os.path.getsize(path))
# Every distribution's compiled files, cheaply (existence and size against RECORD): a file the
# RECORD lists but the disk lacks is a half-finished install or a deletion (conda doctor's check).
for dist in _md.distributions():
    try:
        files = dist.files or []
        name = dist.metadata["Name"]
    except Exception:
        continue
    for f in files:
        rel = str(f)
        if not (rel.endswith(".so") or ".so." in rel) or rel.startswith(".."):
            continue
        path = str(f.locate())
        try:
            size = _os.path.getsize(path)
        except OSError:
            out["missing"].append({"dist": name, "file": rel})
            continue
        if f.size is not None and size != f.size:
            out["missing"].append({"dist": name, "file": rel, "size": size, "recorded_size": f.size})
out["missing"] = [dict(t) for t in {tuple(sorted(m.items())) for m in out["missing"]}]
out["seconds"] = round(time.perf_counter() - t0, 3)
emit_and_exit(out)
