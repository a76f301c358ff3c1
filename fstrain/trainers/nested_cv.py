"""Nested cross-validation: the outer-fold score of the whole tuning procedure.

A tuned model's validation score is optimistic: the search chose the configuration that did
best on those very rows. Nested cross-validation scores the *procedure* instead. For each of
``k`` outer folds (seeded, stratified for classification) the procedure runs on the outer
training rows only, exactly as ``fstrain train --tune`` runs on a training dataset:

1. a seeded, stratified inner split of the outer training rows into inner train and inner
   validation (``inner_validation`` of the rows);
2. :func:`fstrain.trainers.tuning.tune` (ASHA + Optuna) on that inner split;
3. the best configuration refitted on inner train + inner validation (boosters without early
   stopping, as the pipeline's refit);

then the refitted model is scored on the outer fold's held-out rows, which nothing in steps
1–3 saw. The mean ± std of those scores estimates how well "tune, then refit" generalises;
the per-fold best parameters show how stable the search is. One Ray session serves every fold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.config import TrainConfig, load_config
from fstrain.trainers.tuning import ray_session, tune


@dataclass
class NestedCVResult:
    """Outer-fold scores of the tuning procedure.

    Attributes:
        metric / mode: the selection metric (trainer name) and whether higher is better.
        folds: per outer fold: rows, inner split sizes, the inner best score and parameters,
            and every metric on the outer held-out rows.
        summary: ``{metric: {"mean", "std", "min", "max"}}`` over the outer folds.
        k, seed, inner_validation, stratified: how the folds were drawn.
    """

    metric: str
    mode: str
    folds: list[dict[str, Any]]
    summary: dict[str, dict[str, float]]
    k: int
    seed: int
    inner_validation: float
    stratified: bool
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (recorded with the registered model)."""
        return {"metric": self.metric, "mode": self.mode, "k": self.k, "seed": self.seed,
                "inner_validation": self.inner_validation, "stratified": self.stratified,
                "folds": self.folds, "summary": self.summary, "notes": list(self.notes),
                "procedure": "outer k-fold; per fold: seeded inner train/validation split, "
                             "Ray Tune (ASHA + Optuna), refit of the best configuration on "
                             "inner train + validation, scored on the outer held-out rows"}


def nested_cross_validate(
    config: TrainConfig | dict[str, Any] | str | Path,
    X: pd.DataFrame,
    y: pd.DataFrame,
    *,
    k: int,
    workdir: Path,
    inner_validation: float = 0.2,
    seed: int | None = None,
    ray_address: str | None = None,
    num_cpus: int = 2,
) -> NestedCVResult:
    """Score the tune-then-refit procedure on ``k`` outer folds of ``(X, y)`` (module doc).

    Raises:
        ConfigError: a model that cannot be tuned, or a resumed run.
        InvalidArgumentError: bad ``k``/``inner_validation`` or data shapes.
    """
    from feature_store.core.splits import kfold_indices

    cfg = load_config(config)
    if cfg.resume:
        raise ConfigError("nested cross-validation tunes every fold from scratch; "
                          "resume=True is refused.")
    if not 0.0 < inner_validation < 0.5:
        raise InvalidArgumentError(f"inner_validation must be in (0, 0.5). Got "
                                   f"{inner_validation!r} instead.")
    if not isinstance(y, pd.DataFrame) or y.shape[1] != 1 or len(X) != len(y):
        raise InvalidArgumentError("nested_cross_validate needs X and a one-column DataFrame y "
                                   "of the same rows.")
    stratified = cfg.task != "regression"
    seed = cfg.seed if seed is None else int(seed)
    labels = y.iloc[:, 0].to_numpy()
    outer = kfold_indices(len(X), k, seed, stratify=labels if stratified else None)
    inner_k = max(2, round(1 / inner_validation))
    rows: list[dict[str, Any]] = []
    metric = mode = ""
    workdir = Path(workdir)
    with ray_session(workdir, ray_address=ray_address, num_cpus=num_cpus) as notes:
        for i, (fit_idx, held_idx) in enumerate(outer):
            row, metric, mode = _outer_fold(
                cfg, X.iloc[fit_idx], y.iloc[fit_idx], X.iloc[held_idx], y.iloc[held_idx],
                inner=kfold_indices(len(fit_idx), inner_k, seed + 1 + i,
                                    stratify=labels[fit_idx] if stratified else None)[0],
                workdir=workdir / f"outer{i}", num_cpus=num_cpus)
            rows.append({"fold": i, **row})
    return NestedCVResult(metric=metric, mode=mode, folds=rows, summary=_summary(rows), k=k,
                          seed=seed, inner_validation=1 / inner_k, stratified=stratified,
                          notes=list(notes))


def _outer_fold(cfg: TrainConfig, X_fit: pd.DataFrame, y_fit: pd.DataFrame,
                X_held: pd.DataFrame, y_held: pd.DataFrame, *, inner: tuple[Any, Any],
                workdir: Path, num_cpus: int) -> tuple[dict[str, Any], str, str]:
    """Tune on the inner split, refit on all of ``X_fit``, score on the held-out rows."""
    from fstrain.trainers.api import train

    tr, va = inner
    tuned = tune(cfg, X_fit.iloc[tr], y_fit.iloc[tr], X_fit.iloc[va], y_fit.iloc[va],
                 workdir=workdir / "tune", num_cpus=num_cpus)
    best = tuned.best_config
    final = best if best.is_torch else best.with_overrides({"early_stopping_rounds": None})
    result = train(final, X_fit, y_fit, X_fit.iloc[va], y_fit.iloc[va],
                   workdir=workdir / "refit")
    held = _score(result.model, X_held, y_held)
    return ({"fit_rows": len(X_fit), "held_out_rows": len(X_held), "inner_train_rows": len(tr),
             "inner_validation_rows": len(va), "inner_best": tuned.best_metric,
             "best_params": tuned.best_params, **held}, result.metric, result.mode)


def _score(predictor: Any, X: pd.DataFrame, y: pd.DataFrame) -> dict[str, float]:
    from fstrain.trainers.metrics import classification_metrics, regression_metrics

    labels = predictor.labels
    target = labels.encode(y, split="outer held-out fold")
    if labels.task == "regression":
        metrics = regression_metrics(target, predictor.predict(X))
    else:
        metrics = classification_metrics(target, predictor.predict_proba(X), labels.n_classes)
    return {name: float(v) for name, v in metrics.items() if name != "n"}


def _summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    from fstrain.trainers.cross_validation import fold_summary

    return fold_summary(rows, skip={"fold", "fit_rows", "held_out_rows", "inner_train_rows",
                                    "inner_validation_rows", "inner_best", "best_params"})
