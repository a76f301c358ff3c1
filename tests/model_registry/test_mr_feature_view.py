"""model.get_feature_view(): back from a registered model to the view it was trained on, with
batch scoring initialised on the model's training-dataset version."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from feature_store.core.transformations import standard_scaler
from fstrain.kernel.errors import InvalidArgumentError, NotFoundError
from model_registry.local.registry import LocalModelRegistry

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _view(fs):
    fg = fs.create_feature_group("tx", version=1, primary_key=["tid"], event_time="ts",
                                 statistics_config=False)
    fg.insert(pd.DataFrame({"tid": np.arange(200), "ts": T0 + pd.to_timedelta(np.arange(200), "h"),
                            "amount": np.arange(200, dtype=float), "label": np.arange(200) % 2}))
    return fs.create_feature_view("fraud", query=fg.select_all(), labels=["label"],
                                  transformation_functions=[standard_scaler("amount")])


def _register(project, fv, td_version, tmp_path):
    model = project.get_model_registry().python.create_model(
        "fraud_model", metrics={"auc": 0.9}, feature_view=fv, training_dataset_version=td_version)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.txt").write_text("w")
    model.save(str(folder))
    return model


def test_model_returns_its_view_initialised_on_its_training_dataset(project, fs, tmp_path):
    fv = _view(fs)
    v1, _ = fv.create_training_data(seed=1, extra_filter=fs.get_feature_group("tx", 1).tid < 100)
    v2, _ = fv.create_training_data(seed=1)
    model = _register(project, fv, v1, tmp_path)
    again = project.get_model_registry().get_model("fraud_model", 1)

    view = again.get_feature_view()
    assert (view.name, view.version) == ("fraud", 1)
    scored = view.get_batch_data()["standard_scaler_amount_"]
    stats_v1 = fv.get_training_dataset(v1).transformation_statistics["standard_scaler_amount"]
    expected = (np.arange(200) - stats_v1["mean"]) / stats_v1["std"]
    np.testing.assert_allclose(np.sort(scored.to_numpy()), expected, rtol=1e-9)
    latest = again.get_feature_view(init=False).get_batch_data()["standard_scaler_amount_"]
    assert not np.allclose(np.sort(latest.to_numpy()), expected)  # v2's statistics differ
    assert model.training_dataset_version == v1 != v2


def test_get_feature_view_errors(project, fs, tmp_path):
    fv = _view(fs)
    version, _ = fv.create_training_data(seed=1)
    model = _register(project, fv, version, tmp_path)
    with pytest.raises(InvalidArgumentError, match="online=True needs an online feature store"):
        model.get_feature_view(online=True)
    plain = project.get_model_registry().python.create_model("no_view")
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "w.txt").write_text("w")
    plain.save(str(folder))
    with pytest.raises(InvalidArgumentError, match="registered without a feature view"):
        plain.get_feature_view()
    standalone = LocalModelRegistry(project.root / "model_registry")
    with pytest.raises(InvalidArgumentError, match="opened without its project"):
        standalone.get_model("fraud_model", 1).get_feature_view()
    with pytest.raises(NotFoundError):
        fv.init_batch_scoring(99)
