"""CatBoost trainer: native categoricals, early stopping, train-only weights, .cbm, own SHAP."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fstrain.kernel.errors import ConfigError
from fstrain.trainers import load_predictor, train
from validation.explain import explain

FAST = {"model": "catboost", "early_stopping_rounds": 5,
        "params": {"n_estimators": 150, "learning_rate": 0.3, "depth": 4, "thread_count": 1}}


@pytest.fixture(scope="module")
def fitted(binary_data, tmp_path_factory):
    X_tr, y_tr, X_va, y_va = binary_data
    result = train({**FAST, "imbalance": "class_weight"}, X_tr, y_tr, X_va, y_va,
                   workdir=tmp_path_factory.mktemp("cb"))
    return result, binary_data


def test_categoricals_are_native_and_early_stopping_keeps_the_best(fitted):
    result, (_X_tr, _y_tr, X_va, _y_va) = fitted
    model = result.model.model
    # the raw columns, not one-hot columns: city and member are CatBoost categoricals
    assert list(model.feature_names_) == ["age", "income", "city", "member"]
    assert sorted(model.get_cat_feature_indices()) == [2, 3]
    assert result.extra["categorical_encoding"] == "CatBoost native"
    best = result.best_iteration
    assert model.tree_count_ == best + 1 < 150  # stopped early, best trees kept
    aucs = [row["val_auc"] for row in result.history]
    assert len(aucs) == best + 1 + 5 and aucs[best] == max(aucs)  # a learning curve per round
    assert result.metrics["auc"] == pytest.approx(aucs[best], abs=1e-6)
    assert result.params["random_seed"] == 42 and result.nondeterminism
    curves = result.curves  # the trainer contract's learning curves, one point per round
    assert curves.unit == "round" and curves.best_step == best and len(curves) == len(aucs)
    assert curves.val_metric == pytest.approx(aucs) and None not in curves.train_metric
    assert curves.train_loss[-1] < curves.train_loss[0]


def test_class_weights_touch_the_train_split_only(fitted):
    result, (_X_tr, y_tr, _X_va, y_va) = fitted
    counts = np.bincount(y_tr["label"].to_numpy())
    weights = result.imbalance["class_weight"]
    assert weights["1"] / weights["0"] == pytest.approx(counts[0] / counts[1])
    assert result.imbalance["applied_to"] == "train" and result.imbalance["val_untouched"]
    assert result.imbalance["val_counts"] == {"0": int((y_va["label"] == 0).sum()),
                                              "1": int((y_va["label"] == 1).sum())}


def test_saved_as_cbm_and_reloaded_without_pickle(fitted, tmp_path):
    result, (_X_tr, _y_tr, X_va, _y_va) = fitted
    info = result.model.save(tmp_path / "m")
    assert info["files"] == ["model/catboost_meta.json", "model/model.cbm", "predictor.json"]
    assert (tmp_path / "m" / "model" / "model.cbm").read_bytes()[:4] == b"CBM1"
    assert json.loads((tmp_path / "m" / "predictor.json").read_text())["kind"] == "catboost"
    loaded = load_predictor(tmp_path / "m")
    np.testing.assert_array_equal(loaded.predict_proba(X_va), result.model.predict_proba(X_va))


def test_shap_values_are_catboosts_own_and_add_up(fitted):
    result, (_X_tr, _y_tr, X_va, _y_va) = fitted
    target = result.model.explain_target
    expl = explain(target.model, target.transform(X_va), feature_names=target.feature_names,
                   max_samples=40)
    assert expl.method.startswith("catboost ShapValues")
    assert set(expl.feature_names) == {"age", "income", "city", "member"}  # columns, not one-hot
    # SHAP explains the model's own output, before the class-weight calibration
    p = result.model.raw_proba_matrix(target.transform(X_va.iloc[expl.row_index]))[:, 1]
    np.testing.assert_allclose(expl.values.sum(axis=1) + expl.expected_value,
                               np.log(p / (1 - p)), atol=1e-6)


def test_multiclass_string_labels(multiclass_data, tmp_path):
    X_tr, y_tr, X_va, y_va = multiclass_data
    result = train({**FAST, "params": {"n_estimators": 40, "thread_count": 1}},
                   X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    proba = result.model.predict_proba(X_va)
    assert proba.shape == (len(X_va), 3) and result.metrics["accuracy"] > 0.6
    assert set(result.model.predict(X_va)) <= {"low", "mid", "high"}
    target = result.model.explain_target
    expl = explain(target.model, target.transform(X_va), max_samples=10, class_index=0)
    assert expl.values.shape == (10, 3) and expl.output == "raw score of class 0"


def test_same_seed_same_model_and_bad_params_are_refused(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    cfg = {**FAST, "params": {"n_estimators": 20, "thread_count": 1}}
    a = train(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path / "a").model.predict_proba(X_va)
    b = train(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path / "b").model.predict_proba(X_va)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ConfigError, match="not a hyperparameter of model 'catboost'"):
        train({**FAST, "params": {"num_leaves": 3}}, X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    with pytest.raises(ConfigError, match="metric='f1'.*catboost"):
        train({**FAST, "metric": "f1"}, X_tr, y_tr, X_va, y_va, workdir=tmp_path)


def test_smoke_check_is_refused_not_faked(binary_data):
    from fstrain.trainers import smoke_check

    X_tr, y_tr, _X_va, _y_va = binary_data
    with pytest.raises(ConfigError, match="'catboost' has no smoke check"):
        smoke_check({"model": "catboost"}, X_tr, y_tr)
