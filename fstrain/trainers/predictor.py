"""Fitted models behind one small interface, saved in safe formats and rebuilt without pickle:
:func:`load_predictor` rebuilds any kind a trainer saved.

Every predictor takes a pandas DataFrame of raw features (the same columns as at training time;
``image_path`` for the CNN) and returns class probabilities. ``save(directory)`` writes:

- ``predictor.json``: kind, framework, feature names/dtypes, label classes, file list;
- ``preprocessor/``: the fitted ``ColumnTransformer`` via skops (tabular kinds);
- ``model/``: XGBoost JSON, LightGBM text, skops (scikit-learn) or safetensors +
  ``config.json`` (torch).

:func:`load_predictor` rebuilds any kind from those files (the model-validation pipeline uses
it). :attr:`Predictor.explain_target` exposes the underlying booster/estimator/module and the
function that turns a DataFrame into its input matrix, for SHAP.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fstrain.kernel.errors import InvalidArgumentError, NotFoundError
from fstrain.trainers import formats
from fstrain.trainers.data import FeatureSchema, LabelInfo
from fstrain.trainers.predictor_base import (
    FORMAT_VERSION,
    PREDICTOR_FILE,
    ExplainTarget,
    Predictor,
)
from fstrain.trainers.tabular_predictor import (
    MODEL_LOADERS,
    TabularPredictor,
    load_tabular_predictor,
)
from fstrain.trainers.torch_predictor import TorchPredictor, load_torch_predictor
from fstrain.trainers.calibration import Calibration
from fstrain.trainers.catboost_trainer import load_catboost_predictor
from fstrain.trainers.flax_trainer import load_flax_predictor
from fstrain.trainers.keras_trainer import load_keras_predictor
from fstrain.trainers.lora_predictor import load_lora_predictor
from fstrain.trainers.spark_predictor import load_spark_predictor

__all__ = ["FORMAT_VERSION", "PREDICTOR_FILE", "ExplainTarget", "Predictor", "TabularPredictor",
           "TorchPredictor", "load_predictor"]


def load_predictor(
    directory: Path,
    *,
    image_loader: Callable[[str], np.ndarray] | None = None,
    device: str = "cpu",
) -> Predictor:
    """Rebuild a predictor saved by ``Predictor.save`` (any kind), without pickle, with the
    probability correction it was saved with.

    Raises:
        NotFoundError: ``predictor.json`` is missing.
    """
    directory = Path(directory)
    manifest_path = directory / PREDICTOR_FILE
    if not manifest_path.is_file():
        raise NotFoundError(
            f"No {PREDICTOR_FILE} in {str(directory)!r}: not a directory written by "
            "Predictor.save()."
        )
    info = json.loads(manifest_path.read_text())
    predictor = _load_model(directory, info, image_loader=image_loader, device=device)
    if info.get("calibration"):
        predictor.calibration = Calibration.from_json(info["calibration"])  # type: ignore[attr-defined]
    return predictor


def _load_model(directory: Path, info: dict[str, Any], *,
                image_loader: Callable[[str], np.ndarray] | None, device: str) -> Predictor:
    kind = info["kind"]
    framework = _framework_loader(kind)
    if framework is not None:
        return framework(directory, info)
    if kind == "lora":
        return load_lora_predictor(directory, info, device=device)
    if kind not in (*MODEL_LOADERS, "mlp", "cnn", "spark_gbt", "spark_lr"):
        raise InvalidArgumentError(
            f"{PREDICTOR_FILE} in {str(directory)!r} has unknown kind {kind!r}.")
    labels = LabelInfo.from_json(info["labels"])
    schema = FeatureSchema.from_json(info["features"]) if "features" in info else None
    if schema is None and kind != "cnn":  # cnn reads images; the others predict from features
        raise InvalidArgumentError(
            f"{PREDICTOR_FILE} in {str(directory)!r}: a {kind!r} model predicts from features, "
            "but it records no 'features' schema.")
    preprocessor = None
    if (directory / "preprocessor").is_dir():
        preprocessor = formats.load_sklearn(directory / "preprocessor")
    if kind in ("mlp", "cnn"):
        return load_torch_predictor(directory, info, kind, labels, schema, preprocessor,
                                    image_loader, device)
    assert schema is not None  # refused above for every kind but cnn
    if kind in ("spark_gbt", "spark_lr"):
        return load_spark_predictor(directory, info, labels, schema)
    return load_tabular_predictor(directory, info, labels, schema, preprocessor)


def _framework_loader(kind: str) -> Callable[[Path, dict[str, Any]], Predictor] | None:
    """The loader of a predictor that lives beside its optional framework's trainer (CatBoost,
    Keras, Flax), imported only when such a model is loaded; None for the other kinds."""
    if kind == "catboost":
        return load_catboost_predictor
    if kind == "keras_mlp":
        return load_keras_predictor
    if kind == "flax_mlp":
        return load_flax_predictor
    return None
