"""Probability calibration: undo what class weights did to the probabilities, honestly.

Weighting the positive class by ``w`` (``scale_pos_weight``, ``class_weight``) or resampling it
trains a model of a world where positives are ``w`` times as common: its probabilities are
inflated, and its log-loss and Brier score can be worse than a constant predictor's even when
it ranks well. The corrections, chosen by ``TrainConfig.calibration``:

- ``prior`` — the prior (odds) correction: each class probability is divided by the class's
  effective training weight and the row renormalised (binary: the odds divided by ``w``). It
  fits nothing and uses no data: it undoes exactly the reweighting the imbalance plan applied
  (see :func:`effective_class_weights`), so the model again speaks of the train split's class
  frequencies. Any number of classes.
- ``platt`` — Platt scaling, binary only: a logistic regression of the label on the logit of
  the prior-corrected probability, fitted on the **validation split** (never the test split).
- ``isotonic`` — isotonic regression of the label on the prior-corrected probability, fitted on
  the validation split, binary only; outputs are kept inside ``[1e-6, 1 - 1e-6]`` so one wrong
  certain answer cannot make the log-loss infinite.
- ``auto`` (default) — ``prior`` when the imbalance plan reweighted or resampled the classes,
  nothing otherwise. ``none`` keeps the raw probabilities.

Every correction is monotone, so rankings (ROC/PR AUC) and the decision threshold the
model-validation pipeline picks on the validation split select the same rows; only the
probabilities change. The fitted correction is saved in ``predictor.json`` and applied by the
saved predictor at inference, and it is recorded in the model's training config (under
``imbalance.calibration``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fstrain.kernel.errors import ConfigError

METHODS = ("auto", "none", "prior", "platt", "isotonic")
_EPS = 1e-6
_LOGIT_CLIP = 1e-12


def effective_class_weights(record: dict[str, Any], classes: tuple[Any, ...]) -> np.ndarray | None:
    """The weight each class had in training relative to its frequency in the train split,
    from an imbalance plan's record; ``None`` when every class counted once."""
    keys = [str(c) for c in classes]
    if "class_weight" in record:  # sample weights (class_weight, or scale_pos_weight as weights)
        weights = np.array([float(record["class_weight"][k]) for k in keys])
    elif "scale_pos_weight" in record:  # the booster's own knob: the positive class times w
        weights = np.array([1.0, float(record["scale_pos_weight"])])
    elif record.get("train_counts_after") != record.get("train_counts_before"):  # resampled
        before, after = record["train_counts_before"], record["train_counts_after"]
        weights = np.array([after[k] / before[k] if before[k] else 1.0 for k in keys])
    else:
        return None
    return None if np.allclose(weights, weights[0]) else weights


