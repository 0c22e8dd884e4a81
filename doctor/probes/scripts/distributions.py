# Fast path: what is installed, read from metadata only (no package imports).
import importlib.metadata as md
import os
import platform
import re
import sys


def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def marker_environment():
    # The same keys packaging.markers.default_environment() returns, so requirement markers can be
    # evaluated by the doctor on the target's behalf.
    impl = sys.implementation
    iver = "{0.major}.{0.minor}.{0.micro}".format(impl.version)
    if impl.version.releaselevel != "final":
        iver += impl.version.releaselevel[0] + str(impl.version.serial)
    return {
        "implementation_name": impl.name,
        "implementation_version": iver,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


dists, broken, duplicates = {}, [], []
for dist in md.distributions():
    path = str(getattr(dist, "_path", "") or "")
    try:
        name = dist.metadata["Name"]
        version = dist.version
    except Exception as exc:  # a dist-info without readable METADATA
        broken.append({"path": path, "error": f"{type(exc).__name__}: {exc}"})
        continue
    if not name or not version:
        broken.append({"path": path, "error": "METADATA has no Name or Version"})
        continue
    key = canon(name)
    if key in dists:
        # Shadowed copies (two dist-infos for one name) are a classic half-finished install.
        duplicates.append({"name": name, "version": version, "path": path})
        continue
    try:
        installer = (dist.read_text("INSTALLER") or "").strip() or None
    except Exception:
        installer = None
    editable = False
    project = None
    try:
        direct = dist.read_text("direct_url.json")
        if direct:
            import json as _j

            _d = _j.loads(direct)
            editable = bool((_d.get("dir_info") or {}).get("editable"))
            if editable and str(_d.get("url", "")).startswith("file://"):
                project = _d["url"][len("file://"):]
    except Exception:
        pass
    # metadata outside every site/dist-packages directory: a source tree on sys.path (`setup.py
    # develop`, an .egg-link or .pth to a checkout) is the user's code as much as `pip install -e`
    if path and not any(part in ("site-packages", "dist-packages") for part in path.split(os.sep)):
        project = project or os.path.dirname(path)
    dists[key] = {
        "name": name,
        "version": version,
        "requires": list(dist.requires or []),
        "path": path,
        "installer": installer,
        "editable": editable,  # pip install -e: the code lives in the user's checkout, by design
        "project": project,    # the user's checkout (editable or a source tree), else None
    }



def _vllm_accepts(project):
    """What the vLLM adapter of a verl checkout accepts, read from its own code (no import): the
    versions its verl/third_party/vllm/__init__.py compares package_version with."""
    import re as _re

    path = os.path.join(project, "verl", "third_party", "vllm", "__init__.py")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            src = fh.read()
    except OSError:
        return None
    exact = _re.findall(r"package_version\s*==\s*['\"]([^'\"]+)['\"]", src)
    prefix = _re.findall(r"package_version\.startswith\(\s*['\"]([^'\"]+)['\"]", src)
    at_least = _re.findall(r"parse\(\s*package_version\s*\)\s*>=\s*\w*\.?parse\(\s*['\"]([^'\"]+)['\"]", src)
    return {"file": path, "exact": [v for v in exact if "+" not in v], "prefix": prefix,
            **({"min": at_least[0]} if at_least else {})}


# The import names each distribution provides (yaml → PyYAML, cv2 → opencv-python-headless): what an
# error names is a module, what changed is a distribution. Python >= 3.10 (top_level.txt, else RECORD).
try:
    for _mod, _owners in md.packages_distributions().items():
        for _owner in _owners:
            _e = dists.get(canon(_owner))
            if _e is not None and not _mod.startswith("_") and _mod.isidentifier():
                _e.setdefault("top_level", []).append(_mod)
except Exception:  # Python < 3.10, or metadata it cannot read: the names are then matched as before
    pass

for _d in dists.values():
    if _d["name"].lower() == "verl" and _d.get("project"):
        _d["vllm_accepts"] = _vllm_accepts(_d["project"])

emit({
    "python": {
        "executable": sys.executable,
        "version": platform.python_version(),
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "in_venv": sys.prefix != sys.base_prefix,
        "sys_path": [p for p in sys.path if os.path.isabs(p)],
    },
    "markers": marker_environment(),
    "dists": dists,
    "broken": broken,
    "duplicates": duplicates,
})
