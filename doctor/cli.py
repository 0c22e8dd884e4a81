"""Command line: `doctor check|explain|lock|fix|rollback|triage`.

Every failure caused by the user's input ends as one line on stderr and exit code 2; tracebacks
are for bugs only."""

from __future__ import annotations

import argparse
import signal
import sys

from doctor import __version__
from doctor.errors import KnowledgeError, UsageError
from doctor.results import ExitCode

class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's default prints usage too)
        # dispatch() prefixes the program's name; a subcommand's parser names the subcommand.
        sub = self.prog.split(" ", 1)[1] if " " in self.prog else None
        raise UsageError(f"{sub}: {message}" if sub else message)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="doctor", description="Diagnose, fix and pin verl + vLLM 0.6.3.post1 + Ray environments.")
    p.add_argument("--version", action="version", version=f"verl-doctor {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    c = sub.add_parser("check", help="inspect the target interpreter and report findings")
    c.add_argument("--python", metavar="PATH", help="target interpreter (default: the active one)")
    c.add_argument("--facts", metavar="FILE",
                   help="judge the facts of an earlier `doctor check --json` (or a bug-report bundle) again; probe nothing")
    c.add_argument("--json", action="store_true", help="one JSON object on stdout, nothing else")
    c.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report (for a bug report)")
    c.add_argument("--fast", action="store_true",
                   help="skip the deep probes (imports with the compiled extensions, registry, Ray smoke)")
    c.add_argument("--no-cache", action="store_true", help="run the deep probes even if cached")
    c.add_argument("--skip-probe", action="append", default=[], metavar="NAME",
                   help="skip a deep probe (imports (with the compiled extensions), registry, ray_smoke); repeatable")
    c.add_argument("--strict", action="store_true", help="warnings count as errors for the exit code")
    c.add_argument("--verbose", "-v", action="store_true", help="list every check (default: what needs attention)")
    c.add_argument("--no-gpu", action="store_true",
                   help="no GPU is expected here (login node, CPU CI): the GPU checks are turned off and say so")
    c.add_argument("--lock", metavar="FILE", help="compare the target with a lockfile (lock.drift)")
    c.add_argument("--stack", metavar="NAME", help="judge versions against this stack (default: the closest)")
    c.add_argument("--cluster", metavar="ADDRESS",
                   help="also compare the stack's versions on every node of this running Ray cluster (ray.version-drift)")
    c.add_argument("--recipe", metavar="NAME",
                   help="also lint this recipe's verl config against the target's verl (config.* findings)")
    c.add_argument("--timeout-scale", type=float, default=1.0, help=argparse.SUPPRESS)

    e = sub.add_parser("explain", help="what a finding means, why it happens, how to fix it")
    e.add_argument("id", nargs="?", help="finding ID (omit to list all)")

    lk = sub.add_parser("lock", help="resolve a stack into a hashed lockfile with uv")
    lk.add_argument("--stack", action="append", help="stack name (repeatable; default: the default stack)")
    lk.add_argument("--all", action="store_true", help="every known stack")
    lk.add_argument("--python", nargs="+", metavar="VER", help="Python versions (default: the stack's)")
    lk.add_argument("--out", default="lockfiles", help="output directory (default: lockfiles/)")
    lk.add_argument("--project", metavar="PATH", help="lock a working env of this checkout instead: its installed versions, "
                                                        "hashed, the checkout's own code left out")
    lk.add_argument("--from", dest="env", metavar="PYTHON", help="with --project: the env's interpreter (default: the active one)")
    fx = sub.add_parser("fix", help="plan, snapshot, apply and re-check the automatic fixes")
    fx.add_argument("--python", metavar="PATH", help="target interpreter (default: the active one)")
    fx.add_argument("--only", nargs="+", metavar="ID", help="only these finding IDs")
    g = fx.add_mutually_exclusive_group()
    g.add_argument("--lock", metavar="FILE", help="sync the target to this lockfile")
    g.add_argument("--stack", metavar="NAME", help="fix within this stack's constraints")
    fx.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    fx.add_argument("--yes", action="store_true", help="apply without asking")
    fx.add_argument("--json", action="store_true", help="machine-readable plan/result on stdout")

    tr = sub.add_parser("triage", help="name the cause of a failed run from its console log")
    tr.add_argument("log", help="the run's console log (or - for stdin)")
    tr.add_argument("--json", action="store_true")
    tr.add_argument("--python", metavar="PATH",
                    help="the training env's interpreter, for the fix commands (default: the active one)")

    bd = sub.add_parser("bundle", help="one redacted file for a bug report: check, log tail + triage, run config")
    bd.add_argument("--python", metavar="PATH", help="the training env's interpreter (default: the active one)")
    bd.add_argument("--log", metavar="LOG", help="the failed run's console log")
    bd.add_argument("--recipe", metavar="NAME", help="the recipe the run used (its overrides and launch command)")
    bd.add_argument("--out", metavar="FILE", help="output file (default: ./verl-doctor-bundle-<time>.json)")
    bd.add_argument("--shorten-home", action="store_true", help="show your home directory as ~")
    bd.add_argument("--fast", action="store_true", help="the check without its deep probes")
    bd.add_argument("--no-gpu", action="store_true", help="no GPU is expected on this machine")

    rb = sub.add_parser("rollback", help="restore the state saved before a `doctor fix`")
    rb.add_argument("snapshot", nargs="?", help="snapshot ID or path (default: the latest)")
    rb.add_argument("--python", metavar="PATH", help="target interpreter (default: the snapshot's)")
    rb.add_argument("--list", action="store_true", help="list snapshots")
    rb.add_argument("--yes", action="store_true", help="restore without asking")

    ct = sub.add_parser("container", help="build the stack's lockfile into an OCI image; verify an image")
    csub = ct.add_subparsers(dest="container_command", required=True, parser_class=Parser)
    cb = csub.add_parser("build", help="build an image of a stack's lockfile through the Docker engine (DOCKER_HOST)")
    src = cb.add_mutually_exclusive_group()
    src.add_argument("--stack", metavar="NAME", help="stack whose py3.11 lockfile to install (default: the default stack)")
    src.add_argument("--lock", metavar="FILE", help="a hashed lockfile made by `doctor lock`")
    cb.add_argument("--base", metavar="IMAGE", help="base image (default: python:3.11-slim-bookworm)")
    cb.add_argument("--tag", metavar="TAG", help="image tag (default: verl-doctor/<stack>:py<ver>)")
    cb.add_argument("--pin-base", action="store_true", help="resolve the base to a digest and record it in containers/base.lock")
    cb.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=True,
                    help="install flash-attn from the stack's recorded wheel URL (default: on)")
    cb.add_argument("--sbom", metavar="PATH", help="CycloneDX JSON SBOM output (default: <tag>.cdx.json)")
    cb.add_argument("--index-url", metavar="URL", help="package index for the image's installs (default: PyPI)")
    cb.add_argument("--network", default="host", help="network of the build steps (default: host)")
    cb.add_argument("--context", metavar="DIR", help="write the image's definition instead of building it: the build "
                    "context, DIR/build.sh (the docker build command) and the SBOM planned from the lock (no engine needed)")
    cb.add_argument("--json", action="store_true", help="the result as JSON on stdout")
    cb.add_argument("--quiet", action="store_true", help="do not stream the build output")
    cv = csub.add_parser("verify", help="run `doctor check` inside an image; pass unless it finds errors the host does not explain")
    cv.add_argument("tag", help="the image")
    cv.add_argument("--json", action="store_true")
    return p


