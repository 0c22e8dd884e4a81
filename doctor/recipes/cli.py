"""`recipes list|show|lint|run|report|data`. Bad input → one line on stderr, exit 2."""

from __future__ import annotations

import sys

from doctor.cli import EXIT_USAGE, _Parser
from doctor.errors import UsageError


def build_parser() -> _Parser:
    p = _Parser(prog="recipes", description="Known verl PPO recipes: lint, preflight, run, report.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("list", help="the known recipes")
    s = sub.add_parser("show", help="one recipe, with its overrides and expected bands")
    s.add_argument("name", help="recipe name or YAML file")

    ln = sub.add_parser("lint", help="compose the recipe's overrides with the installed verl's Hydra config")
    ln.add_argument("name", nargs="?", help="recipe name or YAML file")
    ln.add_argument("--python", metavar="PATH", help="target interpreter (default: the active one)")
    ln.add_argument("--overrides-file", metavar="F", help="Hydra overrides, one per line (alone: lint only these)")
    ln.add_argument("--json", action="store_true")

    r = sub.add_parser("run", help="preflight, then run the recipe with verl.trainer.main_ppo")
    r.add_argument("name", help="recipe name or YAML file")
    r.add_argument("--python", metavar="PATH", help="target interpreter (default: the active one)")
    r.add_argument("--quick", action="store_true", help="the recipe's quick mode (max_steps)")
    r.add_argument("--out", metavar="DIR", help="output directory (default: runs/<recipe>-<time>)")
    r.add_argument("--preflight-only", action="store_true")
    r.add_argument("--json", action="store_true")

    rp = sub.add_parser("report", help="parse a verl console log: metrics.jsonl, summary.json, report.html")
    rp.add_argument("log", help="a verl console log")
    rp.add_argument("--out", metavar="DIR", help="output directory (default: next to the log)")
    rp.add_argument("--json", action="store_true", help="print summary.json on stdout")

    d = sub.add_parser("data", help="write a shipped dataset")
    d.add_argument("dataset", help="dataset name (gsm8k)")
    d.add_argument("--out", metavar="DIR", required=True)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command in ("list", "show", "data"):
            from doctor.recipes import catalog

            return catalog.run(args)
        if args.command == "lint":
            from doctor.recipes.lint import run_lint

            return run_lint(args)
        if args.command == "run":
            from doctor.recipes.run import run_recipe

            return run_recipe(args)
        if args.command == "report":
            from doctor.recipes.report import run_report

            return run_report(args)
    except UsageError as exc:
        print(f"recipes: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("recipes: interrupted", file=sys.stderr)
        return 130
    return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
