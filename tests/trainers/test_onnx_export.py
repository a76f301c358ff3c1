"""ONNX export: preprocessing + model in one graph; ONNX Runtime equals the native model."""

from __future__ import annotations

import numpy as np
import pytest

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.trainers import train
from fstrain.trainers.onnx_export import check_onnx, onnx_inputs, to_onnx


@pytest.mark.parametrize("kind, extra", [
    ("xgboost", {"params": {"n_estimators": 20}}),
    ("lightgbm", {"params": {"n_estimators": 20}}),
    ("sklearn_logreg", {}),
    ("sklearn_rf", {"params": {"n_estimators": 10}}),
    ("mlp", {"torch": {"epochs": 2, "checkpoint": False}}),
])
def test_onnx_runtime_reproduces_the_native_probabilities(binary_data, tmp_path, kind, extra):
    X_tr, y_tr, X_va, y_va = binary_data
    predictor = train({"model": kind, **extra}, X_tr, y_tr, X_va, y_va, workdir=tmp_path).model
    blob = to_onnx(predictor)
    check = check_onnx(predictor, blob, X_va)
    assert check["passed"] and check["max_abs_diff"] < 1e-5 and check["argmax_agreement"] == 1
    assert check["rows"] == len(X_va) and len(check["sha256"]) == 64
    # missing values reach the graph: NaN numbers, '' categories
    feeds = onnx_inputs(predictor.schema, X_va)
    assert np.isnan(feeds["pre_age"]).any() and (feeds["pre_city"] == "").any()


def test_multiclass_and_unsupported_kinds(multiclass_data, tmp_path):
    X_tr, y_tr, X_va, y_va = multiclass_data
    model = train({"model": "xgboost", "params": {"n_estimators": 10}}, X_tr, y_tr, X_va, y_va,
                  workdir=tmp_path / "x").model
    check = check_onnx(model, to_onnx(model), X_va)
    assert check["passed"] and check["output"].startswith("model_probabilities [N, 3]")
    cat = train({"model": "catboost", "params": {"n_estimators": 5}}, X_tr, y_tr, X_va, y_va,
                workdir=tmp_path / "c").model
    with pytest.raises(InvalidArgumentError, match="ONNX export supports classifiers of kinds"):
        to_onnx(cat)


@pytest.mark.parametrize("kind", ["xgboost", "sklearn_logreg"])
def test_the_prior_correction_of_class_weights_is_in_the_graph(binary_data, tmp_path, kind):
    """A class-weighted model's saved predictor divides the odds by the weights
    (calibration: auto → prior); the exported graph must answer the same, not the raw model."""
    X_tr, y_tr, X_va, y_va = binary_data
    predictor = train({"model": kind, "imbalance": "class_weight",
                       "params": {"n_estimators": 10} if kind == "xgboost" else {}},
                      X_tr, y_tr, X_va, y_va, workdir=tmp_path).model
    assert predictor.calibration is not None and predictor.calibration.class_weights
    features = predictor._input(X_va)
    raw = predictor.raw_proba_matrix(features)
    corrected = predictor.predict_proba_matrix(features)
    assert np.abs(raw - corrected).max() > 1e-3  # the correction matters here
    check = check_onnx(predictor, to_onnx(predictor), X_va)
    assert check["passed"] and check["max_abs_diff"] < 1e-5, check


def test_a_validation_fitted_calibration_is_refused_not_dropped(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    predictor = train({"model": "sklearn_logreg", "calibration": "platt"},
                      X_tr, y_tr, X_va, y_va, workdir=tmp_path).model
    with pytest.raises(InvalidArgumentError, match="'platt' calibration is not in the graph"):
        to_onnx(predictor)
