"""fstrain's trainer library, shared by the training and model-validation pipelines.

Public API (heavy libraries — torch, XGBoost, Ray — load only when used)::

    from pipelines.trainers import TrainConfig, load_config, train, load_predictor
    cfg = load_config({"model": "xgboost", "imbalance": "scale_pos_weight"})
    result = train(cfg, X_train, y_train, X_val, y_val, workdir=Path("run"))
    result.model.save(Path("model_dir"))            # safe formats + predictor.json
    predictor = load_predictor(Path("model_dir"))   # any kind, no pickle

Also: :func:`smoke_check` (overfit one batch first), :func:`cross_validate` (k folds, the
whole trainer refitted per fold), :func:`tune` (Ray Tune, ASHA + Optuna),
:func:`train_distributed` (Ray Train data-parallel), :func:`deepspeed_config`.

This package never imports another pipeline, the feature store's storage, or the registry's
index; it only uses ``fstrain.kernel.errors`` and ``model_registry.formats``.
"""

from __future__ import annotations

import importlib
from typing import Any

from pipelines.trainers.config import (
    TorchOptions,
    TrainConfig,
    TuneOptions,
    load_config,
)

_LAZY = {
    "train": "pipelines.trainers.api",
    "TrainResult": "pipelines.trainers.result",
    "Predictor": "pipelines.trainers.predictor",
    "ExplainTarget": "pipelines.trainers.predictor",
    "load_predictor": "pipelines.trainers.predictor",
    "smoke_check": "pipelines.trainers.smoke",
    "SmokeCheckError": "pipelines.trainers.smoke",
    "SmokeResult": "pipelines.trainers.smoke",
    "tune": "pipelines.trainers.tuning",
    "TuneResult": "pipelines.trainers.tuning",
    "default_search_space": "pipelines.trainers.tuning",
    "train_distributed": "pipelines.trainers.distributed",
    "cross_validate": "pipelines.trainers.cross_validation",
    "CrossValidationResult": "pipelines.trainers.cross_validation",
    "deepspeed_config": "pipelines.trainers.distributed",
    "train_spark": "pipelines.trainers.spark_mllib",
}

__all__ = ["TorchOptions", "TrainConfig", "TuneOptions", "load_config", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipelines.trainers' has no attribute {name!r}")
