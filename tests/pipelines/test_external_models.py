"""A data scientist's model, trained in a notebook and registered through the public API with
its lineage, is validated by `fstrain validate` (scikit-learn, XGBoost, LightGBM, torch)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fstrain.trainers import formats
from fstrain.cli.app import app


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    import feature_store

    root = tmp_path_factory.mktemp("ext") / "store"
    assert _cli(root, "features", "ccfraud", "--n-transactions", "20000").exit_code == 0
    ds = _cli(root, "dataset", "ccfraud", "--json")
    assert ds.exit_code == 0, ds.output
    project = feature_store.login(root=root)
    fv = project.get_feature_store().get_feature_view("ccfraud_detection", 1)
    version = json.loads(ds.output)["version"]
    X_tr, _X_va, _X_te, y_tr, _y_va, _y_te = fv.get_train_validation_test_split(version)
    return root, project, fv, version, X_tr, y_tr["is_fraud"]


def _numeric(X):
    return [c for c in X.columns if X[c].dtype.kind in "biuf"]


def _categorical(X):
    out = X.copy()
    for c in out.columns:
        if out[c].dtype == object:
            out[c] = out[c].astype("category")
    return out


def _sklearn(X, y, out: Path):
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    text = [c for c in X.columns if X[c].dtype == object]
    pipe = Pipeline([
        ("prep", ColumnTransformer([("num", StandardScaler(), _numeric(X)),
                                    ("cat", OneHotEncoder(handle_unknown="ignore"), text)])),
        ("clf", LogisticRegression(max_iter=500, class_weight="balanced")),
    ]).fit(X, y)
    formats.save_sklearn(pipe, out)
    return "sklearn", {"C": 1.0}


def _xgboost(X, y, out: Path):
    import xgboost as xgb

    clf = xgb.XGBClassifier(n_estimators=40, max_depth=4, enable_categorical=True,
                            tree_method="hist").fit(_categorical(X), y)
    formats.save_xgboost(clf, out)
    return "python", {"n_estimators": 40}


def _lightgbm(X, y, out: Path):
    import lightgbm as lgb

    booster = lgb.train({"objective": "binary", "verbose": -1, "num_leaves": 15},
                        lgb.Dataset(_categorical(X), y), num_boost_round=40)
    formats.save_lightgbm(booster, out)
    return "python", {"num_boost_round": 40}


def _torch(X, y, out: Path):
    import torch

    cols = _numeric(X)
    raw = torch.as_tensor(X[cols].to_numpy(dtype=np.float32))
    mean, std = raw.mean(0), raw.std(0) + 1e-6
    data = (raw - mean) / std
    module = torch.nn.Linear(len(cols), 2)
    opt = torch.optim.Adam(module.parameters(), lr=0.05)
    target = torch.as_tensor(y.to_numpy(), dtype=torch.long)
    for _ in range(30):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(module(data), target).backward()
        opt.step()
    with torch.no_grad():  # fold the standardisation into the layer: it takes raw features
        module.bias -= (module.weight * (mean / std)).sum(1)
        module.weight /= std
    formats.save_torch(module, out, {"module": "torch.nn:Linear",
                                     "kwargs": {"in_features": len(cols), "out_features": 2},
                                     "features": cols})
    return "torch", {"epochs": 30}


def _fstrain_temp_entries():
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("fstrain")}


@pytest.mark.parametrize("train", [_sklearn, _xgboost, _lightgbm, _torch],
                         ids=["sklearn", "xgboost", "lightgbm", "torch"])
def test_a_model_registered_through_the_api_is_validated(store, tmp_path, train, monkeypatch):
    root, project, fv, version, X_tr, y_tr = store
    (tmp_path / "systmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "systmp"))  # this test's own system temp dir
    monkeypatch.setattr(tempfile, "tempdir", None)
    model_dir = tmp_path / "model"
    flavor, params = train(X_tr, y_tr, model_dir)
    name = f"notebook_{train.__name__.strip('_')}"
    mr = project.get_model_registry()
    model = getattr(mr, flavor).create_model(
        name, metrics={"validation_roc_auc": 0.5}, feature_view=fv,
        training_dataset_version=version, hyperparameters=params,
    ).save(str(model_dir))
    assert model.manifest["predictor"]["source"] == "inferred from the saved files"
    before = _fstrain_temp_entries()
    result = _cli(root, "validate", name, "--json")
    assert result.exit_code in (0, 3), result.output  # passed or failed its gates: not an error
    payload = json.loads(result.output)
    assert payload["key_metric"] == "roc_auc" and 0.5 < payload["key_value"] <= 1.0
    assert Path(payload["scorecard_html"]).is_file()
    assert _fstrain_temp_entries() == before  # no model copy left in the system temp dir
    history = mr.get_model(name, model.version).latest_validation()
    assert history is not None and history["status"] in ("passed", "failed")


def test_a_pickle_or_a_model_without_lineage_is_explained(store, tmp_path):
    root, project, fv, version, X_tr, y_tr = store
    mr = project.get_model_registry()
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "model.pkl").write_bytes(b"not really a pickle")
    mr.python.create_model("pickled", feature_view=fv,
                           training_dataset_version=version).save(str(tmp_path / "p"))
    pickled = _cli(root, "validate", "pickled")
    assert pickled.exit_code == 2 and "pickle" in pickled.output and "save_sklearn" in pickled.output
    _sklearn(X_tr, y_tr, tmp_path / "s")
    mr.sklearn.create_model("orphan").save(str(tmp_path / "s"))
    orphan = _cli(root, "validate", "orphan")
    assert orphan.exit_code == 2 and "training_dataset_version=v" in orphan.output
