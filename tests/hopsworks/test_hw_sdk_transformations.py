"""Model-dependent transformations and training-dataset statistics: Hopsworks against the
embedded store, for the same data and the same view.

On Hopsworks the materialization job fits the view's transformations on the train split,
transforms every split, and stores the transformation statistics and each split's descriptive
statistics (:mod:`sdk_server.td_statistics`). The SDK reads the transformed files back and
fetches the statistics from the server; the embedded store fits and applies fstrain's own
implementation. Both must give the same values (float tolerance) and the same fitted statistics.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sdk_server import serve

import feature_store
from feature_store.transformations import (
    label_encoder,
    min_max_scaler,
    robust_scaler,
    standard_scaler,
)

BOUNDS = {"train_end": "2024-06-01", "validation_start": "2024-06-01",
          "validation_end": "2024-06-15", "test_start": "2024-06-15", "test_end": "2024-07-01"}
COLUMNS = ["t_id", "event_time", "amount", "latitude", "longitude", "channel", "is_foreign"]


def _transactions(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame({
        "t_id": np.arange(n, dtype="int64"),
        "event_time": pd.Timestamp("2024-05-01", tz="UTC")
        + pd.to_timedelta(rng.integers(0, 61 * 24 * 3600, n), unit="s"),
        "amount": rng.lognormal(3.5, 1.0, n).round(2),
        "latitude": rng.uniform(-30, 65, n).round(4),
        "longitude": rng.uniform(-120, 150, n).round(4),
        "channel": rng.choice(["online", "pos", "atm"], n),
        "is_foreign": rng.integers(0, 2, n).astype("int64"),
    })


def _view_and_splits(project: Any) -> tuple[Any, int, tuple[Any, ...]]:
    fs = project.get_feature_store()
    group = fs.get_or_create_feature_group("card_tx", version=1, primary_key=["t_id"],
                                           event_time="event_time")
    group.insert(_transactions())
    query = fs.get_feature_group("card_tx", 1).select(COLUMNS)
    fv = fs.get_or_create_feature_view(
        "scaled_tx", 1, query, labels=["is_foreign"], transformation_functions=[
            standard_scaler("amount"), min_max_scaler("latitude"), robust_scaler("longitude"),
            label_encoder("channel")])
    version, _ = fv.create_train_validation_test_split(seed=3, **BOUNDS)
    return fv, version, fv.get_train_validation_test_split(version, primary_key=True)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("transformations")
    local = _view_and_splits(feature_store.login(root=root / "local"))
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for var in ("REST_ENDPOINT", "HOPSWORKS_HOST", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY"):
            mp.delenv(var, raising=False)
        with serve(root / "cluster") as fake:
            project = feature_store.login(backend="hopsworks", root=root / "client",
                                          **fake.login_kwargs)
            yield local, _view_and_splits(project), fake
            assert not fake.server.unrouted


def _by_key(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("t_id").reset_index(drop=True)


def test_the_job_transforms_every_split_with_train_statistics_as_the_local_store(both):
    (_, _, local), (_, _, hops), _ = both
    for name, a, b in zip(["train", "validation", "test"], local[:3], hops[:3], strict=True):
        a, b = _by_key(a), _by_key(b)
        assert len(a) == len(b) > 0, name
        assert set(a.columns) == set(b.columns) == {
            "t_id", "standard_scaler_amount_", "min_max_scaler_latitude_",
            "robust_scaler_longitude_", "label_encoder_channel_"}, name
        for column in a.columns:
            np.testing.assert_allclose(a[column].astype(float), b[column].astype(float),
                                       rtol=1e-9, atol=1e-12, err_msg=f"{name}.{column}")
    train = _by_key(hops[0])
    assert abs(train["standard_scaler_amount_"].mean()) < 1e-9  # fitted on train, not all rows
    assert train["min_max_scaler_latitude_"].min() == 0 and train["min_max_scaler_latitude_"].max() == 1
    test = _by_key(hops[2])["min_max_scaler_latitude_"]
    assert abs(test.mean()) > 1e-9  # test is transformed with train's statistics, not refitted


def test_the_sdk_fetches_the_statistics_the_job_fitted_on_train(both):
    (local_fv, local_version, _), (hops_fv, hops_version, hops), fake = both
    fitted = local_fv.get_training_dataset(local_version).transformation_statistics
    stats = hops_fv._sdk.get_training_dataset_statistics(hops_version, before_transformation=True)
    by_name = {s.feature_name: s for s in stats.feature_descriptive_statistics}
    assert by_name["amount"].mean == pytest.approx(fitted["standard_scaler_amount"]["mean"])
    assert by_name["amount"].stddev == pytest.approx(fitted["standard_scaler_amount"]["std"])
    assert by_name["latitude"].min == pytest.approx(fitted["min_max_scaler_latitude"]["min"])
    assert by_name["latitude"].max == pytest.approx(fitted["min_max_scaler_latitude"]["max"])
    percentiles = by_name["longitude"].percentiles
    assert [percentiles[24], percentiles[49], percentiles[74]] == pytest.approx(
        [fitted["robust_scaler_longitude"][k] for k in ("p25", "p50", "p75")])
    assert sorted(by_name["channel"].extended_statistics["unique_values"]) == (
        fitted["label_encoder_channel"]["values"])
    assert by_name["amount"].count == len(hops[0])  # train rows only

    # per split, after transformation, as the SDK's get_training_dataset_statistics returns them
    splits = {s.name: {f.feature_name: f for f in s.feature_descriptive_statistics}
              for s in hops_fv._sdk.get_training_dataset_statistics(hops_version).split_statistics}
    assert set(splits) == {"train", "validation", "test"}
    for name, x in zip(["train", "validation", "test"], hops[:3], strict=True):
        scaled = splits[name]["standard_scaler_amount_"]
        assert scaled.count == len(x)
        assert scaled.mean == pytest.approx(x["standard_scaler_amount_"].mean(), abs=1e-9)
    assert fake.server.requests_to("GET", "/trainingdatasets/version/1/statistics")


def test_the_adapter_reports_the_fitted_statistics_as_the_local_store(both):
    """``get_training_dataset(v).transformation_statistics`` (lineage, model cards) holds what
    the SDK fetched, keyed and shaped as on the embedded store."""
    (local_fv, local_version, _), (hops_fv, hops_version, _), _ = both
    local = local_fv.get_training_dataset(local_version).transformation_statistics
    hops = hops_fv.get_training_dataset(hops_version).transformation_statistics
    assert set(hops) == set(local) == {"standard_scaler_amount", "min_max_scaler_latitude",
                                       "robust_scaler_longitude", "label_encoder_channel"}
    for key, fitted in local.items():
        assert set(hops[key]) == set(fitted), key
        for stat, value in fitted.items():
            assert hops[key][stat] == (pytest.approx(value) if isinstance(value, float)
                                       else value), (key, stat)
