"""The tabular predictor: the preprocessing ``ColumnTransformer`` fitted on the train split and an
XGBoost/LightGBM booster or a scikit-learn estimator, saved as skops + XGBoost JSON / LightGBM
text (or skops) and rebuilt from those files (:func:`load_tabular_predictor`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.trainers import formats
from fstrain.trainers.data import FeatureSchema, LabelInfo
from fstrain.trainers.predictor_base import ExplainTarget, PredictorBase, jsonable_params
from fstrain.trainers.preprocessing import feature_names_out, transform

#: kind -> the load function of its model files
MODEL_LOADERS = {"xgboost": formats.load_xgboost, "lightgbm": formats.load_lightgbm,
                 "sklearn_logreg": formats.load_sklearn, "sklearn_rf": formats.load_sklearn}


class TabularPredictor(PredictorBase):
    """Preprocessing ``ColumnTransformer`` + XGBoost/LightGBM booster or scikit-learn estimator."""

    def __init__(
        self,
        *,
        kind: str,
        schema: FeatureSchema,
        preprocessor: Any,
        model: Any,
        labels: LabelInfo,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self.framework = kind if kind in ("xgboost", "lightgbm") else "sklearn"
        self.schema = schema
        self.preprocessor = preprocessor
        self.model = model
        self.labels = labels
        self.params = params or {}

    def _input(self, X: pd.DataFrame) -> np.ndarray:
        return transform(self.preprocessor, self.schema, X)

    def raw_proba_matrix(self, X: np.ndarray) -> np.ndarray:
        """The model's class-probability matrix ``(n, K)`` for a transformed matrix."""
        if self.kind == "xgboost":
            import xgboost as xgb

            out = self.model.predict(xgb.DMatrix(X))
        elif self.kind == "lightgbm":
            out = self.model.predict(X)
        else:
            out = self.model.predict_proba(X)
        out = np.asarray(out, dtype=np.float64)
        if self.labels.task == "regression":
            return out  # predicted values, not probabilities
        return np.column_stack([1.0 - out, out]) if out.ndim == 1 else out

    @property
    def explain_target(self) -> ExplainTarget:
        """Booster/estimator + the preprocessing transform."""
        return ExplainTarget(
            kind=self.kind, model=self.model, transform=self._input,
            feature_names=feature_names_out(self.preprocessor), classes=self.labels.classes,
        )

    def save(self, directory: Path) -> dict[str, Any]:
        """skops preprocessor + XGBoost JSON / LightGBM text booster (or skops estimator) +
        predictor.json."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = list(formats.save_sklearn(self.preprocessor, directory / "preprocessor"))
        if self.kind == "xgboost":
            files += formats.save_xgboost(self.model, directory / "model", fmt="json")
        elif self.kind == "lightgbm":
            files += formats.save_lightgbm(self.model, directory / "model")
        else:
            files += formats.save_sklearn(self.model, directory / "model")
        body = {"features": self.schema.to_json(), "params": jsonable_params(self.params)}
        return self._write_manifest(directory, body, files)


def load_tabular_predictor(directory: Path, info: dict[str, Any], labels: LabelInfo,
                           schema: FeatureSchema, preprocessor: Any) -> TabularPredictor:
    """Rebuild a :class:`TabularPredictor` from the files its ``save`` wrote."""
    kind = info["kind"]
    return TabularPredictor(
        kind=kind, schema=schema, preprocessor=preprocessor,
        model=MODEL_LOADERS[kind](directory / "model"), labels=labels, params=info.get("params"),
    )
