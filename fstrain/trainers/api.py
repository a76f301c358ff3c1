"""``train()``: the one entry point the training pipeline calls."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.trainers.config import TrainConfig, load_config
from fstrain.trainers.result import TrainResult
from fstrain.kernel.errors import ConfigError
from fstrain.trainers.catboost_trainer import train_catboost
from fstrain.trainers.flax_trainer import train_flax
from fstrain.trainers.keras_trainer import train_keras
from fstrain.trainers.lightgbm_trainer import train_lightgbm
from fstrain.trainers.lora import train_lora
from fstrain.trainers.tabular import train_sklearn, train_xgboost
from fstrain.trainers.torch_models import train_torch


def train(
    config: TrainConfig | dict[str, Any] | str | Path,
    X_train: pd.DataFrame,
    y_train: pd.DataFrame,
    X_val: pd.DataFrame,
    y_val: pd.DataFrame,
    *,
    workdir: Path,
    image_loader: Callable[[str], np.ndarray] | None = None,
    lineage: dict[str, Any] | None = None,
    resume: bool | None = None,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Train the model the config names on the train split, validating on the validation split.

    Args:
        config: a :class:`TrainConfig`, a dict or a YAML path.
        X_train, y_train, X_val, y_val: pandas frames from a training-dataset version
            (``y`` has one label column). The test split never comes here.
        workdir: scratch directory of this run (torch checkpoints under ``checkpoints/``).
        image_loader: ``path -> array`` for the ``cnn`` (default: Pillow grayscale).
        lineage: e.g. ``{"training_dataset": "adult", "version": 3}``; stored in checkpoints,
            and ``resume`` refuses a checkpoint written for another lineage.
        resume: continue a torch run from ``workdir/checkpoints/last`` (default: config.resume).
        report: called with each history row (round/epoch) as it is produced.

    Returns:
        :class:`TrainResult` with the fitted predictor, validation metrics, history, params,
        the imbalance record and non-determinism notes.
    """
    cfg = load_config(config)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if cfg.model == "xgboost":
        return train_xgboost(cfg, X_train, y_train, X_val, y_val, workdir=workdir, report=report)
    if cfg.model == "lightgbm":
        return train_lightgbm(cfg, X_train, y_train, X_val, y_val, workdir=workdir, report=report)
    if cfg.model == "catboost":
        return train_catboost(cfg, X_train, y_train, X_val, y_val, workdir=workdir, report=report)
    if cfg.model == "keras_mlp":
        return train_keras(cfg, X_train, y_train, X_val, y_val, workdir=workdir, report=report)
    if cfg.model == "flax_mlp":
        return train_flax(cfg, X_train, y_train, X_val, y_val, workdir=workdir, lineage=lineage,
                          resume=cfg.resume if resume is None else resume, report=report)
    if cfg.model in ("sklearn_logreg", "sklearn_rf"):
        return train_sklearn(cfg, X_train, y_train, X_val, y_val, workdir=workdir, report=report)
    if cfg.model == "lora":
        return train_lora(cfg, X_train, y_train, X_val, y_val, workdir=workdir, report=report)
    if cfg.model in ("spark_gbt", "spark_lr"):
        raise ConfigError(
            f"{cfg.model} trains in Spark on a training dataset's Parquet files, not on pandas "
            "frames: run `fstrain train <use case> --model "
            f"{cfg.model}` or call fstrain.trainers.spark_mllib.train_spark."
        )

    return train_torch(
        cfg, X_train, y_train, X_val, y_val, workdir=workdir, image_loader=image_loader,
        lineage=lineage, resume=resume, report=report,
    )
