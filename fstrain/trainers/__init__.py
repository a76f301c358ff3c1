"""fstrain's trainer library, shared by the training and model-validation pipelines.

Public API (heavy libraries — torch, XGBoost, Ray — load only when used)::

    from fstrain.trainers import TrainConfig, load_config, train, load_predictor
    cfg = load_config({"model": "xgboost", "imbalance": "scale_pos_weight"})
    result = train(cfg, X_train, y_train, X_val, y_val, workdir=Path("run"))
    result.model.save(Path("model_dir"))            # safe formats + predictor.json
    predictor = load_predictor(Path("model_dir"))   # any kind, no pickle

Also: :func:`smoke_check` (overfit one batch first), :func:`cross_validate` (k folds, the
whole trainer refitted per fold), :func:`tune` (Ray Tune, ASHA + Optuna),
:func:`train_distributed` (Ray Train data-parallel), :func:`deepspeed_config`.

Every flavour's model files are saved and loaded here (:mod:`fstrain.trainers.formats`), so the
registry imports the trainers, not the other way round: this package never imports a pipeline, a
backend or the registry's model module, only the kernel and the backend-neutral modules below
them (``feature_store.core``, ``model_registry.manifest``, ``validation.metrics``).
"""

from __future__ import annotations

import importlib
from typing import Any

from fstrain.trainers.config import (
    TorchOptions,
    TrainConfig,
    TuneOptions,
    load_config,
)

_LAZY = {
    "train": "fstrain.trainers.api",
    "TrainResult": "fstrain.trainers.result",
    "Predictor": "fstrain.trainers.predictor",
    "ExplainTarget": "fstrain.trainers.predictor",
    "load_predictor": "fstrain.trainers.predictor",
    "smoke_check": "fstrain.trainers.smoke",
    "SmokeCheckError": "fstrain.trainers.smoke",
    "SmokeResult": "fstrain.trainers.smoke",
    "tune": "fstrain.trainers.tuning",
    "TuneResult": "fstrain.trainers.tuning",
    "default_search_space": "fstrain.trainers.tuning",
    "train_distributed": "fstrain.trainers.distributed",
    "cross_validate": "fstrain.trainers.cross_validation",
    "CrossValidationResult": "fstrain.trainers.cross_validation",
    "deepspeed_config": "fstrain.trainers.distributed",
    "train_spark": "fstrain.trainers.spark_mllib",
}

__all__ = ["TorchOptions", "TrainConfig", "TuneOptions", "load_config", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fstrain.trainers' has no attribute {name!r}")
