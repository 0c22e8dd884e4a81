"""`recipes list|show|lint|run|report|data`. Bad input → one line on stderr, exit 2."""

from __future__ import annotations

from doctor.cli import Parser, dispatch


def build_parser() -> Parser:
    p = Parser(prog="recipes", description="Known verl PPO recipes: lint, preflight, run, report.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    sub.add_parser("list", help="the known recipes")
    s = sub.add_parser("show", help="one recipe, with its overrides and expected bands")
    s.add_argument("name", help="recipe name or YAML file")

    ln = sub.add_parser("lint", help="compose the recipe's overrides with the installed verl's Hydra config")
    ln.add_argument("name", nargs="?", help="recipe name or YAML file")
    ln.add_argument("--python", metavar="PATH", help="target interpreter (default: the active one)")
    ln.add_argument("--overrides-file", metavar="F", help="Hydra overrides, one per line (alone: lint only these)")
    ln.add_argument("--write-fixed", metavar="NEW_FILE",
                    help="write the overrides with every rejected key fixed to a new file, then lint that file")
    ln.add_argument("--json", action="store_true")

    r = sub.add_parser("run", help="preflight, then run the recipe with verl.trainer.main_ppo")
    r.add_argument("name", help="recipe name or YAML file")
    r.add_argument("--python", metavar="PATH", help="target interpreter (default: the active one)")
    r.add_argument("--quick", action="store_true", help="the recipe's quick mode (max_steps)")
    r.add_argument("--out", metavar="DIR", help="output directory (default: runs/<recipe>-<time>)")
    r.add_argument("--preflight-only", action="store_true")
    r.add_argument("--dry-run", action="store_true",
                   help="run verl's own trainer path on CPU up to its first GPU call (config, Ray, TaskRunner, "
                        "tokenizer, dataset, dataloader, reward), then stop")
    pf = r.add_mutually_exclusive_group()
    pf.add_argument("--preflight-fast", action="store_true",
                    help="the preflight without its deep probes and without the dry run of the trainer "
                         "(GPU, model, data and config are still checked)")
    pf.add_argument("--skip-preflight", action="store_true",
                    help="start the trainer without any preflight (you vouch for the machine)")
    r.add_argument("--json", action="store_true")

    rp = sub.add_parser("report", help="parse a verl console log: metrics.jsonl, summary.json, report.html")
    rp.add_argument("log", help="a verl console log")
    rp.add_argument("--out", metavar="DIR", help="output directory (default: ./<log name>-report, where you are)")
    rp.add_argument("--json", action="store_true", help="print summary.json on stdout")

    d = sub.add_parser("data", help="write a shipped dataset")
    d.add_argument("dataset", help="dataset name (gsm8k)")
    d.add_argument("--out", metavar="DIR", required=True)
    return p


HANDLERS = {
    "list": "doctor.commands.recipes:run_catalog",
    "show": "doctor.commands.recipes:run_catalog",
    "data": "doctor.commands.recipes:run_catalog",
    "lint": "doctor.commands.recipes:run_lint",
    "run": "doctor.commands.recipes:run_recipe",
    "report": "doctor.commands.recipes:run_report",
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("recipes", build_parser(), argv, HANDLERS)


if __name__ == "__main__":
    raise SystemExit(main())
