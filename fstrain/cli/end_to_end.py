"""``fstrain run`` and ``fstrain demo``: the four pipelines of a use case end to end, the
summary table, and the exit code a scheduler reads (that of ``fstrain validate``); the commands
and what they run."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from feature_views import USE_CASES, get_use_case
from fstrain.cli.audit import signing_note
from fstrain.cli.errors import EXIT_POLICY_DEVIATION, EXIT_VALIDATION_FAILED, exit_code
from fstrain.cli.invocation import guard as _guard
from fstrain.cli.invocation import progress as _progress
from fstrain.cli.invocation import project as _project
from fstrain.cli.invocation import set_options as _set
from fstrain.cli.invocation import stages as _stages
from fstrain.cli.invocation import step as _step
from fstrain.cli.options import (
    WINDOW_END_HELP,
    WINDOW_START_HELP,
    BackendOpt,
    DebugOpt,
    ForceOpt,
    JsonOpt,
    RootOpt,
)
from pipelines import feature, model_validation, training_dataset

def run_use_case(project: Any, use_case: str, *, demo: bool = False, start: str | None = None,
                 end: str | None = None, anchor: str | None = None,
                 force: bool = False) -> dict[str, Any]:
    """All four stages of one use case; returns a summary row.

    ``start``/``end`` is the feature pipeline's window (default ``HOPS_START_TIME``/
    ``HOPS_END_TIME``); ``anchor='end-time'`` ends the relative split windows at that window's
    end. A window with no rows stops after the feature stage (``status: "empty window"``). On
    unchanged inputs the newest training dataset, its model and that model's latest validation
    run are reused (``reused: true``; nothing is created) unless ``force``.
    """
    from pipelines import training
    from pipelines.training import deep_merge

    uc = get_use_case(use_case)
    model_validation.check_model_card(project, uc.registry_model_name)  # before any stage
    settings = uc.demo if demo else {}
    started = time.perf_counter()
    feature_args = {k: v for k, v in settings.items() if k in ("sample", "n_transactions")}
    with _step(f"{use_case}: feature pipeline"):
        fref = feature.run(project, feature.FeaturePipelineConfig(
            use_case=use_case, start=start, end=end, **feature_args))
    if fref.empty:  # the summary prints the message (once)
        return {"use_case": use_case, "feature_groups": [], "training_dataset_version": None,
                "model": None, "key_metric": None, "key_value": None, "status": "empty window",
                "scorecard": None, "message": fref.summary(), "reused": False,
                "seconds": round(time.perf_counter() - started, 1)}
    _progress(fref.summary() if fref.wrote_nothing else
              f"{use_case}: feature groups " + ", ".join(str(r) for r in fref.feature_groups))
    if anchor in ("end-time", "end_time") and end:
        anchor = end
    with _step(f"{use_case}: training-dataset pipeline"):
        tref = training_dataset.run(project, training_dataset.TrainingDatasetConfig(
            use_case=use_case, anchor=anchor, force=force))
    _progress(f"{use_case}: {tref}")
    if settings.get("note"):
        _progress(f"{use_case}: {settings['note']}")
    with _step(f"{use_case}: training pipeline"):
        mref = training.run(project, training.TrainingPipelineConfig(
            use_case=use_case, training_dataset_version=tref.version,
            model=deep_merge({}, settings.get("model", {})), force=force))
    _progress(f"{use_case}: model {mref} " + ("(reused: already trained on this training "
                                              "dataset with this configuration)"
                                              if mref.reused else "(pending)"))
    vref = model_validation.latest_ref(project, mref.name, mref.version) if mref.reused else None
    validated_now = vref is None
    if vref is None:
        with _step(f"{use_case}: model-validation pipeline"):
            vref = model_validation.run(project, model_validation.ModelValidationConfig(
                model_name=mref.name, version=mref.version))
        _progress(f"{use_case}: model {mref} {vref.verdict}")
        if vref.versus_baseline:
            _progress(f"{use_case}: {vref.versus_baseline}")
    else:
        _progress(f"{use_case}: model {mref} {vref.verdict} (validation run {vref.run}, reused)")
    return {
        "use_case": use_case,
        "feature_groups": [str(r) for r in fref.feature_groups],
        "training_dataset_version": tref.version,
        "model": str(mref),
        "key_metric": vref.key_metric,
        "key_value": vref.key_value,
        "status": vref.status,
        "verdict": vref.verdict,
        "scorecard": vref.scorecard_html,
        "versus_baseline": vref.versus_baseline,
        "note": settings.get("note"),
        # nothing was created: the inputs were unchanged (the validation run is the newest one)
        "reused": fref.wrote_nothing and tref.reused and mref.reused and not validated_now,
        "seconds": round(time.perf_counter() - started, 1),
    }


def summary(rows: list[dict[str, Any]]) -> None:
    table = Table(title="fstrain: four pipelines per use case")
    for column in ("use case", "TD version", "model", "key metric", "status", "seconds"):
        table.add_column(column)
    for r in rows:
        value = "n/a" if r["key_value"] is None else f"{r['key_metric']} {r['key_value']:.3f}"
        style = {"passed": "green", "empty window": "yellow"}.get(r["status"], "red")
        table.add_row(r["use_case"], str(r["training_dataset_version"] or "-"), r["model"] or "-",
                      value, f"[{style}]{r['status']}[/{style}]", str(r["seconds"]))
    console = Console(width=max(100, Console().width))
    console.print(table)
    for r in rows:
        line = r.get("message") or f"scorecard ({r['use_case']}): {r['scorecard']}"
        console.print(line, highlight=False, soft_wrap=True)
        for extra in (r.get("versus_baseline"), r.get("note")):
            if extra:
                console.print(f"{r['use_case']}: {extra}", highlight=False, soft_wrap=True)


def run_command(
    use_case: Annotated[str, typer.Argument(help="flights, adult, mnist, ccfraud, instructions or airquality.")],
    start: Annotated[str | None, typer.Option(help=WINDOW_START_HELP)] = None,
    end: Annotated[str | None, typer.Option(help=WINDOW_END_HELP)] = None,
    anchor: Annotated[str | None, typer.Option(help="Relative split windows end at: data (default), end-time (the window end) or a date.")] = None,
    force: ForceOpt = False,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """All four pipelines of one use case, printing each ref. Exits as validate does: 0
    passed, 3 failed, 4 passed under a policy deviation; an empty window stops after the
    feature stage (exit 0). On unchanged inputs nothing is created: the newest training
    dataset, its model and its latest validation are reused (--force runs anew)."""
    _set(root, backend, as_json, debug)
    with _stages(4):
        row = _guard(lambda: run_use_case(_project(create=True), use_case, start=start,
                                          end=end, anchor=anchor, force=force))
    if as_json:
        typer.echo(json.dumps(row, indent=2))
    else:
        summary([row])
        if row["reused"]:
            typer.echo(f"nothing new: the inputs are unchanged, so training dataset "
                       f"v{row['training_dataset_version']}, model {row['model']} and its "
                       "latest validation were reused (--force runs every stage anew)")
    raise typer.Exit(exit_code(row["status"]))


def demo(
    use_cases: Annotated[list[str] | None, typer.Argument(help="Default: all of them.")] = None,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """The main job: every use case end to end on the embedded store, then a summary table."""
    _set(root, backend, as_json, debug)
    chosen = list(use_cases or USE_CASES)

    def body() -> list[dict[str, Any]]:
        project = _project(create=True)
        for name in chosen:  # every use case's name and model card before the first one runs
            model_validation.check_model_card(project, get_use_case(name).registry_model_name)
        return [run_use_case(project, uc, demo=True) for uc in chosen]

    started = time.perf_counter()
    with _stages(4 * len(chosen)):
        rows = _guard(body)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        summary(rows)
        typer.echo(f"store: {_project().root}   total: {time.perf_counter() - started:.0f} s   "
                   "browse: fstrain registry report")
        typer.echo(signing_note(_project().root))


__all__ = ["EXIT_POLICY_DEVIATION", "EXIT_VALIDATION_FAILED", "demo", "exit_code", "run_command",
           "run_use_case", "summary"]
