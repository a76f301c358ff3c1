"""What every predictor kind shares: the :class:`Predictor` interface (raw feature DataFrames in,
class probabilities out), :class:`ExplainTarget` for SHAP, and :class:`PredictorBase`, which
applies the saved probability correction and writes ``predictor.json``.

The kinds build on it beside their trainers (:mod:`~fstrain.trainers.tabular_predictor`,
:mod:`~fstrain.trainers.torch_predictor`, :mod:`~fstrain.trainers.spark_predictor`,
:mod:`~fstrain.trainers.lora_predictor`, the CatBoost, Keras and Flax trainers), and
:func:`fstrain.trainers.predictor.load_predictor` rebuilds any of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.trainers.data import LabelInfo

if TYPE_CHECKING:  # pragma: no cover
    from fstrain.trainers.calibration import Calibration

FORMAT_VERSION = 1
PREDICTOR_FILE = "predictor.json"


@dataclass(frozen=True)
class ExplainTarget:
    """What SHAP needs: the raw model and how a DataFrame becomes its input. The explained
    output is the model's own (margin or probability), before any :attr:`PredictorBase.calibration`:
    a prior correction only shifts the margin, so the attributions are the same.

    Attributes:
        kind: ``xgboost``, ``lightgbm``, ``sklearn_logreg``, ``sklearn_rf``, ``mlp`` or ``cnn``.
        model: ``xgboost.Booster``, ``lightgbm.Booster``, a scikit-learn estimator or a ``torch.nn.Module`` (eval mode;
            outputs logits).
        transform: DataFrame → model input (float32 matrix, or ``(N, 1, H, W)`` images).
        feature_names: names of the transformed columns (tabular) or ``["pixels"]``.
        classes: label classes, in probability-column order.
    """

    kind: str
    model: Any
    transform: Callable[[pd.DataFrame], np.ndarray]
    feature_names: list[str]
    classes: tuple[Any, ...]


@runtime_checkable
class Predictor(Protocol):
    """A fitted classifier over raw feature DataFrames."""

    kind: str
    labels: LabelInfo

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Positive-class probability ``(n,)`` (binary) or ``(n, K)`` class probabilities."""
        ...

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted labels (original label values)."""
        ...

    def save(self, directory: Path) -> dict[str, Any]:
        """Write safe-format files + ``predictor.json``; return ``{framework, files, ...}``."""
        ...

    @property
    def explain_target(self) -> ExplainTarget:
        """The underlying model and its input transform (for SHAP)."""
        ...


class PredictorBase:
    """What every predictor kind shares: the probability correction, ``predict_proba`` and
    ``predict`` over :meth:`raw_proba_matrix`, and the ``predictor.json`` it writes."""

    kind: str
    labels: LabelInfo
    framework: str
    #: the probability correction fitted at training time (saved in predictor.json and applied
    #: to every prediction; see :mod:`fstrain.trainers.calibration`)
    calibration: Calibration | None = None

    def raw_proba_matrix(self, X: Any) -> np.ndarray:  # pragma: no cover - abstract
        """The model's own class probabilities (before :attr:`calibration`)."""
        raise NotImplementedError

    def predict_proba_matrix(self, X: Any) -> np.ndarray:
        """Class-probability matrix ``(n, K)`` of an already transformed input, corrected by
        :attr:`calibration` (regression values pass unchanged)."""
        raw = self.raw_proba_matrix(X)
        if self.calibration is None or self.labels.task == "regression":
            return raw
        return self.calibration.apply(raw)

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Positive-class probability ``(n,)`` (binary) or ``(n, K)`` class probabilities."""
        if self.labels.task == "regression":
            raise InvalidArgumentError(
                f"{self.kind} model for label {self.labels.name!r} is a regression: it has no "
                "class probabilities. Use predict()."
            )
        mat = self.predict_proba_matrix(self._input(X))
        return mat[:, 1] if self.labels.n_classes == 2 else mat

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted labels (argmax; 0.5 threshold for binary), or values for a regression."""
        mat = self.predict_proba_matrix(self._input(X))
        if self.labels.task == "regression":
            return np.asarray(mat, dtype=np.float64)
        return self.labels.decode(mat.argmax(axis=1))

    def _input(self, X: pd.DataFrame) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _write_manifest(self, directory: Path, body: dict[str, Any], files: list[Path]) -> dict:
        rel = sorted(str(Path(f).resolve().relative_to(directory.resolve())) for f in files)
        info = {
            "format_version": FORMAT_VERSION,
            "kind": self.kind,
            "framework": self.framework,
            "labels": self.labels.to_json(),
            "files": rel,
            **body,
        }
        if self.calibration is not None:
            info["calibration"] = self.calibration.to_json()
        (directory / PREDICTOR_FILE).write_text(json.dumps(info, indent=2, sort_keys=True))
        return {"framework": self.framework, "kind": self.kind, "files": rel + [PREDICTOR_FILE]}


def jsonable_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with every value JSON can not hold replaced by its ``repr``."""
    out = {}
    for key, value in params.items():
        try:
            json.dumps(value)
            out[key] = value
        except TypeError:
            out[key] = repr(value)
    return out
