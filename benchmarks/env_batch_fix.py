"""`doctor fix --yes` and `doctor rollback --yes` on the fresh env batch (issue 24: "the fix that `doctor fix
--yes` applies restores it (the failing import or first use passes), rollback restores the broken state
exactly"). The envs are benchmarks/build_env_batch.py's, under /tmp/envbatch; each case that breaks
something is run the way a user runs it, with the case's settings in the environment:

    1. the env's state: `uv pip freeze` and every file under site-packages (path, size, inode, and the
       sha256 of every file under 64 MB: a file put back on another inode — uv writes a dist-info's
       INSTALLER, RECORD and REQUESTED anew — is judged by its bytes);
    2. `doctor fix --yes --json --python ENV/bin/python` (its exit: 0 fixed, 1 errors remain);
    3. the case's broken imports, each in a new process (`python -c "import X"`), and `uv pip check`;
    4. `doctor rollback --yes --python ENV/bin/python`, then the state again, compared with step 1.

A setting case has no package change to make: `doctor fix` prints the command line without the setting;
the script runs the case's imports without it (`env -u VAR`) to show that the printed fix works, and
checks that `doctor fix --yes` changed no file.

    python benchmarks/env_batch_fix.py [--root /tmp/envbatch] [--only NAME …] [--json]

The envs are changed and restored in place; run it on a batch nobody else is using."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "benchmarks" / "env_batch" / "CASES.yaml"
SMALL = 64 << 20  # files below this size are compared by content
UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))


def state(py: Path) -> dict:
    """What a rollback has to restore: the distributions and the files of site-packages."""
    freeze = subprocess.run([UV, "pip", "freeze", "--python", str(py)], capture_output=True, text=True).stdout
    site = next(py.parent.parent.glob("lib/python3.*/site-packages"))
    files = {}
    for p in sorted(site.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            st = p.stat()
            # the bytes too, where that is cheap: a file put back on another inode (uv writes INSTALLER,
            # RECORD and REQUESTED anew on every install) is then judged by its content
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if st.st_size < SMALL else None
            files[str(p.relative_to(site))] = (st.st_size, st.st_ino, digest)
    return {"freeze": freeze.splitlines(), "files": files}


def diff(a: dict, b: dict) -> list[str]:
    out = [f"- {x}" for x in sorted(set(a["freeze"]) - set(b["freeze"]))]
    out += [f"+ {x}" for x in sorted(set(b["freeze"]) - set(a["freeze"]))]
    fa, fb = a["files"], b["files"]
    both = fa.keys() & fb.keys()
    changed = [k for k in both if fa[k][0] != fb[k][0] or fa[k][2] != fb[k][2]]  # another size, or other bytes
    relinked = [k for k in both if fa[k][0] == fb[k][0] and fa[k][1] != fb[k][1] and fa[k][2] == fb[k][2]]
    unhashed = [k for k in relinked if fa[k][2] is None]
    if (fa.keys() ^ fb.keys()) or changed:
        out.append(f"files: {len(fa.keys() - fb.keys())} gone, {len(fb.keys() - fa.keys())} new, "
                   f"{len(changed)} with other bytes")
    if relinked:
        out.append(f"files: {len(relinked)} on another inode with the same bytes"
                   + (f" ({len(unhashed)} of them ≥ {SMALL >> 20} MB: same size, not hashed)" if unhashed else ""))
    return out


def imports_pass(env_dir: Path, names: list[str], case_env: dict) -> dict[str, bool]:
    """Each broken import or first use (build_env_batch.PROBES: ray.init, datasets.load_dataset,
    vllm.get_attn_backend …) in a new process, as build_env_batch found it broken (its own probe)."""
    from build_env_batch import PROBES, probe

    return {n: probe(env_dir, PROBES.get(n, f"import {n}"), case_env)[0] == 0 for n in names}


def doctor(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=1800)


def run_case(case: dict, root: Path) -> dict:
    env_dir = root / case["name"]
    py = env_dir / "bin" / "python"
    meta = json.loads((env_dir / "case.json").read_text())
    settings = meta.get("env") or {}
    env = {**os.environ, **settings}
    modules = list(case["breaks"])  # imports and first uses alike
    row: dict = {"name": case["name"], "kind": case["kind"]}
    before = state(py)
    t0 = time.perf_counter()
    p = doctor("fix", "--yes", "--json", "--python", str(py), env=env)
    row["fix_seconds"] = round(time.perf_counter() - t0, 1)
    row["fix_exit"] = p.returncode
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = {}
    row["status"] = doc.get("status")
    row["fixed"] = doc.get("fixed") or []
    row["remaining_errors"] = doc.get("remaining_errors") or []
    row["reason"] = doc.get("reason")
    after = state(py)
    row["changed"] = diff(before, after)
    row["imports_after"] = imports_pass(env_dir, modules, settings)   # a setting's fix changes nothing: still broken
    if case["kind"] == "setting":
        row["imports_without_setting"] = imports_pass(env_dir, modules, {})
    check = subprocess.run([UV, "pip", "check", "--python", str(py)], capture_output=True, text=True)
    row["uv_pip_check_after"] = "clean" if check.returncode == 0 else check.stdout.strip().splitlines()[-1:]
    if row["changed"]:
        r = doctor("rollback", "--yes", "--python", str(py), env=env)
        row["rollback_exit"] = r.returncode
        row["rollback_diff"] = diff(before, state(py))
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/envbatch")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for c in yaml.safe_load(CASES.read_text()):
        if not c.get("breaks") or (args.only and c["name"] not in args.only):
            continue
        row = run_case(c, Path(args.root))
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| case | kind | `doctor fix --yes` exit | what it changed | broken imports after | uv pip check after | "
          "rollback: the broken state again |\n|---|---|---|---|---|---|---|")
    for r in rows:
        imp = r["imports_after"]
        after = "all pass" if all(imp.values()) else "fail: " + ", ".join(k for k, v in imp.items() if not v)
        if "imports_without_setting" in r:
            w = r["imports_without_setting"]
            after += " (without the setting: " + ("all pass" if all(w.values()) else "still fail") + ")"
        rb = ("exact" if not r.get("rollback_diff") else "; ".join(r["rollback_diff"][:3])) if r["changed"] else "nothing to undo"
        changed = "; ".join(r["changed"][:4]) or "nothing"
        print(f"| {r['name']} | {r['kind']} | {r['fix_exit']} ({r['status']}; fixed: {', '.join(r['fixed']) or '-'}) | "
              f"{changed} | {after} | "
              f"{r['uv_pip_check_after'] if isinstance(r['uv_pip_check_after'], str) else r['uv_pip_check_after'][0]} | {rb} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
