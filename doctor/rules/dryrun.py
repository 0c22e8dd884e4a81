"""The trainer's path on CPU (the dry run's facts, recipes/scripts/dryrun.py) judged step by step:
one check per step of knowledge/dryrun.yaml. A step that failed is `trainer.step-failed` with verl's
own exception as evidence; when the signature table knows that exception, the cause it names is the
headline and the step's failure is listed under it. A step after a failed one is "not reached"."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import Finding, make
from doctor.results import Check, Status
from doctor.signatures import cause_of
from doctor.rules.registry import RULES, cannot_look


def _error_text(err: dict | None) -> str:
    if not err:
        return "?"
    msg, kind = str(err.get("message") or ""), err.get("type")
    return msg if not kind or str(kind) in msg.split(":", 1)[0] else f"{kind}: {msg}"


def _evidence(step: dict, spec: dict) -> list[str]:
    err = step.get("error") or {}
    ev = [_error_text(err)]
    text = (err.get("text") or "").strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) > 1:
        ev += ["  " + ln.strip() for ln in lines[1:6]]
    verl_frames = [f for f in err.get("chain") or [] if "/verl/" in f]
    if verl_frames:
        ev.append("in verl: " + " → ".join(f.split("/verl/", 1)[1] for f in verl_frames[-3:]))
    ev.append(f"the step runs verl's own code: {spec['follows']}")
    return ev


def epochs_decide(d: dict) -> bool:
    """Whether the run's length is batches per epoch × epochs (else trainer.total_training_steps)."""
    return d.get("total_training_steps") == (d.get("batches_per_epoch") or 0) * (d.get("epochs") or 0)


def step_findings(dry: dict, spec: dict, recipe: str, python: str) -> list[Finding]:
    steps = {s["name"]: s for s in dry.get("steps") or []}
    step = steps.get(spec["id"])
    if step is None:
        failed = [s for s in dry.get("steps") or [] if s["status"] == "failed"]
        if failed:
            raise cannot_look("dryrun", f"not reached: an earlier step failed ({failed[0]['name']})")
        if spec["id"] == "stand-in":
            raise cannot_look("dryrun", "the model is on this machine: no stand-in needed")
        trainer = "v1" if dry.get("entry") == "TaskRunnerV1" else "v0"
        if spec.get("trainer") and spec["trainer"] != trainer:
            raise cannot_look("dryrun", f"verl {dry.get('verl') or '?'}'s {trainer.upper()} trainer has no such step")
        if spec.get("optional"):
            raise cannot_look("dryrun", f"verl {dry.get('verl') or '?'} has no such step")
        raise cannot_look("dryrun", "the dry run did not report this step")
    out: list[Finding] = []
    if step["status"] == "failed":
        err = step.get("error") or {}
        failure = make("trainer.step-failed", _evidence(step, spec), step=spec["title"], message=_error_text(err)[:200],
                       recipe=recipe, python=python, verl=dry.get("verl") or "?")
        cause = cause_of(err.get("text") or err.get("message") or "", python, verl=dry.get("verl") or "?")
        if cause is not None:
            failure.caused_by = cause.id
            out.append(cause)
        out.append(failure)
    detail = step.get("detail") or {}
    # Only when the run is whole epochs: with trainer.total_training_steps it ends before an epoch does.
    if spec["id"] == "dataloader" and detail.get("rows_dropped_per_epoch") and epochs_decide(detail):
        rows, batch = detail["train_rows"], detail["batch_size"]
        dropped, per_epoch = detail["rows_dropped_per_epoch"], detail["batches_per_epoch"]
        out.append(make("trainer.rows-dropped",
                        [f"verl's train dataloader: {rows} rows, batch {batch}, drop_last=True → {per_epoch} batches per epoch",
                         f"{dropped} rows ({dropped / rows:.1%}) are left out of every epoch "
                         f"(reshuffled each epoch, so different rows each time)",
                         f"total_training_steps = {per_epoch} × {detail.get('epochs')} epochs = {detail.get('total_training_steps')}"],
                        rows=rows, batch=batch, dropped=dropped, share=f"{dropped / rows:.1%}", recipe=recipe))
    short = (dry.get("ray") or {}).get("cpus_short")
    if spec["id"] == "ray" and short:
        out.append(make("trainer.ray-cpus-short",
                        [f"Ray here has {short['ray_cpus']} CPU(s) ({short['cores']} core(s)); verl's V1 trainer places "
                         f"{short['needed']} one-CPU actors before its first GPU call: TaskRunnerV1, the transfer "
                         f"queue's controller and its {short['storage_units']} storage units",
                         f"the dry run gave its private Ray {short['needed']} logical CPUs to go on"],
                        have=short["ray_cpus"], need=short["needed"], units=short["storage_units"], recipe=recipe))
    if spec["id"] == "reward" and step.get("warning"):
        out.append(make("trainer.reward-indistinct",
                        [step["warning"], f"compute_score: {detail.get('function')}, data_source {detail.get('data_source')}"],
                        function=detail.get("function") or "?", data_source=detail.get("data_source") or "?"))
    return out


def _register() -> None:
    def judge(spec: dict):
        def rule(facts, ctx) -> list[Finding]:
            dry = facts["dryrun"]
            if not dry.get("steps"):
                raise cannot_look("dryrun", f"the dry run could not run: {dry.get('error') or 'no steps reported'}")
            return step_findings(dry, spec, dry.get("recipe") or "RECIPE", ctx.python)
        rule.__name__ = rule.__qualname__ = f"step_{spec['id'].replace('-', '_')}"
        return rule

    for spec in knowledge.load("dryrun")["steps"]:
        own = {"dataloader": ("trainer.rows-dropped",), "reward": ("trainer.reward-indistinct",),
               "ray": ("trainer.ray-cpus-short",)}.get(spec["id"], ())
        RULES(f"dry run: {spec['title']}", "trainer", needs=("dryrun",), only_with="dryrun",
              emits=("trainer.step-failed", "signature:log", *own))(judge(spec))


_register()


def evaluate_dry_run(dry: dict, recipe: str, python: str) -> tuple[list[Finding], list[Check]]:
    """Findings and one check per step (through the one evaluate loop). A dry run that could not run
    at all is one skipped check."""
    from doctor.rules import Context, evaluate  # the package imports this module to register its rules

    if not dry.get("steps"):
        why = f"the dry run could not run: {dry.get('error') or 'no steps reported'}"
        return [], [Check("dry run of the trainer", "trainer", Status.SKIPPED, why=why)]
    return evaluate({"dryrun": {**dry, "recipe": recipe}}, Context(python=python), select=lambda r: r.area == "trainer")
