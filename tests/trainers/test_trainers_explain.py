"""Every model kind the trainers make is explained by the model-validation code (SHAP, or
integrated gradients with a pixel heatmap for the CNN); a failed explanation fails its gate."""

from __future__ import annotations

import numpy as np
import pytest

from fstrain.trainers import train
from validation.evaluate import EvaluationSettings, GateSpec, _apply_gates
from validation.evaluate_tasks import explain_model, explanation_images
from validation.scorecard import Scorecard

FAST = {"epochs": 4, "batch_size": 64, "lr": 0.01, "device": "cpu"}
SETTINGS = EvaluationSettings(shap_samples=20, seed=0)
KINDS = {
    "xgboost": ({"params": {"n_estimators": 30}}, "xgboost pred_contribs"),
    "lightgbm": ({"params": {"n_estimators": 30}}, "lightgbm pred_contrib"),
    "sklearn_rf": ({"params": {"n_estimators": 20}}, "shap.TreeExplainer"),
    "sklearn_logreg": ({}, "linear SHAP (closed form"),
    "mlp": ({"torch": FAST}, ""),  # DeepExplainer, or integrated gradients as its fallback
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_tabular_kind_is_explained(kind, binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    extra, method = KINDS[kind]
    predictor = train({"model": kind, **extra}, X_tr, y_tr, X_va, y_va,
                      workdir=tmp_path / "run").model
    card = Scorecard("m", 1)
    positive = 1 if kind in ("mlp",) else None
    explanation = explain_model(card, predictor, X_va, SETTINGS, positive)
    assert card.explanation_error is None, card.explanation_error
    assert card.explanation["method"].startswith(method)
    columns = [g["column"] for g in card.explanation["by_column"]]
    assert set(columns) <= {"age", "income", "city", "member"}  # original names, no encodings
    assert columns[0] in ("age", "city")  # the label depends on age and city = oslo most
    names = [g["feature"] for g in card.explanation["global_importance"]]
    assert not any(n.startswith(("cat__", "num__")) for n in names) and "city = (missing)" in names
    city = next(g for g in card.explanation["by_column"] if g["column"] == "city")
    assert all(t["feature"].startswith("city = ") for t in city["top_features"])
    assert explanation_images(predictor, explanation)["shap_importance"].startswith(b"\x89PNG")


def test_linear_explanation_is_exact_in_closed_form(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    predictor = train({"model": "sklearn_logreg"}, X_tr, y_tr, X_va, y_va,
                      workdir=tmp_path / "run").model
    target = predictor.explain_target
    inputs = target.transform(X_va)
    from validation.explain import explain

    ex = explain(target.model, inputs, feature_names=target.feature_names, max_samples=len(X_va),
                 background_size=len(X_va), method="linear")
    margin = target.model.decision_function(inputs)  # additive: values + base = the margin
    np.testing.assert_allclose(ex.values.sum(axis=1) + ex.expected_value, margin, atol=1e-6)
    assert "KernelExplainer" not in ex.method  # no coalition sampling: one matrix product


def test_cnn_gets_pixel_attributions_and_a_heatmap(image_data, tmp_path):
    X_tr, y_tr, X_va, y_va = image_data
    predictor = train({"model": "cnn", "params": {"channels": [4, 8], "hidden": 16},
                       "torch": {**FAST, "epochs": 2}}, X_tr, y_tr, X_va, y_va,
                      workdir=tmp_path / "run").model
    card = Scorecard("digits", 1)
    explanation = explain_model(card, predictor, X_va, EvaluationSettings(shap_samples=4), 0)
    assert card.explanation_error is None, card.explanation_error
    assert explanation.values.shape[1] == 28 * 28
    assert explanation.feature_names[29] == "pixel_1_1"
    images = explanation_images(predictor, explanation)
    assert images["attribution_heatmap"].startswith(b"\x89PNG")


def test_a_failed_explanation_fails_its_gate(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    predictor = train({"model": "mlp", "torch": FAST}, X_tr, y_tr, X_va, y_va,
                      workdir=tmp_path / "run").model
    card = Scorecard("m", 1)
    assert explain_model(card, predictor, X_va, SETTINGS, class_index=7) is None  # 2 outputs
    assert "class_index" in card.explanation_error
    _apply_gates(card, [GateSpec("explanation_available", "fstrain standard")], {}, None,
                 "roc_auc")
    [result] = card.gates["results"]
    assert result["status"] == "failed" and "explanation failed" in result["detail"]
    assert card.status == "failed"
    html = card.to_html()
    assert 'id="explanation-failed"' in html and "Explanation FAILED" in html
