"""``fstrain run`` and ``fstrain demo``: the four pipelines of a use case end to end, the
summary table, and the exit code a scheduler reads (that of ``fstrain validate``)."""

from __future__ import annotations

import time
from typing import Any

from fstrain.cli.invocation import progress as _progress
from fstrain.cli.invocation import step as _step

EXIT_VALIDATION_FAILED = 3
EXIT_POLICY_DEVIATION = 4


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
    from feature_views import get_use_case
    from pipelines import feature, model_validation, training, training_dataset
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
    from rich.console import Console
    from rich.table import Table

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


def exit_code(status: str) -> int:
    """``fstrain validate``'s exit code for a run's status (0 for an empty window)."""
    if status in ("passed", "empty window"):
        return 0
    if status.startswith("passed") and status.endswith("(policy deviation)"):
        return EXIT_POLICY_DEVIATION
    return EXIT_VALIDATION_FAILED


__all__ = ["exit_code", "run_use_case", "summary"]