# subcommand -> "module:function"; imported only when used, so `doctor check` never pays for
# the docker SDK and `doctor explain` never pays for the engine.
HANDLERS = {
    "check": "doctor.commands.check:run_check",
    "explain": "doctor.commands.explain:run",
    "lock": "doctor.commands.lock:run_lock",
    "fix": "doctor.commands.fix:run_fix",
    "rollback": "doctor.commands.fix:run_rollback",
    "triage": "doctor.commands.triage:run_triage",
    "bundle": "doctor.commands.bundle:run_bundle",
    "container": "doctor.commands.container:run_container",
}


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _terminate_like_ctrl_c() -> None:
    """TERM and HUP end the doctor the way Ctrl-C does: every process it started is stopped (the
    probes, their private Ray instance, a trainer) before it exits, never orphaned."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _raise_interrupt)


def _never_crash_on_encoding() -> None:
    """A terminal or pipe that cannot show ✓/✗ (PYTHONIOENCODING=ascii, LANG=C) gets '?' for what it
    cannot encode (and the text report ASCII marks), never a UnicodeEncodeError after the probes ran."""
    for stream in (sys.stdout, sys.stderr):
        try:
            "✓✗‼→·…".encode(stream.encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure:
                reconfigure(errors="replace")


def dispatch(prog: str, parser: argparse.ArgumentParser, argv, handlers: dict[str, str]) -> int:
    """Parse, run the subcommand's handler, and turn bad input into one line + exit 2."""
    import importlib

    _terminate_like_ctrl_c()
    _never_crash_on_encoding()
    try:
        args = parser.parse_args(argv)
        module, func = handlers[args.command].split(":")
        return getattr(importlib.import_module(module), func)(args)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except KnowledgeError as exc:  # the doctor's own data is broken: one line, not a traceback
        print(f"{prog}: broken knowledge data: {exc}", file=sys.stderr)
        return ExitCode.INCOMPLETE
    except KeyboardInterrupt:
        from doctor.probes import interrupt_running  # lazy: only on Ctrl-C; `doctor --help` stays fast

        interrupt_running()  # whatever probe still runs (a lint compose, a cluster probe) stops too
        print(f"{prog}: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    return dispatch("doctor", build_parser(), argv, HANDLERS)
