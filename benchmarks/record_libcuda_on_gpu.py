"""Run on a lent GPU machine (the device tool): the gpu probe's libcuda facts under two library
paths — the host driver's libcuda first, and the container's CUDA forward-compatibility copy first
— each beside what really happens when CUDA starts there (cuInit's return code and torch's
device count, in a fresh process). tests/rules/test_gpu_libcuda.py replays them (a named test
double: no machine here has a GPU). Usage: python benchmarks/record_libcuda_on_gpu.py OUT.json"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.getcwd())
from doctor.probes.gpu import gpu_facts  # noqa: E402

CUDA_START = r"""
import ctypes, json, warnings
l = ctypes.CDLL("libcuda.so.1")
loaded = next((ln.split()[-1] for ln in open("/proc/self/maps") if "libcuda" in ln), None)
rc = l.cuInit(0)
out = {"loaded": loaded, "cuInit": rc}
try:
    import torch
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out["torch_available"] = torch.cuda.is_available()
    out["torch_warning"] = str(w[0].message) if w else None
except Exception as exc:
    out["torch_error"] = repr(exc)
print(json.dumps(out))
"""


def main() -> int:
    host = os.environ.get("LD_LIBRARY_PATH", "")
    compat = sorted(glob.glob("/usr/local/cuda*/compat"))
    settings = {"host-driver-first": host}
    if compat:
        settings["compat-first"] = compat[-1] + (":" + host if host else "")
    rec = {}
    for name, ld in settings.items():
        os.environ["LD_LIBRARY_PATH"] = ld
        facts = gpu_facts()
        run = subprocess.run([sys.executable, "-c", CUDA_START], capture_output=True, text=True,
                             env={**os.environ, "LD_LIBRARY_PATH": ld}, timeout=120)
        rec[name] = {"facts": facts, "observed": json.loads(run.stdout.strip().splitlines()[-1])}
    os.environ["LD_LIBRARY_PATH"] = host
    with open(sys.argv[1], "w") as fh:
        json.dump(rec, fh, indent=1)
    print(json.dumps({k: v["observed"] for k, v in rec.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
