"""K-fold cross-validation with the whole trainer refitted per fold.

Each fold runs :func:`fstrain.trainers.train` on the fold's training rows only: the
preprocessor (imputer, scaler, one-hot), the imbalance handling (weights or resampling) and the
model are all fitted there, and early stopping watches the fold's held-out rows. Nothing learnt
from a fold's held-out rows reaches its model, which is what makes the scores honest.

Folds come from :func:`feature_store.core.splits.kfold_indices` (seeded, stratified for
classification by default), so the same config, data and seed give the same folds and — with
deterministic trainers — the same scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.config import TrainConfig, load_config
from fstrain.trainers.api import train


@dataclass
class CrossValidationResult:
    """Per-fold validation metrics and their summary.

    Attributes:
        metric / mode: the selection metric and whether higher is better.
        folds: one dict per fold: ``fold``, ``train_rows``, ``val_rows``, ``best_iteration``
            and the fold's validation metrics.
        summary: ``{metric: {"mean", "std", "min", "max"}}`` over the folds (NaN-free metrics).
        seed: the seed the folds were drawn with; ``stratified``: whether they were.
        models: the fold predictors when asked for (``return_models=True``), else empty.
    """

    metric: str
    mode: str
    folds: list[dict[str, Any]]
    summary: dict[str, dict[str, float]]
    seed: int
    stratified: bool
    notes: list[str] = field(default_factory=list)
    models: list[Any] = field(default_factory=list)  # fold predictors, with return_models=True

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (recorded with the registered model)."""
        return {"metric": self.metric, "mode": self.mode, "k": len(self.folds),
                "seed": self.seed, "stratified": self.stratified, "folds": self.folds,
                "summary": self.summary, "notes": list(self.notes)}


def cross_validate(
    config: TrainConfig | dict[str, Any] | str | Path,
    X: pd.DataFrame,
    y: pd.DataFrame,
    *,
    k: int = 5,
    workdir: Path,
    stratified: bool | None = None,
    seed: int | None = None,
    return_models: bool = False,
) -> CrossValidationResult:
    """Train and score the config on ``k`` folds of ``(X, y)``.

    Args:
        config: the trainer config (see :mod:`fstrain.trainers.config`).
        X, y: one split of a training-dataset version (normally ``train``); ``y`` has one
            label column.
        k: number of folds (2 or more, at most the number of rows).
        workdir: scratch folder; fold ``i`` trains in ``workdir/fold<i>``.
        stratified: keep class proportions in every fold (default: yes for classification).
        seed: fold seed (default: the config's ``seed``).
        return_models: keep each fold's fitted predictor in the result.

    Raises:
        ConfigError: the config is invalid; InvalidArgumentError: bad ``k`` or data shapes.
    """
    from feature_store.core.splits import kfold_indices

    cfg = load_config(config)
    if not isinstance(X, pd.DataFrame) or not isinstance(y, pd.DataFrame) or y.shape[1] != 1:
        raise InvalidArgumentError(
            "cross_validate needs X as a DataFrame and y as a one-column DataFrame. Got "
            f"X {type(X).__name__}, y {type(y).__name__} with "
            f"{getattr(y, 'shape', ('?', '?'))[1]} column(s)."
        )
    if len(X) != len(y):
        raise InvalidArgumentError(
            f"cross_validate: X has {len(X)} rows but y has {len(y)}; they must be the same rows."
        )
    if cfg.resume:
        raise ConfigError("cross_validate trains every fold from scratch; resume=True is refused.")
    regression = cfg.task == "regression"
    if stratified is None:
        stratified = not regression
    if stratified and regression:
        raise ConfigError("stratified folds need class labels; a regression uses stratified=False.")
    seed = cfg.seed if seed is None else int(seed)
    labels = y.iloc[:, 0].to_numpy()
    folds = kfold_indices(len(X), k, seed, stratify=labels if stratified else None)
    workdir = Path(workdir)
    rows: list[dict[str, Any]] = []
    metric = mode = ""
    notes: list[str] = []
    models: list[Any] = []
    for i, (train_idx, val_idx) in enumerate(folds):
        result = train(cfg, X.iloc[train_idx], y.iloc[train_idx], X.iloc[val_idx],
                       y.iloc[val_idx], workdir=workdir / f"fold{i}")
        metric, mode = result.metric, result.mode
        notes = list(result.nondeterminism)
        if return_models:
            models.append(result.model)
        rows.append({"fold": i, "train_rows": int(len(train_idx)), "val_rows": int(len(val_idx)),
                     "best_iteration": result.best_iteration,
                     **{name: float(v) for name, v in result.metrics.items() if name != "n"}})
    return CrossValidationResult(metric=metric, mode=mode, folds=rows, summary=_summary(rows),
                                 seed=seed, stratified=bool(stratified), notes=notes,
                                 models=models)


def _summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    return fold_summary(rows, skip={"fold", "train_rows", "val_rows", "best_iteration"})


def fold_summary(rows: list[dict[str, Any]], *, skip: set[str]) -> dict[str, dict[str, float]]:
    """Mean, sample std, min and max over folds of every finite numeric column not in
    ``skip`` (shared by cross-validation and nested cross-validation)."""
    out: dict[str, dict[str, float]] = {}
    for name in rows[0]:
        if name in skip:
            continue
        values = np.array([r[name] for r in rows], dtype=float)
        if not np.isfinite(values).all():
            continue
        out[name] = {"mean": float(values.mean()),
                     "std": float(values.std(ddof=1)) if len(values) > 1 else math.nan,
                     "min": float(values.min()), "max": float(values.max())}
    return out
