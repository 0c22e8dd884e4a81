"""Every command the doctor prints runs as printed in a new shell (issue 28): the fix commands of
every finding and the "Fix together" lines of `doctor check` on the real broken envs. A new shell
here has no venv active and nothing of the doctor's venv on PATH; each command must name its
programs by a path that exists (the doctor's own uv, the target's bin/) or be a system tool; its
`doctor`/`recipes` arguments must parse with the doctor's own parsers; and its `uv pip install|sync`
must resolve (run with --dry-run: nothing changes)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest

from conftest import check_json

pytestmark = pytest.mark.realenv

ENVS = ("working", "transformers5", "setuptools80", "no-setuptools", "protobuf318", "verl020post1", "ray-no-msgpack",
        "verl-fork-post1")
GPU_HOST_TOOLS = {"nvidia-smi"}  # printed for a GPU node; this machine has none (the check says so)


def new_shell_env() -> dict:
    import envs

    env = {k: v for k, v in envs.uv_env().items() if k != "VIRTUAL_ENV"}  # the tests' uv cache; no venv
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if ".venv" not in p)
    return env


def printed_commands() -> list[tuple[str, str, str]]:
    """(env, finding or "fix together", command) for every command the checks printed."""
    out = []
    for name in ENVS:
        _, doc = check_json(name)
        out += [(name, f["id"], c) for f in doc["findings"] for c in f["fix"]["commands"]]
        out += [(name, "fix together", g["command"]) for g in doc.get("fix_together", [])]
    return out


def words(command: str) -> list[list[str]]:
    """Each part of an `a && b` chain as argv, comments dropped (as the shell reads it)."""
    return [shlex.split(part, comments=True) for part in command.split(" && ")]


def test_every_printed_command_runs_as_printed_in_a_new_shell():
    from doctor.cli import build_parser
    from doctor.recipes.cli import build_parser as recipes_parser

    env = new_shell_env()
    checked, problems = 0, []
    for name, fid, command in printed_commands():
        assert "{" not in command and "SNAPSHOT_DIR" not in command, (name, fid, command)
        for argv in words(command):
            if not argv:
                continue
            prog = argv[0]
            where = f"{name} {fid}: {command}"
            if prog in GPU_HOST_TOOLS:
                continue
            if os.path.isabs(prog):
                if not (os.path.isfile(prog) and os.access(prog, os.X_OK)):
                    problems.append(f"{where}: {prog} does not exist")
                    continue
            elif shutil.which(prog, path=env["PATH"]) is None:
                problems.append(f"{where}: a new shell has no `{prog}`")
                continue
            base = os.path.basename(prog)
            if base in ("doctor", "recipes"):
                parser = build_parser() if base == "doctor" else recipes_parser()
                try:
                    parser.parse_args(argv[1:])
                except SystemExit:
                    problems.append(f"{where}: its arguments do not parse")
            elif base == "uv" and any(a.startswith("https://github.com/") for a in argv):
                # GitHub is not reachable from these machines (only the package registries are): the
                # wheel URL is judged by its tags instead — the target's CPython and platform.
                url = next(a for a in argv if a.startswith("https://github.com/"))
                py = argv[argv.index("--python") + 1]
                ver = subprocess.run([py, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"],
                                     capture_output=True, text=True).stdout.strip()
                if f"-{ver}-{ver}-linux_x86_64.whl" not in url:
                    problems.append(f"{where}: the wheel is not for the target's {ver}")
            elif base == "uv" and argv[1:3] in (["pip", "install"], ["pip", "sync"]):
                proc = subprocess.run([*argv[:3], "--dry-run", *argv[3:]], capture_output=True, text=True,
                                      timeout=600, env=env)
                if proc.returncode != 0:
                    problems.append(f"{where}: uv --dry-run exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
            checked += 1
    print(f"{checked} printed commands checked")
    assert checked >= 20
    assert not problems, "\n".join(problems)
