"""SHAP explanations add up to the explained output, for every supported model family."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError
from validation.explain import explain, sample_rows

# shap 0.51's own deprecation noise (matplotlib colormaps, numpy __array_wrap__)
pytestmark = [
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:shap.*"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:shap.*"),
]


def test_xgboost_values_sum_to_margin_minus_expected_value(xgb_setup):
    import xgboost as xgb

    model, X, _ = xgb_setup
    e = explain(model, X, max_samples=80, seed=5)
    assert e.values.shape == (80, 4) and e.feature_names == tuple(X.columns)
    assert e.method.startswith("xgboost pred_contribs") and e.output == "margin (log-odds)"
    margin = model.get_booster().predict(xgb.DMatrix(X.iloc[e.row_index]), output_margin=True)
    np.testing.assert_allclose(e.values.sum(axis=1) + e.expected_value, margin, atol=1e-4)
    imp = e.global_importance()
    assert [v for _, v in imp] == sorted((v for _, v in imp), reverse=True)
    assert imp[-1][0] == "noise"  # the feature the label does not depend on
    assert dict(imp)["amount"] == pytest.approx(np.abs(e.values[:, 0]).mean())


def test_sample_is_bounded_and_seeded(xgb_setup):
    model, X, _ = xgb_setup
    a = explain(model, X, max_samples=50, seed=1)
    b = explain(model, X, max_samples=50, seed=1)
    c = explain(model, X, max_samples=50, seed=2)
    np.testing.assert_array_equal(a.row_index, b.row_index)
    assert not np.array_equal(a.row_index, c.row_index)
    assert len(np.unique(a.row_index)) == 50
    assert list(sample_rows(10, 50, 0)) == list(range(10))


def test_xgboost_booster_regression():
    import xgboost as xgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = 2 * X[:, 0] - X[:, 1] + rng.normal(0, 0.1, 200)
    booster = xgb.train({"max_depth": 3, "nthread": 1}, xgb.DMatrix(X, label=y),
                        num_boost_round=20)
    e = explain(booster, X, max_samples=60, feature_names=["a", "b", "c"])
    pred = booster.predict(xgb.DMatrix(X[e.row_index]), output_margin=True)
    np.testing.assert_allclose(e.values.sum(axis=1) + e.expected_value, pred, atol=1e-4)
    assert e.global_importance()[0][0] == "a"


def test_sklearn_forest_uses_tree_explainer():
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["x1", "x2", "x3"])
    y = (X["x1"] > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0, n_jobs=1).fit(X, y)
    e = explain(rf, X, max_samples=40)
    assert e.method == "shap.TreeExplainer" and "class 1" in e.output
    p = rf.predict_proba(X.iloc[e.row_index])[:, 1]
    np.testing.assert_allclose(e.values.sum(axis=1) + e.expected_value, p, atol=1e-6)
    assert e.global_importance()[0][0] == "x1"


def _net():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


def test_torch_deep_explainer_is_additive():
    import torch

    net = _net()
    X = np.random.default_rng(2).normal(size=(120, 3)).astype(np.float32)
    e = explain(net, X, max_samples=30, background_size=50)
    assert e.method.startswith("shap.DeepExplainer"), e.note
    with torch.no_grad():
        out = net(torch.as_tensor(X[e.row_index])).numpy().ravel()
    np.testing.assert_allclose(e.values.sum(axis=1) + e.expected_value, out, atol=1e-4)
    assert net.training  # the module's mode is restored


def test_torch_integrated_gradients_fallback_is_additive_within_tolerance():
    import torch

    net = _net()
    X = np.random.default_rng(3).normal(size=(80, 3)).astype(np.float32)
    e = explain(net, X, max_samples=20, method="integrated_gradients")
    assert e.method.startswith("integrated gradients")
    with torch.no_grad():
        out = net(torch.as_tensor(X[e.row_index])).numpy().ravel()
        base = float(net(torch.as_tensor(X).mean(0, keepdim=True)))
    assert e.expected_value == pytest.approx(base, abs=1e-6)
    np.testing.assert_allclose(e.values.sum(axis=1) + e.expected_value, out, atol=1e-2)


def test_multi_output_torch_model_needs_class_index():
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    X = np.random.default_rng(4).normal(size=(40, 3)).astype(np.float32)
    with pytest.raises(InvalidArgumentError, match="4 outputs; pass class_index"):
        explain(net, X, max_samples=5)
    e = explain(net, X, max_samples=10, class_index=2, background_size=20)
    with torch.no_grad():
        out = net(torch.as_tensor(X[e.row_index]))[:, 2].numpy()
    np.testing.assert_allclose(e.values.sum(axis=1) + e.expected_value, out, atol=1e-4)


def test_generic_sklearn_pipeline_with_a_categorical_column():
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(5)
    X = pd.DataFrame({"a": rng.normal(size=150), "b": rng.normal(size=150),
                      "c": rng.choice(["x", "y", "z"], 150)})
    y = ((X["a"] + (X["c"] == "x")) > 0.5).astype(int)
    pipe = make_pipeline(
        make_column_transformer((StandardScaler(), ["a", "b"]), (OneHotEncoder(), ["c"])),
        LogisticRegression(),
    ).fit(X, y)
    e = explain(pipe, X, max_samples=8, background_size=15)
    assert e.method.startswith("shap.") and e.output == "P(class=1)"
    assert "category codes" in e.note
    p = pipe.predict_proba(X.iloc[e.row_index])[:, 1]
    np.testing.assert_allclose(e.values.sum(axis=1) + e.expected_value, p, atol=1e-6)
    assert e.to_dict()["global_importance"][0]["feature"] == "a"


def test_unknown_method_and_unexplainable_object():
    with pytest.raises(InvalidArgumentError, match="method must be one of"):
        explain(object(), np.zeros((3, 2)), method="lime")
    with pytest.raises(InvalidArgumentError, match="neither predict_proba nor predict"):
        explain(object(), np.zeros((3, 2)))
