"""XGBoost regression: trains, saves/loads without pickle, refuses class-only options."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers import load_predictor, train
from fstrain.trainers.config import load_config


def _data(n: int = 1500):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.choice(["x", "y"], n)})
    y = pd.DataFrame({"t": 3 * X.a - 2 * X.b + (X.c == "x") * 1.5 + rng.normal(scale=0.3, size=n)})
    return X, y


def test_xgboost_regression_round_trip(tmp_path):
    X, y = _data()
    result = train({"model": "xgboost", "task": "regression", "params": {"n_estimators": 60}},
                   X[:1000], y[:1000], X[1000:], y[1000:], workdir=tmp_path / "run")
    assert result.metric == "rmse" and result.mode == "min"
    assert result.metrics["r2"] > 0.9 and result.metrics["rmse"] < 1.0
    assert "val_rmse" in result.history[-1]
    result.model.save(tmp_path / "model")
    loaded = load_predictor(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict(X[1000:]), result.model.predict(X[1000:]))
    with pytest.raises(InvalidArgumentError, match="is a regression"):
        loaded.predict_proba(X[:3])


@pytest.mark.parametrize("config, message", [
    ({"model": "mlp", "task": "regression"}, "supported with models lightgbm, xgboost"),
    ({"model": "xgboost", "task": "regression", "imbalance": "oversample"}, "imbalance='none'"),
    ({"model": "xgboost", "task": "regression", "metric": "auc"}, "classification metric"),
    ({"model": "xgboost", "metric": "rmse"}, "needs task='regression'"),
])
def test_regression_config_errors(config, message):
    with pytest.raises(ConfigError, match=message):
        load_config(config)


def test_regression_needs_a_numeric_label(tmp_path):
    X, _ = _data(200)
    y = pd.DataFrame({"t": ["a"] * 200})
    with pytest.raises(InvalidArgumentError, match="needs a numeric label"):
        train({"model": "xgboost", "task": "regression"}, X, y, X, y, workdir=tmp_path)
