"""Probability calibration: the class weights' inflation is undone, the correction is fitted on
the validation split only, recorded, saved, and applied by the saved predictor and by the
registry's load-and-predict path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fstrain.kernel.errors import ConfigError
from fstrain.trainers import load_predictor, train
from fstrain.trainers.calibration import Calibration, effective_class_weights
from fstrain.trainers.config import load_config

PARAMS = {"n_estimators": 40, "max_depth": 3, "n_jobs": 1}


def _log_loss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


@pytest.mark.parametrize(("record", "expected"), [
    ({"strategy": "none", "train_counts_before": {"0": 90, "1": 10},
      "train_counts_after": {"0": 90, "1": 10}}, None),
    ({"scale_pos_weight": 9.0, "train_counts_before": {"0": 90, "1": 10},
      "train_counts_after": {"0": 90, "1": 10}}, [1.0, 9.0]),
    ({"class_weight": {"0": 0.55, "1": 5.0}}, [0.55, 5.0]),
    ({"train_counts_before": {"0": 90, "1": 10}, "train_counts_after": {"0": 90, "1": 90}},
     [1.0, 9.0]),
    ({"train_counts_before": {"0": 90, "1": 10}, "train_counts_after": {"0": 10, "1": 10}},
     [10 / 90, 1.0]),
])
def test_effective_class_weights_of_every_strategy(record, expected):
    weights = effective_class_weights(record, (0, 1))
    assert (weights is None) if expected is None else np.allclose(weights, expected)


def test_prior_correction_divides_the_odds_by_the_weight_and_keeps_the_order():
    raw = np.array([[0.5, 0.5], [0.1, 0.9], [0.8, 0.2]])
    fixed = Calibration("prior", (1.0, 9.0)).apply(raw)
    odds = raw[:, 1] / raw[:, 0] / 9.0
    np.testing.assert_allclose(fixed[:, 1], odds / (1 + odds))
    np.testing.assert_allclose(fixed.sum(axis=1), 1.0)
    assert list(np.argsort(fixed[:, 1])) == list(np.argsort(raw[:, 1]))
    three = Calibration("prior", (1.0, 2.0, 4.0)).apply(np.array([[0.2, 0.4, 0.4]]))
    np.testing.assert_allclose(three, [[0.5, 0.5, 0.25]] / np.array(1.25))


def test_weighted_xgboost_is_calibrated_saved_and_reloaded(imbalanced_data, tmp_path):
    from model_registry.predictor_record import predictor_record
    from fstrain.trainers.external import load_registered_predictor

    X_tr, y_tr, X_va, y_va = imbalanced_data
    base = {"model": "xgboost", "imbalance": "scale_pos_weight", "params": PARAMS}
    raw = train({**base, "calibration": "none"}, X_tr, y_tr, X_va, y_va, workdir=tmp_path / "a")
    fixed = train(base, X_tr, y_tr, X_va, y_va, workdir=tmp_path / "b")  # auto → prior
    y = y_va["label"].to_numpy()
    p_raw, p_fixed = raw.model.predict_proba(X_va), fixed.model.predict_proba(X_va)
    # the weights inflate the positives; the correction brings the mean back near the base rate
    assert p_raw.mean() > 2 * y.mean()
    assert abs(p_fixed.mean() - y.mean()) < abs(p_raw.mean() - y.mean()) / 3
    assert _log_loss(y, p_fixed) < _log_loss(y, p_raw)
    assert fixed.metrics["logloss"] == pytest.approx(_log_loss(y, p_fixed), rel=1e-6)
    assert fixed.metrics["auc"] == pytest.approx(raw.metrics["auc"])  # same ranking
    record = fixed.imbalance["calibration"]
    assert record["method"] == "prior" and record["requested"] == "auto"
    assert record["class_weights"] == [1.0, pytest.approx(fixed.imbalance["scale_pos_weight"])]
    assert raw.imbalance["calibration"]["method"] == "none"

    folder = tmp_path / "saved"
    info = fixed.model.save(folder)
    assert json.loads((folder / "predictor.json").read_text())["calibration"]["method"] == "prior"
    np.testing.assert_allclose(load_predictor(folder).predict_proba(X_va), p_fixed)
    registered = load_registered_predictor(folder, predictor_record(info["files"]))
    np.testing.assert_allclose(registered.predict_proba(X_va), p_fixed)


@pytest.mark.parametrize("method", ["platt", "isotonic"])
def test_platt_and_isotonic_are_fitted_on_the_validation_split(imbalanced_data, tmp_path, method):
    X_tr, y_tr, X_va, y_va = imbalanced_data
    res = train({"model": "sklearn_logreg", "imbalance": "class_weight", "calibration": method},
                X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    record = res.imbalance["calibration"]
    positives = int(y_va["label"].sum())
    assert record["method"] == method
    assert record["fitted_on"] == f"validation split ({len(y_va)} rows, {positives} positive)"
    p = res.model.predict_proba(X_va)
    assert 0 < p.min() and p.max() < 1
    assert abs(p.mean() - y_va["label"].mean()) < 0.02  # fitted there: the means agree


def test_calibration_options_that_cannot_apply_are_refused(multiclass_data, tmp_path):
    with pytest.raises(ConfigError, match="calibration='prior'.*imbalance='none'"):
        load_config({"model": "xgboost", "calibration": "prior"})
    with pytest.raises(ConfigError, match="regression needs calibration"):
        load_config({"model": "xgboost", "task": "regression", "calibration": "platt"})
    with pytest.raises(ConfigError, match="calibration: .*isotonic.*got .other."):
        load_config({"model": "xgboost", "calibration": "other"})
    X_tr, y_tr, X_va, y_va = multiclass_data
    with pytest.raises(ConfigError, match="calibration='platt' fits a binary label; .* 3 classes"):
        train({"model": "sklearn_logreg", "calibration": "platt"},
              X_tr, y_tr, X_va, y_va, workdir=tmp_path)
