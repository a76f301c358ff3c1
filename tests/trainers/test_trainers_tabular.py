"""XGBoost and scikit-learn trainers: quality, imbalance on train only, safe save/load."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers import load_predictor, train
from fstrain.trainers.config import load_config


@pytest.mark.parametrize("model", ["xgboost", "lightgbm", "sklearn_logreg", "sklearn_rf"])
def test_tabular_beats_chance_and_round_trips(model, binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    params = {} if model == "sklearn_logreg" else {"n_estimators": 60}
    result = train({"model": model, "params": params}, X_tr, y_tr, X_va, y_va,
                   workdir=tmp_path / "run")
    assert result.metrics["auc"] > 0.7, result.metrics
    assert result.history and result.params
    info = result.model.save(tmp_path / "model")
    assert "predictor.json" in info["files"]
    assert not any(f.endswith((".pkl", ".pickle", ".joblib")) for f in info["files"])
    manifest = json.loads((tmp_path / "model" / "predictor.json").read_text())
    assert manifest["kind"] == model and manifest["features"]["names"] == list(X_tr.columns)
    loaded = load_predictor(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict_proba(X_va), result.model.predict_proba(X_va))
    np.testing.assert_array_equal(loaded.predict(X_va), result.model.predict(X_va))
    target = loaded.explain_target
    assert target.transform(X_va.iloc[:5]).shape == (5, len(target.feature_names))


def test_a_saved_model_without_its_feature_schema_is_refused_by_name(binary_data, tmp_path):
    """A tabular predictor prepares X with the recorded feature schema: a predictor.json
    without one is refused when loaded (it loaded, then predict failed with an
    AttributeError on None)."""
    X_tr, y_tr, X_va, y_va = binary_data
    result = train({"model": "sklearn_logreg"}, X_tr, y_tr, X_va, y_va, workdir=tmp_path / "run")
    result.model.save(tmp_path / "model")
    path = tmp_path / "model" / "predictor.json"
    info = json.loads(path.read_text())
    del info["features"]
    path.write_text(json.dumps(info))
    with pytest.raises(InvalidArgumentError, match=r"predictor\.json in '.*model': a "
                       r"'sklearn_logreg' model predicts from features, but it records no "
                       r"'features' schema"):
        load_predictor(tmp_path / "model")


def test_xgboost_early_stopping_and_record(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    result = train({"model": "xgboost", "early_stopping_rounds": 5,
                    "params": {"n_estimators": 400, "learning_rate": 0.3}},
                   X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    assert len(result.history) < 400  # stopped early
    assert result.params["tree_method"] == "hist" and result.params["device"] == "cpu"
    assert result.params["n_estimators"] == result.best_iteration + 1  # save_best
    assert "val_auc" in result.history[0] and result.nondeterminism


def test_multiclass_xgboost_and_string_labels(multiclass_data, tmp_path):
    X_tr, y_tr, X_va, y_va = multiclass_data
    result = train({"model": "xgboost", "params": {"n_estimators": 40}}, X_tr, y_tr, X_va, y_va,
                   workdir=tmp_path)
    proba = result.model.predict_proba(X_va)
    assert proba.shape == (len(X_va), 3) and np.allclose(proba.sum(axis=1), 1, atol=1e-5)
    assert result.metrics["accuracy"] > 0.6
    assert set(result.model.predict(X_va)) <= {"high", "low", "mid"}
    with pytest.raises(ConfigError, match="scale_pos_weight.*binary"):
        train({"model": "xgboost", "imbalance": "scale_pos_weight"}, X_tr, y_tr, X_va, y_va,
              workdir=tmp_path)


@pytest.mark.parametrize("strategy", ["oversample", "undersample"])
def test_resampling_touches_train_only(strategy, imbalanced_data, tmp_path):
    X_tr, y_tr, X_va, y_va = imbalanced_data
    before_val = y_va.copy()
    result = train({"model": "sklearn_logreg", "imbalance": strategy}, X_tr, y_tr, X_va, y_va,
                   workdir=tmp_path)
    rec = result.imbalance
    counts_tr = y_tr["label"].value_counts().to_dict()
    assert rec["strategy"] == strategy and rec["applied_to"] == "train"
    assert rec["train_counts_before"] == {str(k): v for k, v in sorted(counts_tr.items())}
    after = rec["train_counts_after"]
    assert after["0"] == after["1"]
    expected = max(counts_tr.values()) if strategy == "oversample" else min(counts_tr.values())
    assert after["0"] == expected
    # validation split untouched: same rows, same counts, metrics computed on all of it
    assert rec["val_counts"] == {str(k): v for k, v in sorted(y_va["label"].value_counts().items())}
    assert y_va.equals(before_val) and result.metrics["n"] == len(y_va)


def test_weights_recorded(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    res = train({"model": "xgboost", "imbalance": "scale_pos_weight",
                 "params": {"n_estimators": 20}}, X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    neg, pos = (y_tr["label"] == 0).sum(), (y_tr["label"] == 1).sum()
    assert res.imbalance["scale_pos_weight"] == pytest.approx(neg / pos)
    assert res.params["scale_pos_weight"] == pytest.approx(neg / pos)
    res = train({"model": "sklearn_rf", "imbalance": "class_weight",
                 "params": {"n_estimators": 20}}, X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    assert set(res.imbalance["class_weight"]) == {"0", "1"}


def test_unseen_category_and_missing_column(binary_data, tmp_path):
    from fstrain.kernel.errors import SchemaMismatchError

    X_tr, y_tr, X_va, y_va = binary_data
    res = train({"model": "sklearn_logreg"}, X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    odd = X_va.iloc[:3].copy()
    odd["city"] = "atlantis"
    assert res.model.predict_proba(odd).shape == (3,)
    with pytest.raises(SchemaMismatchError, match="missing feature column.*income"):
        res.model.predict_proba(X_va.drop(columns=["income"]))


def test_boosted_trees_see_raw_numbers_and_learn_from_missingness(tmp_path):
    """auto → passthrough for XGBoost: NaN reaches the booster, which learns where it goes."""
    import pandas as pd

    rng = np.random.default_rng(5)
    n = 2000
    X = pd.DataFrame({"x": rng.normal(size=n), "noise": rng.normal(size=n)})
    y = (rng.random(n) < 0.5).astype(int)
    X.loc[y == 1, "x"] = np.where(rng.random((y == 1).sum()) < 0.8, np.nan, X.loc[y == 1, "x"])
    Y = pd.DataFrame({"label": y})
    parts = (X.iloc[:1500], Y.iloc[:1500], X.iloc[1500:], Y.iloc[1500:])
    config = {"model": "xgboost", "params": {"n_estimators": 30}}
    raw = train(config, *parts, workdir=tmp_path / "raw")
    imputed = train({**config, "numeric_preprocessing": "impute_scale"}, *parts,
                    workdir=tmp_path / "imputed")
    assert raw.extra["numeric_preprocessing"] == "passthrough"
    assert imputed.extra["numeric_preprocessing"] == "impute_scale"
    matrix = raw.model.explain_target.transform(X.iloc[:20])
    assert np.isnan(matrix).any() and not np.isnan(
        imputed.model.explain_target.transform(X.iloc[:20])).any()
    assert raw.metrics["auc"] > 0.85


@pytest.mark.parametrize("model", ["mlp", "sklearn_logreg"])
def test_passthrough_is_refused_for_models_that_cannot_take_nan(model):
    with pytest.raises(ConfigError, match="numeric_preprocessing='passthrough'.*cannot take"):
        load_config({"model": model, "numeric_preprocessing": "passthrough"})
