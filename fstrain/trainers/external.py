"""Predictors for models registered through the public API (no ``predictor.json``).

A data scientist trains in a notebook on ``fv.get_train_validation_test_split(v)`` and registers
with ``mr.<flavor>.create_model(..., feature_view=fv, training_dataset_version=v)`` and
``model.save(dir)``, ``dir`` written by ``fstrain.trainers.formats.save_*``. The registry's
load-and-predict record (:mod:`model_registry.predictor_record`) says which loader reads the
files; :func:`load_registered_predictor` rebuilds the model and wraps it so the
model-validation pipeline can score it on the view's raw feature columns.

The model gets the view's feature columns as a DataFrame (string columns as pandas
categoricals for the XGBoost/LightGBM boosters), in the order it was fitted on when the model
knows it (``feature_names_in_``, ``feature_names``, ``feature_name()``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
import json

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.data import LabelInfo
from fstrain.trainers.predictor import ExplainTarget, Predictor, load_predictor
from fstrain.trainers import formats


class ExternalPredictor:
    """A registered model of one framework, scored on raw feature DataFrames."""

    framework: str

    def __init__(self, *, kind: str, model: Any, labels: LabelInfo,
                 features: list[str] | None = None) -> None:
        self.kind = kind
        self.framework = kind
        self.model = model
        self.labels = labels
        self.features = features
        self.params: dict[str, Any] = {}

    # -- input --------------------------------------------------------------------------------

    def _columns(self, X: pd.DataFrame) -> list[str]:
        names = self.features or _fitted_names(self.model) or list(X.columns)
        missing = [c for c in names if c not in X.columns]
        if missing:
            raise InvalidArgumentError(
                f"registered {self.kind} model expects columns {missing} that the feature view "
                f"does not return (it returns {list(X.columns)}). Was it trained on this view?"
            )
        return list(names)

    def _frame(self, X: pd.DataFrame) -> Any:
        frame = X[self._columns(X)]
        if self.kind in ("xgboost", "lightgbm"):
            # both libraries map categories by their training values (kept in the model)
            objects = [c for c in frame.columns if frame[c].dtype == object]
            if objects:
                frame = frame.astype({c: "category" for c in objects})
        if self.kind in ("torch", "mlp"):
            return _numeric_matrix(frame)
        return frame

    # -- prediction ---------------------------------------------------------------------------

    def predict_proba_matrix(self, X: Any) -> np.ndarray:
        """``(n, K)`` class probabilities (or ``(n,)`` values of a regression) of prepared input."""
        model = self.model
        if self.kind in ("torch", "mlp"):
            out = _torch_scores(model, X, regression=self.labels.task == "regression")
        elif self.labels.task == "regression":
            out = model.predict(_booster_input(self.kind, model, X))
        elif hasattr(model, "predict_proba"):
            out = model.predict_proba(X)
        else:
            out = model.predict(_booster_input(self.kind, model, X))
        out = np.asarray(out, dtype=np.float64)
        if self.labels.task == "regression":
            return out.reshape(-1)
        return np.column_stack([1.0 - out, out]) if out.ndim == 1 else out

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Positive-class probability ``(n,)`` (binary) or ``(n, K)`` class probabilities."""
        if self.labels.task == "regression":
            raise InvalidArgumentError(
                f"registered {self.kind} model for label {self.labels.name!r} is a regression: "
                "it has no class probabilities. Use predict()."
            )
        mat = self.predict_proba_matrix(self._frame(X))
        return mat[:, 1] if self.labels.n_classes == 2 else mat

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted labels (argmax), or values for a regression."""
        mat = self.predict_proba_matrix(self._frame(X))
        if self.labels.task == "regression":
            return mat
        return self.labels.decode(mat.argmax(axis=1))

    @property
    def explain_target(self) -> ExplainTarget:
        """The model and the DataFrame → model-input step, for SHAP.

        A scikit-learn ``Pipeline`` is explained at its last step, on the matrix its earlier
        steps produce (a linear or tree explainer instead of a model-agnostic one).
        """
        model = self.model
        steps = getattr(model, "steps", None)
        if steps and len(steps) > 1:
            head, last = model[:-1], model[-1]
            names = (list(head.get_feature_names_out()) if hasattr(head, "get_feature_names_out")
                     else [])

            def transform(X: pd.DataFrame) -> Any:
                out = head.transform(self._frame(X))
                return out.toarray() if hasattr(out, "toarray") else np.asarray(out)

            linear = hasattr(last, "coef_") and not hasattr(last, "estimators_")
            return ExplainTarget(kind="sklearn_logreg" if linear else self.kind, model=last,
                                 transform=transform, feature_names=[str(n) for n in names],
                                 classes=self.labels.classes)
        names = self.features or _fitted_names(model) or []
        return ExplainTarget(kind=self.kind, model=model, transform=self._frame,
                             feature_names=list(names), classes=self.labels.classes)

    def save(self, directory: Path) -> dict[str, Any]:  # pragma: no cover - never re-saved
        raise InvalidArgumentError(
            "A registered external model is already saved in the registry; download it instead."
        )


# -- loading ---------------------------------------------------------------------------------


def load_registered_predictor(directory: Path, record: Mapping[str, Any] | None, *,
                              y_train: pd.Series | None = None) -> Predictor | ExternalPredictor:
    """Rebuild a downloaded model version from its load-and-predict record.

    ``y_train`` (the train labels of its training dataset) supplies the label classes when the
    model does not carry them (boosters, torch modules).

    Raises:
        ConfigError: no record (no known format among the files), a pickle, or a torch
            ``config.json`` that does not say how to rebuild the module.
    """
    directory = Path(directory)
    if record is None:
        raise ConfigError(
            f"The model in {str(directory)!r} holds no file format fstrain can load (predictor.json, "
            "or files written by fstrain.trainers.formats.save_xgboost, save_lightgbm, save_sklearn "
            "or save_torch). Save it with one of those before model.save(dir)."
        )
    loader, folder = record["loader"], directory / record.get("path", ".")
    if loader == "fstrain":
        return load_predictor(folder)
    if loader == "pickle":
        raise ConfigError(
            f"The model is a pickle file ({record.get('path')}); fstrain validate does not "
            "unpickle (it can run code from the file). Re-register it in a safe format: "
            "fstrain.trainers.formats.save_xgboost, save_lightgbm, save_sklearn or save_torch."
        )
    if loader == "xgboost":
        model = formats.load_xgboost(folder)
    elif loader == "lightgbm":
        model = formats.load_lightgbm(folder)
    elif loader == "sklearn":
        model = formats.load_sklearn(folder)
    else:  # torch
        model, kind = _torch_module(*formats.load_torch_state(folder))
        return ExternalPredictor(kind=kind, model=model,
                                 labels=_labels(model, loader, y_train, torch_module=True),
                                 features=_config_features(folder))
    return ExternalPredictor(kind=loader, model=model, labels=_labels(model, loader, y_train))


def _labels(model: Any, loader: str, y_train: pd.Series | None, *,
            torch_module: bool = False) -> LabelInfo:
    name = str(getattr(y_train, "name", None) or "label")
    classes = getattr(model, "classes_", None)
    if classes is not None:
        return LabelInfo(name, tuple(np.asarray(classes).tolist()))
    if not torch_module and _is_regression(model, loader):
        return LabelInfo(name, ())
    if y_train is None:
        raise ConfigError(f"The registered {loader} model does not say its label classes; "
                          "pass the train labels (y_train).")
    return LabelInfo(name, tuple(sorted(pd.Series(y_train).dropna().unique().tolist())))


def _is_regression(model: Any, loader: str) -> bool:
    if loader == "sklearn":
        return not hasattr(model, "predict_proba")
    if loader == "xgboost":
        booster = model.get_booster() if hasattr(model, "get_booster") else model
        objective = json.loads(booster.save_config())["learner"]["objective"]["name"]
        return not objective.startswith(("binary:", "multi:"))
    if loader == "lightgbm":
        objective = str(model.params.get("objective", "")) if hasattr(model, "params") else ""
        dumped = model.dump_model().get("objective", "") if not objective else objective
        return not str(dumped).startswith(("binary", "multiclass", "cross_entropy"))
    return False


def _torch_module(state: dict[str, Any], config: dict[str, Any]) -> tuple[Any, str]:
    if "net" in config:
        from fstrain.trainers.nets import build_net

        arch = {k: v for k, v in config.items() if k != "features"}
        module, kind = build_net(arch), "mlp" if config["net"] == "mlp" else "torch"
    elif "module" in config:
        target = str(config["module"])
        mod_name, _, cls_name = target.partition(":")
        try:
            cls = getattr(importlib.import_module(mod_name), cls_name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigError(
                f"torch model config.json names module {target!r}, which cannot be imported "
                f"({exc}). Install the package that defines it."
            ) from None
        module, kind = cls(**dict(config.get("kwargs") or {})), "torch"
    else:
        raise ConfigError(
            "A torch model registered through the API must say how to rebuild its module in "
            "the config of save_torch(module, dir, config): {'net': 'mlp', 'n_features': ..., "
            "...} for fstrain's nets, or {'module': 'package.module:Class', 'kwargs': {...}}. "
            f"Got config keys {sorted(config)} instead."
        )
    module.load_state_dict(state)
    module.eval()
    return module, kind


def _config_features(folder: Path) -> list[str] | None:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    features = config.get("features")
    return [str(f) for f in features] if isinstance(features, list) else None


def _fitted_names(model: Any) -> list[str] | None:
    names = getattr(model, "feature_names_in_", None)
    if names is None and hasattr(model, "feature_names"):
        names = model.feature_names  # xgboost.Booster
    if names is None and callable(getattr(model, "feature_name", None)):
        names = model.feature_name()  # lightgbm.Booster
    return [str(n) for n in names] if names is not None and len(names) else None


def _numeric_matrix(frame: pd.DataFrame) -> np.ndarray:
    text = [c for c in frame.columns
            if not (pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c]))]
    if text:
        raise ConfigError(
            f"A torch model takes numbers; the view's columns {text} are not numeric. List the "
            "numeric columns it was trained on as config['features'] in save_torch, or register "
            "a model whose first step encodes them (a scikit-learn Pipeline)."
        )
    return frame.to_numpy(dtype=np.float32, na_value=np.nan)


def _torch_scores(module: Any, X: np.ndarray, *, regression: bool) -> np.ndarray:
    import torch

    with torch.no_grad():
        out = module(torch.as_tensor(X, dtype=torch.float32)).detach().cpu().numpy()
    if regression:
        return out.reshape(-1)
    if out.ndim == 1 or out.shape[1] == 1:
        p = 1.0 / (1.0 + np.exp(-out.reshape(-1)))
        return p
    e = np.exp(out - out.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _booster_input(kind: str, model: Any, X: Any) -> Any:
    if kind == "xgboost" and not hasattr(model, "predict_proba"):
        import xgboost as xgb

        return xgb.DMatrix(X, enable_categorical=True)
    return X
