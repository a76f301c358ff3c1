"""``fstrain select-features``, ``fstrain doctor`` and ``fstrain ablate``: the commands of the
tools (:mod:`fstrain.tools`), each tool imported when its command runs."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from feature_views import get_use_case
from fstrain.cli.errors import EXIT_VALIDATION_FAILED
from fstrain.cli.invocation import emit as _emit
from fstrain.cli.invocation import guard as _guard
from fstrain.cli.invocation import project as _project
from fstrain.cli.invocation import set_options as _set
from fstrain.cli.invocation import step as _step
from fstrain.cli.options import BackendOpt, DebugOpt, JsonOpt, RootOpt
from fstrain.kernel.versions import parse_version


def select_features(
    use_case: Annotated[str, typer.Argument(help="flights, adult, mnist, ccfraud, instructions or airquality.")],
    training_dataset_version: Annotated[int, typer.Option("--training-dataset-version", "-t", help="Version whose train split is ranked.")],
    seed: Annotated[int, typer.Option(help="Seed of the row sample, folds and MI estimator.")] = 0,
    max_rows: Annotated[int, typer.Option(help="Rows sampled from the train split.")] = 50_000,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Rank a version's train-split features by mutual information; flag constant, redundant and leaky ones."""
    _set(root, backend, as_json, debug)

    def body() -> None:
        from fstrain.tools.feature_selection import rank_features, selection_report

        uc = get_use_case(use_case)
        fv = _project().get_feature_store().get_feature_view(uc.feature_view_name,
                                                             uc.feature_view_version)
        splits = fv.get_training_dataset(training_dataset_version).splits
        if "validation" in splits:
            X_train, *_rest, y_train, _y_val, _y_test = fv.get_train_validation_test_split(
                training_dataset_version)
        else:
            X_train, _X_test, y_train, _y_test = fv.get_train_test_split(training_dataset_version)
        table = rank_features(X_train, y_train, seed=seed, max_rows=max_rows)
        payload = {"use_case": use_case, "training_dataset_version": training_dataset_version,
                   **table.attrs, "features": table.to_dict(orient="records")}
        _emit(payload, selection_report(table))

    _guard(body)


def doctor(
    target: Annotated[str, typer.Argument(metavar="RUN_OR_MODEL", help="NAME[:VERSION] of a registered model, or a torch run folder (its name under <root>/runs, or a path).")],
    no_rerun: Annotated[bool, typer.Option("--no-rerun", help="Skip re-running the first round/epoch (the reproducibility check).")] = False,
    max_rows: Annotated[int, typer.Option(help="Train rows sampled for the leakage check.")] = 5000,
    late_data_threshold: Annotated[float, typer.Option(help="Share of a joined group's rows committed after their label time above which the training-dataset version is flagged as possible leakage.")] = 0.01,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Check a run against common training failures; exit 0 fine, 3 on a severe finding."""
    _set(root, backend, as_json, debug)

    def body() -> Any:
        from fstrain.tools.doctor import diagnose

        with _step(f"doctor: {target}"):
            report = diagnose(_project(), target, rerun=not no_rerun, max_rows=max_rows,
                              late_data_threshold=late_data_threshold)
        _emit(report.to_dict(), report.to_text())
        return report

    if _guard(body).severe:
        raise typer.Exit(EXIT_VALIDATION_FAILED)


def ablate(
    use_case: Annotated[str, typer.Argument(help="The use case whose registered model is ablated.")],
    training_dataset_version: Annotated[str, typer.Option("--training-dataset-version", "-t", help="Version the reference model was trained on (a number or 'latest').")],
    drop_group: Annotated[list[str] | None, typer.Option("--drop-group", help="A feature group whose features are left out (repeatable).")] = None,
    drop_feature: Annotated[list[str] | None, typer.Option("--drop-feature", help="A feature left out (repeatable).")] = None,
    model_version: Annotated[int | None, typer.Option(help="Reference model version (default: the newest trained on -t).")] = None,
    split: Annotated[str, typer.Option(help="Rows scored: validation (default) or test.")] = "validation",
    resamples: Annotated[int, typer.Option(help="Paired bootstrap resamples per item.")] = 200,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Retrain a registered model's configuration without each group/feature; metric deltas
    with bootstrap intervals, attached to the model as a table and a plot."""
    _set(root, backend, as_json, debug)

    def body() -> Any:
        from fstrain.tools.ablation import run

        version = parse_version(training_dataset_version, "--training-dataset-version")
        with _step(f"ablate: {use_case} on training dataset {training_dataset_version}"):
            result = run(_project(), use_case, version, groups=list(drop_group or []),
                         features=list(drop_feature or []), model_version=model_version,
                         split=split, resamples=resamples, seed=seed)
        _emit(result.to_dict(), result.to_text())

    _guard(body)


__all__ = ['ablate', 'doctor', 'select_features']
