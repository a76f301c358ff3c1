"""Round trips of every safe format; skops trust rules; pickle refused unless trusted."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest
import torch
import xgboost as xgb
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from fstrain.kernel.errors import InvalidArgumentError, UnsafeFormatError
from fstrain.trainers.formats import (
    LIGHTGBM_META,
    load_lightgbm,
    load_model,
    load_pickle,
    load_sklearn,
    load_torch_state,
    load_xgboost,
    save_lightgbm,
    save_sklearn,
    save_torch,
    save_xgboost,
)


@pytest.fixture
def registry(tmp_path: Path) -> Any:
    """An empty local registry (the formats' round trips through a registered version)."""
    from model_registry.local.registry import LocalModelRegistry

    return LocalModelRegistry(tmp_path / "model_registry")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(42)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    return X, y


def _double(x):
    return x * 2.0


@pytest.mark.parametrize("fmt", ["json", "ubj"])
def test_xgboost_booster_round_trip(tmp_path, data, fmt):
    X, y = data
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3}, xgb.DMatrix(X, y), 5)
    paths = save_xgboost(booster, tmp_path, fmt=fmt)
    assert [p.name for p in paths] == [f"model.{fmt}", "xgboost_meta.json"]
    loaded = load_xgboost(tmp_path)
    assert isinstance(loaded, xgb.Booster)
    np.testing.assert_array_equal(loaded.predict(xgb.DMatrix(X)), booster.predict(xgb.DMatrix(X)))


@pytest.mark.parametrize("fmt", ["json", "ubj"])
def test_xgboost_classifier_round_trip(tmp_path, data, fmt):
    X, y = data
    clf = xgb.XGBClassifier(n_estimators=6, max_depth=2, learning_rate=0.3).fit(X, y)
    save_xgboost(clf, tmp_path, fmt=fmt)
    loaded = load_xgboost(tmp_path)
    assert type(loaded) is xgb.XGBClassifier
    assert loaded.get_params()["max_depth"] == 2
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))


def test_xgboost_regressor_round_trip(tmp_path, data):
    X, y = data
    reg = xgb.XGBRegressor(n_estimators=4).fit(X, X[:, 2])
    save_xgboost(reg, tmp_path)
    loaded = load_xgboost(tmp_path)
    assert type(loaded) is xgb.XGBRegressor
    np.testing.assert_array_equal(loaded.predict(X), reg.predict(X))


def test_xgboost_rejects_bad_format_and_model(tmp_path, data):
    X, y = data
    with pytest.raises(InvalidArgumentError, match="fmt must be one of json, ubj. Got 'pkl'"):
        save_xgboost(xgb.XGBClassifier(n_estimators=1).fit(X, y), tmp_path, fmt="pkl")
    with pytest.raises(InvalidArgumentError, match="Got LogisticRegression instead"):
        save_xgboost(LogisticRegression(), tmp_path)


def test_lightgbm_round_trip_and_load_model_dispatch(tmp_path, data):
    import lightgbm as lgb

    X, y = data
    booster = lgb.train({"objective": "binary", "verbosity": -1, "min_data_in_leaf": 5},
                        lgb.Dataset(X, y), 5)
    paths = save_lightgbm(booster, tmp_path)
    assert [p.name for p in paths] == ["model.txt", LIGHTGBM_META]
    for loaded in (load_lightgbm(tmp_path), load_model(tmp_path)):
        assert isinstance(loaded, lgb.Booster)
        np.testing.assert_array_equal(loaded.predict(X), booster.predict(X))


def test_lightgbm_rejects_other_models_and_a_changed_meta(tmp_path, data):
    import lightgbm as lgb

    X, y = data
    with pytest.raises(InvalidArgumentError, match="Got LogisticRegression instead"):
        save_lightgbm(LogisticRegression(), tmp_path)
    assert not (tmp_path / "model.txt").exists()
    save_lightgbm(lgb.train({"objective": "binary", "verbosity": -1}, lgb.Dataset(X, y), 2),
                  tmp_path)
    meta = json.loads((tmp_path / LIGHTGBM_META).read_text())
    (tmp_path / LIGHTGBM_META).write_text(json.dumps({**meta, "model_file": "evil.pkl"}))
    with pytest.raises(InvalidArgumentError,
                       match="file 'evil.pkl'; expected Booster and model.txt"):
        load_lightgbm(tmp_path)


