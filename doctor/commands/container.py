"""`doctor container build|verify` (the work is in doctor/container/)."""

from __future__ import annotations

from doctor.results import ExitCode
from doctor.uv import runnable
import json
import sys
from doctor import container as containers
from doctor.report.marks import symbol



def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_container(args) -> int:
    if args.container_command == "build" and args.context:
        if args.pin_base:
            _err("doctor: --pin-base needs an engine; --context writes the definition without one")
            return ExitCode.USAGE
        res = containers.write_context(args.context, stack_name=args.stack, lock=args.lock, base=args.base,
                                       tag=args.tag, flash_attn=args.flash_attn, sbom=args.sbom,
                                       index_url=args.index_url, network=args.network,
                                       echo=(lambda m: None) if args.quiet else _err)
        if args.json:
            print(json.dumps(res, indent=2, sort_keys=True))
            return ExitCode.OK
        print(f"context  {res['context']}  (Dockerfile, lock.txt, the doctor's wheel; image {res['tag']})")
        print(f"SBOM     {res['sbom']}  ({res['distributions']} distributions planned from the lock, "
              f"sha256 {res['sbom_sha256'][:16]}…)")
        print(f"build    {runnable(res['build_script'])}")
        return ExitCode.OK
    if args.container_command == "build":
        try:
            res = containers.build(stack_name=args.stack, lock=args.lock, base=args.base, tag=args.tag,
                                   pin_base=args.pin_base, flash_attn=args.flash_attn, sbom=args.sbom,
                                   index_url=args.index_url, network=args.network,
                                   echo=(lambda m: None) if args.quiet else _err)
        except containers.BuildFailed as exc:
            _err(f"doctor: container build failed: {exc}")
            return ExitCode.PROBLEMS
        res.pop("log", None)
        if args.json:
            print(json.dumps(res, indent=2, sort_keys=True))
            return ExitCode.OK
        size = res["size_bytes"] or 0
        print(f"built {res['tag']}  {res['image_id'][:19]}  {size / 1e9:.2f} GB  "
              f"({res['build_seconds']} s, {res['cached_steps']} cached steps)")
        print(f"SBOM  {res['sbom']}  ({res['distributions']} distributions, sha256 {res['sbom_sha256'][:16]}…)")
        print(f"lock  {res['labels'].get('io.verl-doctor.lock.file')}  "
              f"sha256 {res['labels'].get('io.verl-doctor.lock.sha256', '')[:16]}…")
        print(f"next  {runnable('doctor container verify ' + res['tag'])}")
        return ExitCode.OK
    if args.container_command == "verify":
        res = containers.verify(args.tag, echo=(lambda m: None) if args.json else _err)
        if args.json:
            print(json.dumps(res, indent=2, sort_keys=True))
        else:
            mark = "PASS" if res["passed"] else "FAIL"
            print(f"{mark}  {res['image']}: doctor check exit {res['check_exit_code']}, "
                  f"{len(res['errors'])} error(s), {len(res['warnings'])} warning(s)")
            for i in res["errors"]:
                print(f"  {symbol('error', sys.stdout)} {i}")
            for i in res["explained_by_host"]:
                print(f"  - {i} (explained by the host: no GPU here)")
            for n in res["notes"]:
                print(f"  note: {n}")
            print(f"run it with:\n  {res['run_command']}")
        if res["passed"]:
            return ExitCode.OK
        return ExitCode.PROBLEMS if res["errors"] else ExitCode.INCOMPLETE
    return ExitCode.USAGE
