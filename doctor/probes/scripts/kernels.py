# Kernels probe (fatbin.py is prepended): which GPU architectures each compiled CUDA library of the
# stack carries code for, read from the files themselves (no import, no GPU). The libraries come
# from each distribution's RECORD, so a file the RECORD lists but the disk lacks is a fact too.
# argv: [JSON {dist: [glob, ...]}]
import fnmatch
import re
import struct
import importlib.metadata as _md
import time

CUDA_SONAME = re.compile(r"^lib(cudart|nvrtc|cublas|cublasLt)\.so\.\d+$")
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
        # the CUDA libraries it links by soname: libcudart.so.13 is CUDA 13 (the major is the toolkit's)
        try:
            cuda = [n for n in needed(path) if CUDA_SONAME.match(n)]
        except (OSError, FatbinError, struct.error, IndexError):
            cuda = None
        out["libraries"][rel] = dict(a, dist=dist.metadata["Name"], version=dist.version,
                                     size=_os.path.getsize(path), cuda_needed=cuda)
# Every distribution's compiled files, cheaply (existence and size against RECORD): a file the
# RECORD lists but the disk lacks is a half-finished install or a deletion (conda doctor's check).
# A path two distributions' RECORDs both list is one file on disk that only one of them wrote:
# which one is on disk is read from its hash (nvidia-cutlass-dsl-libs-base vs -libs-cu13).
owners = {}
all_dists = []
for dist in _md.distributions():
    try:
        files = dist.files or []
        name = dist.metadata["Name"]
    except Exception:
        continue
    all_dists.append((dist, name, files))
    for f in files:
        rel = str(f)
        if rel.startswith("..") or rel.endswith(".pyc") or "/__pycache__/" in rel or rel.endswith("RECORD"):
            continue
        owners.setdefault(rel, []).append((name, f))
shared = {rel: own for rel, own in owners.items() if len({n for n, _ in own}) > 1}


def _hash_of(path):
    import base64
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


overlaps = {}
for rel, own in shared.items():
    hashes = {n: (f.hash.mode + "=" + f.hash.value) if f.hash else None for n, f in own}
    names = tuple(sorted(hashes))
    entry = overlaps.setdefault(names, {"dists": list(names), "files": 0, "differ": 0, "on_disk": {}, "examples": [],
                                        "differ_tops": [], "differ_files": []})
    entry["files"] += 1
    if len(set(hashes.values())) <= 1:
        continue  # the same bytes whoever wrote them
    entry["differ"] += 1
    if len(entry["differ_files"]) < 40:
        entry["differ_files"].append(rel)
    top = rel.split("/", 1)[0]   # the top-level package (or loose file) of the differing path
    if top not in entry["differ_tops"]:
        entry["differ_tops"].append(top)
    try:
        disk = _hash_of(str(own[0][1].locate()))
    except OSError:
        disk = None
    winner = next((n for n, hv in hashes.items() if hv == disk), "neither")
    entry["on_disk"][winner] = entry["on_disk"].get(winner, 0) + 1
    if len(entry["examples"]) < 3:
        entry["examples"].append({"file": rel, "on_disk": winner})
out["overlaps"] = [e for e in overlaps.values()]
for dist, name, files in all_dists:
    for f in files:
        rel = str(f)
        if rel in shared:
            continue  # judged above as an overlap, not as a truncated file
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
