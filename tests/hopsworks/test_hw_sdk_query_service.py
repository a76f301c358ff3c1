"""Offline reads over the Hopsworks Query Service, through the SDK's own Arrow Flight client.

With ``serve(query_service=True)`` the fake cluster also runs a real ``pyarrow.flight`` server
over TLS (:mod:`sdk_server.query_service`) and announces it through the cluster variables, so
the SDK's Python engine reads ``fg.read()``, ``Query.read()`` (point-in-time joins included),
``get_batch_data`` (an event-time window as a filter, transformed with a training dataset's
statistics), in-memory training data and materialized training-dataset files over Flight, as
on a cluster. Every answer is compared with the embedded store's for the same data.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sdk_server import serve

import feature_store
from feature_store.transformations import label_encoder, standard_scaler

BOUNDS = {"train_end": "2024-06-01", "validation_start": "2024-06-01",
          "validation_end": "2024-06-15", "test_start": "2024-06-15", "test_end": "2024-07-01"}


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(5)
    n, cards = 240, 6
    tx = pd.DataFrame({
        "t_id": np.arange(n, dtype="int64"),
        "card": rng.integers(0, cards, n).astype("int64"),
        "event_time": pd.Timestamp("2024-05-01", tz="UTC")
        + pd.to_timedelta(np.sort(rng.integers(0, 61 * 24 * 3600, n)), unit="s"),
        "amount": rng.lognormal(3.0, 1.0, n).round(2),
        "channel": rng.choice(["online", "pos"], n),
        "fraud": rng.integers(0, 2, n).astype("int64"),
    })
    limits = pd.DataFrame({  # a card's limit changes over time: a point-in-time join
        "card": np.repeat(np.arange(cards, dtype="int64"), 3),
        "valid_from": np.tile(pd.to_datetime(["2024-04-01", "2024-05-20", "2024-06-10"],
                                             utc=True), cards),
        "credit_limit": rng.integers(1, 50, 3 * cards).astype("float64") * 100,
    })
    return tx, limits


def _build(project: Any) -> dict[str, Any]:
    tx, limits = _frames()
    fs = project.get_feature_store()
    fs.get_or_create_feature_group("qs_tx", version=1, primary_key=["t_id"],
                                   event_time="event_time").insert(tx)
    fs.get_or_create_feature_group("qs_limits", version=1, primary_key=["card"],
                                   event_time="valid_from").insert(limits)
    query = (fs.get_feature_group("qs_tx", 1).select_all()
             .join(fs.get_feature_group("qs_limits", 1).select(["credit_limit"]), on=["card"]))
    fv = fs.get_or_create_feature_view(
        "qs_view", 1, query, labels=["fraud"],
        transformation_functions=[standard_scaler("amount"), label_encoder("channel")])
    version, _ = fv.create_train_validation_test_split(seed=4, **BOUNDS)
    out = {"fg": fs.get_feature_group("qs_tx", 1).read(), "query": query.read(),
           "split": fv.get_train_validation_test_split(version, primary_key=True),
           "in_memory": fv.train_validation_test_split(**BOUNDS)}  # a second version
    fv.init_batch_scoring(version)  # the materialized version's statistics, on both backends
    out["batch"] = fv.get_batch_data(start_time="2024-06-01", end_time="2024-06-15",
                                     primary_key=True)
    return out


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("query_service")
    local = _build(feature_store.login(root=root / "local"))
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for var in ("REST_ENDPOINT", "HOPSWORKS_HOST", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY"):
            mp.delenv(var, raising=False)
        with serve(root / "cluster", query_service=True) as fake:
            project = feature_store.login(backend="hopsworks", root=root / "client",
                                          **fake.login_kwargs)
            yield local, _build(project), fake
            assert not fake.server.unrouted, fake.server.unrouted


def _same(a: pd.DataFrame, b: pd.DataFrame, key: str) -> None:
    a = a.sort_values(key).reset_index(drop=True)
    b = b.sort_values(key).reset_index(drop=True)[list(a.columns)]
    pd.testing.assert_frame_equal(a, b, check_dtype=False, check_exact=False, rtol=1e-9)


def test_reads_go_over_flight_to_the_query_service(reads):
    _, _, fake = reads
    served = fake.query_service.reads
    assert sum("query" in r for r in served) >= 4  # fg.read, Query.read, in-memory, batch
    assert any("/train/" in r.get("path", "") for r in served), served  # materialized files


def test_fg_read_and_a_point_in_time_query_match_the_embedded_store(reads):
    local, hops, _ = reads
    _same(local["fg"], hops["fg"], "t_id")
    assert "credit_limit" in hops["query"].columns
    _same(local["query"], hops["query"], "t_id")


def test_in_memory_training_data_matches_the_embedded_store(reads):
    """Same rows, columns and labels. One documented difference: for an in-memory version the
    SDK's Python engine fits the statistics itself with ``pandas.describe`` (sample standard
    deviation), where the cluster's job (Deequ) and fstrain use the population one, so
    ``standard_scaler`` differs by exactly sqrt((n-1)/n) for n train rows."""
    local, hops, _ = reads
    for a, b in zip(local["in_memory"][:3], hops["in_memory"][:3], strict=True):
        assert len(a) == len(b) > 0
        assert sorted(a.columns) == sorted(b.columns)
        np.testing.assert_array_equal(np.sort(a["label_encoder_channel_"].to_numpy(float)),
                                      np.sort(b["label_encoder_channel_"].to_numpy(float)))
    for a, b in zip(local["in_memory"][3:], hops["in_memory"][3:], strict=True):
        assert sorted(a["fraud"]) == sorted(b["fraud"])
    n = len(local["in_memory"][0])
    ratio = (np.sort(hops["in_memory"][0]["standard_scaler_amount_"].to_numpy(float))
             / np.sort(local["in_memory"][0]["standard_scaler_amount_"].to_numpy(float)))
    np.testing.assert_allclose(ratio, np.sqrt((n - 1) / n), rtol=1e-9)


def test_batch_data_is_windowed_and_transformed_with_the_versions_statistics(reads):
    local, hops, _ = reads
    a, b = local["batch"], hops["batch"]
    assert len(a) == len(b) > 0
    assert {"standard_scaler_amount_", "label_encoder_channel_"} <= set(b.columns)
    assert "fraud" not in b.columns and "amount" not in b.columns
    a = a.sort_values("t_id").reset_index(drop=True)
    b = b.sort_values("t_id").reset_index(drop=True)
    for column in ("standard_scaler_amount_", "label_encoder_channel_", "credit_limit"):
        np.testing.assert_allclose(a[column].astype(float), b[column].astype(float), rtol=1e-9)


def test_materialized_splits_read_over_flight_match_the_embedded_store(reads):
    local, hops, _ = reads
    for a, b in zip(local["split"][:3], hops["split"][:3], strict=True):
        _same(a, b, "t_id")
