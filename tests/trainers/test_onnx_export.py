"""ONNX export: preprocessing + model in one graph; ONNX Runtime equals the native model."""

from __future__ import annotations

import numpy as np
import pytest

from fstrain.kernel.errors import InvalidArgumentError
from pipelines.trainers import train
from pipelines.trainers.onnx_export import check_onnx, onnx_inputs, to_onnx


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