def test_torch_round_trip(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    config = {"in": 4, "hidden": 8, "out": 2}
    paths = save_torch(net, tmp_path, config)
    assert [p.name for p in paths] == ["model.safetensors", "config.json"]
    state, loaded_config = load_torch_state(tmp_path)
    assert loaded_config == config
    rebuilt = torch.nn.Sequential(
        torch.nn.Linear(config["in"], config["hidden"]),
        torch.nn.ReLU(),
        torch.nn.Linear(config["hidden"], config["out"]),
    )
    rebuilt.load_state_dict(state)
    x = torch.randn(5, 4)
    with torch.no_grad():
        assert torch.equal(rebuilt(x), net(x))


def test_torch_tied_weights_and_bad_state(tmp_path):
    weight = torch.randn(3, 3)
    save_torch({"a": weight, "b": weight}, tmp_path, {})  # shared storage is fine
    state, _ = load_torch_state(tmp_path)
    assert torch.equal(state["a"], state["b"])
    with pytest.raises(InvalidArgumentError, match="entry 'step' must be a tensor"):
        save_torch({"step": 3}, tmp_path / "bad", {})


def test_sklearn_round_trip(tmp_path, data):
    X, y = data
    pipe = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    paths = save_sklearn(pipe, tmp_path)
    assert paths[0].name == "model.skops"
    loaded = load_sklearn(tmp_path)
    np.testing.assert_array_equal(loaded.predict_proba(X), pipe.predict_proba(X))


def test_sklearn_untrusted_type_is_refused_until_trusted(tmp_path, data):
    X, y = data
    pipe = make_pipeline(FunctionTransformer(_double), LogisticRegression()).fit(X, y)
    save_sklearn(pipe, tmp_path)
    with pytest.raises(UnsafeFormatError, match=r"_double.*trusted=") as info:
        load_sklearn(tmp_path)
    name = next(t for t in str(info.value).split("'") if t.endswith("_double"))
    loaded = load_sklearn(tmp_path, trusted=[name])
    np.testing.assert_array_equal(loaded.predict(X), pipe.predict(X))


def test_pickle_is_refused_by_default(tmp_path):
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"w": [1, 2]}))
    with pytest.raises(UnsafeFormatError, match=r"arbitrary code.*trust_pickle=True"):
        load_pickle(path)
    with pytest.raises(UnsafeFormatError):
        load_model(tmp_path)


def test_pickle_and_joblib_load_when_trusted(tmp_path, data):
    X, y = data
    clf = LogisticRegression().fit(X, y)
    joblib.dump(clf, tmp_path / "model.joblib")
    with pytest.warns(UserWarning, match="trust_pickle=True"):
        loaded = load_pickle(tmp_path / "model.joblib", trust_pickle=True)
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "obj.pickle").write_bytes(pickle.dumps({"w": 1}))
    with pytest.warns(UserWarning):
        assert load_pickle(tmp_path / "p" / "obj.pickle", trust_pickle=True) == {"w": 1}


def test_registry_flags_pickle_files(registry, tmp_path):
    (tmp_path / "pk").mkdir()
    (tmp_path / "pk" / "model.pkl").write_bytes(pickle.dumps(1))
    with pytest.warns(UserWarning, match="trust_pickle=True"):
        model = registry.python.create_model("pk").save(tmp_path / "pk")
    assert model.manifest["unsafe_files"] == ["model.pkl"]
    with pytest.raises(UnsafeFormatError):
        load_model(Path(model.download()))


def _xgb(tmp_path, X, y):
    model = xgb.XGBClassifier(n_estimators=3).fit(X, y)
    save_xgboost(model, tmp_path)
    return model, lambda m: m.predict_proba(X)


def _sk(tmp_path, X, y):
    model = LogisticRegression().fit(X, y)
    save_sklearn(model, tmp_path)
    return model, lambda m: m.predict_proba(X)


def _torch(tmp_path, X, y):
    torch.manual_seed(1)
    net = torch.nn.Linear(4, 1)
    save_torch(net, tmp_path, {"in": 4})

    def predict(m):
        if isinstance(m, tuple):  # (state, config) from the load
            rebuilt = torch.nn.Linear(m[1]["in"], 1)
            rebuilt.load_state_dict(m[0])
            m = rebuilt
        with torch.no_grad():
            return m(torch.from_numpy(X)).numpy()

    return net, predict


@pytest.mark.parametrize(
    ("framework", "make"), [("python", _xgb), ("sklearn", _sk), ("torch", _torch)]
)
def test_registry_round_trip_per_format(registry, tmp_path, data, framework, make):
    X, y = data
    model, predict = make(tmp_path / "src", X, y)
    api = getattr(registry, framework)
    saved = api.create_model("fmt_" + framework, metrics={"auc": 0.5}).save(tmp_path / "src")
    folder = Path(registry.get_model(saved.name, saved.version).download())
    np.testing.assert_array_equal(predict(load_model(folder)), predict(model))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["framework"] == framework and manifest["unsafe_files"] == []