@dataclass(frozen=True)
class Calibration:
    """A fitted probability correction (see the module docstring).

    Attributes:
        method: ``prior``, ``platt`` or ``isotonic``.
        class_weights: the effective training weight of each class (the prior correction);
            ``None`` when the classes were not reweighted.
        platt: ``(slope, intercept)`` on the logit of the prior-corrected probability.
        isotonic: ``(x, y)`` breakpoints, interpolated linearly (as scikit-learn predicts).
        fitted_on: what the correction was fitted on (the validation split's size, or nothing).
    """

    method: str
    class_weights: tuple[float, ...] | None = None
    platt: tuple[float, float] | None = None
    isotonic: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    fitted_on: str = "nothing (the class weights alone)"

    def apply(self, matrix: np.ndarray) -> np.ndarray:
        """Correct an ``(n, K)`` class-probability matrix."""
        out = _prior(np.asarray(matrix, dtype=np.float64), self.class_weights)
        if self.platt is not None:
            slope, intercept = self.platt
            out = _binary(_sigmoid(slope * _logit(out[:, 1]) + intercept))
        elif self.isotonic is not None:
            x, y = self.isotonic
            out = _binary(np.clip(np.interp(out[:, 1], x, y), _EPS, 1 - _EPS))
        return out

    def to_json(self) -> dict[str, Any]:
        """A JSON-able record (saved in ``predictor.json`` and the model's training config)."""
        return {"method": self.method, "fitted_on": self.fitted_on,
                "class_weights": None if self.class_weights is None else list(self.class_weights),
                "platt": None if self.platt is None else list(self.platt),
                "isotonic": None if self.isotonic is None else [list(v) for v in self.isotonic]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        """Inverse of :meth:`to_json`."""
        weights, platt, iso = data.get("class_weights"), data.get("platt"), data.get("isotonic")
        return cls(
            method=str(data["method"]), fitted_on=str(data.get("fitted_on", "")),
            class_weights=None if weights is None else tuple(float(w) for w in weights),
            platt=None if platt is None else (float(platt[0]), float(platt[1])),
            isotonic=None if iso is None else (tuple(map(float, iso[0])), tuple(map(float, iso[1]))),
        )


def check_method(method: str, classes: tuple[Any, ...]) -> None:
    """Refuse, before any training, a fitted correction the label cannot take."""
    if method in ("platt", "isotonic") and len(classes) != 2:
        raise ConfigError(f"calibration={method!r} fits a binary label; this one has "
                          f"{len(classes)} classes. Use calibration='prior' or 'none'.")


def fit_calibration(method: str, raw_val: np.ndarray, y_val: np.ndarray,
                    imbalance: dict[str, Any], classes: tuple[Any, ...]) -> Calibration | None:
    """The correction ``method`` asks for, given the model's raw validation probabilities
    ``raw_val`` (``(n, K)``), the validation labels (class indices) and the imbalance record."""
    weights = effective_class_weights(imbalance, classes)
    if method == "none" or (method == "auto" and weights is None):
        return None
    base = Calibration("prior", None if weights is None else tuple(map(float, weights)))
    if method in ("auto", "prior"):
        return base
    check_method(method, classes)
    y = np.asarray(y_val, dtype=np.int64)
    positives = int(y.sum())
    if positives == 0 or positives == len(y):
        raise ConfigError(f"calibration={method!r} is fitted on the validation split, which "
                          f"holds one class only ({positives} positives of {len(y)} rows). Use "
                          "calibration='prior' or a validation split with both classes.")
    p = base.apply(raw_val)[:, 1]
    fitted_on = f"validation split ({len(y)} rows, {positives} positive)"
    if method == "platt":
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=1e6, max_iter=1000).fit(_logit(p)[:, None], y)
        return Calibration("platt", base.class_weights, fitted_on=fitted_on,
                           platt=(float(model.coef_[0, 0]), float(model.intercept_[0])))
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(out_of_bounds="clip", y_min=_EPS, y_max=1 - _EPS).fit(p, y)
    return Calibration("isotonic", base.class_weights, fitted_on=fitted_on,
                       isotonic=(tuple(map(float, iso.X_thresholds_)),
                                 tuple(map(float, iso.y_thresholds_))))


def _prior(matrix: np.ndarray, weights: tuple[float, ...] | None) -> np.ndarray:
    if weights is None:
        return matrix
    scaled = matrix / np.asarray(weights, dtype=np.float64)
    return scaled / scaled.sum(axis=1, keepdims=True)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _LOGIT_CLIP, 1 - _LOGIT_CLIP)
    return np.log(p) - np.log1p(-p)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _binary(p: np.ndarray) -> np.ndarray:
    return np.column_stack([1.0 - p, p])


def calibrate(predictor: Any, method: str, raw_val: Callable[[], np.ndarray], y_val: np.ndarray,
              imbalance: dict[str, Any]) -> np.ndarray | None:
    """Fit the correction ``method`` asks for, attach it to ``predictor`` and record it in the
    imbalance record (``imbalance["calibration"]``, which the model's training config keeps).

    ``raw_val`` returns the model's uncorrected validation probabilities (called only when a
    correction is fitted). Returns the corrected validation probabilities, or ``None`` when no
    correction applies (the model's own probabilities stand).
    """
    if predictor.labels.task == "regression":
        return None
    weights = effective_class_weights(imbalance, predictor.labels.classes)
    if method == "none" or (method == "auto" and weights is None):
        predictor.calibration = None
        imbalance["calibration"] = {"method": "none", "requested": method,
                                    "reason": "requested" if method == "none" else
                                    "the classes were not reweighted"}
        return None
    raw = raw_val()
    fitted = fit_calibration(method, raw, y_val, imbalance, predictor.labels.classes)
    predictor.calibration = fitted
    imbalance["calibration"] = {"requested": method, **(fitted.to_json() if fitted else {})}
    return None if fitted is None else fitted.apply(raw)
