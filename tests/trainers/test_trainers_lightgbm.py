"""LightGBM trainer: early stopping keeps the best trees, imbalance, tasks, determinism, SHAP."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import ConfigError
from fstrain.trainers import load_predictor, train
from fstrain.trainers.config import load_config, validate_search_space
from fstrain.trainers.tuning import default_search_space


def test_early_stopping_keeps_only_the_best_trees(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    result = train({"model": "lightgbm", "early_stopping_rounds": 5,
                    "params": {"n_estimators": 400, "learning_rate": 0.3}},
                   X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    assert len(result.history) < 400  # stopped early
    best = result.best_iteration
    assert result.params["n_estimators"] == best + 1 == result.model.model.current_iteration()
    aucs = [row["val_auc"] for row in result.history]
    assert aucs[best] == max(aucs)  # the kept model is the best round on validation
    assert result.metrics["auc"] == pytest.approx(aucs[best], abs=1e-9)
    assert result.params["deterministic"] is True and result.nondeterminism


def test_scale_pos_weight_is_lightgbms_own_and_recorded(imbalanced_data, tmp_path):
    X_tr, y_tr, X_va, y_va = imbalanced_data
    result = train({"model": "lightgbm", "imbalance": "scale_pos_weight",
                    "params": {"n_estimators": 20}}, X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    counts = np.bincount(y_tr["label"].to_numpy())
    assert result.params["scale_pos_weight"] == pytest.approx(counts[0] / counts[1])
    assert result.imbalance["applied_to"] == "train" and "class_weight" not in result.imbalance


def test_multiclass_with_string_labels_round_trips(multiclass_data, tmp_path):
    X_tr, y_tr, X_va, y_va = multiclass_data
    result = train({"model": "lightgbm", "params": {"n_estimators": 40}}, X_tr, y_tr, X_va, y_va,
                   workdir=tmp_path / "run")
    assert result.metric == "logloss" and result.metrics["accuracy"] > 0.6
    proba = result.model.predict_proba(X_va)
    assert proba.shape == (len(X_va), 3) and np.allclose(proba.sum(axis=1), 1.0)
    assert set(result.model.predict(X_va)) <= {"low", "mid", "high"}
    result.model.save(tmp_path / "model")
    loaded = load_predictor(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict_proba(X_va), proba)


def test_regression(tmp_path):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=1500), "b": rng.normal(size=1500)})
    y = pd.DataFrame({"t": 3 * X.a - 2 * X.b + rng.normal(scale=0.3, size=1500)})
    result = train({"model": "lightgbm", "task": "regression", "metric": "mae",
                    "params": {"n_estimators": 150}}, X[:1000], y[:1000], X[1000:], y[1000:],
                   workdir=tmp_path / "run")
    assert result.metric == "mae" and result.metrics["r2"] > 0.9
    assert "val_mae" in result.history[-1] and "val_rmse" in result.history[-1]
    result.model.save(tmp_path / "model")
    loaded = load_predictor(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict(X[1000:]), result.model.predict(X[1000:]))


def test_same_seed_same_model_other_seed_other_model(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    config = {"model": "lightgbm", "seed": 7, "early_stopping_rounds": None,
              "params": {"n_estimators": 30, "subsample": 0.7, "subsample_freq": 1,
                         "colsample_bytree": 0.7}}

    def model_text(cfg):
        result = train(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path)
        text = result.model.model.model_to_string()
        return text[text.index("Tree=0"):text.index("end of trees")]

    first = model_text(config)
    assert model_text(config) == first
    assert model_text({**config, "seed": 8}) != first


def test_shap_values_add_up_to_the_raw_score(binary_data, tmp_path):
    from validation.explain import explain

    X_tr, y_tr, X_va, y_va = binary_data
    result = train({"model": "lightgbm", "params": {"n_estimators": 30}}, X_tr, y_tr, X_va, y_va,
                   workdir=tmp_path)
    target = result.model.explain_target
    matrix = target.transform(X_va)
    explanation = explain(target.model, matrix, feature_names=target.feature_names,
                          max_samples=40)
    assert explanation.method.startswith("lightgbm pred_contrib")
    raw = target.model.predict(matrix[explanation.row_index], raw_score=True)
    np.testing.assert_allclose(explanation.values.sum(axis=1) + explanation.expected_value, raw,
                               atol=1e-6)
    assert list(explanation.feature_names) == list(target.feature_names)


def test_config_errors_name_the_option():
    with pytest.raises(ConfigError, match=r"params.num_leafs.*Did you mean 'num_leaves'"):
        load_config({"model": "lightgbm", "params": {"num_leafs": 8}})
    validate_search_space(default_search_space("lightgbm"), "lightgbm")
    assert load_config({"model": "lightgbm"}).numeric_mode == "passthrough"
