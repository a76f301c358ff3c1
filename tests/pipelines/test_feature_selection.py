"""Feature selection: planted leak, redundant pair, constant column, MI ordering, time leaks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fstrain.tools.feature_selection import COLUMNS, rank_features, selection_report
from fstrain.kernel.errors import InvalidArgumentError, SchemaMismatchError

N = 3000


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(11)
    signal = rng.normal(size=N)
    y = pd.Series((signal + rng.normal(scale=0.7, size=N) > 0).astype(int), name="fraud")
    X = pd.DataFrame({
        "noise": rng.normal(size=N),
        "informative": signal,
        "informative_x2": 2.0 * signal + 0.01 * rng.normal(size=N),  # redundant with informative
        "label_copy": y.to_numpy() * 10.0,                            # planted leak
        "constant": np.ones(N),
        "mostly_constant": np.where(np.arange(N) < 10, 5.0, 1.0),      # 99.7 % the same value
        "city": rng.choice(["oslo", "rome", "lima"], N),
        "row_id": [f"r{i}" for i in range(N)],
    })
    return X, y


@pytest.fixture(scope="module")
def table(data) -> pd.DataFrame:
    X, y = data
    return rank_features(X, y, seed=0)


def _row(table: pd.DataFrame, feature: str) -> pd.Series:
    return table.set_index("feature").loc[feature]


def test_columns_and_sorted_by_rank(table, data):
    assert list(table.columns) == COLUMNS
    assert sorted(table["feature"]) == sorted(data[0].columns)
    assert table["rank"].tolist() == list(range(1, len(table) + 1))
    assert table["mutual_information"].is_monotonic_decreasing
    assert table.attrs["task"] == "classification" and table.attrs["single_feature_metric"] == "auc"


def test_label_copy_flagged_as_leak(table):
    leak = _row(table, "label_copy")
    assert leak["likely_leak"]
    assert "alone predicts the label (AUC 1.000)" in leak["leak_reason"]
    assert leak["rank"] == 1
    flagged = set(table.loc[table["likely_leak"], "feature"])
    assert flagged == {"label_copy"}


def test_inverted_label_copy_is_a_leak_too(data):
    X, y = data
    t = rank_features(X[["noise"]].assign(inverted=-y.to_numpy()), y, seed=0)
    assert _row(t, "inverted")["single_feature_auc"] <= 0.01
    assert _row(t, "inverted")["likely_leak"]


def test_categorical_leak_detected_out_of_fold(data):
    X, y = data
    t = rank_features(X[["noise", "row_id"]].assign(status=np.where(y == 1, "chargeback", "ok")), y)
    assert _row(t, "status")["likely_leak"]
    # a per-row identifier cannot predict out of fold: no leak, no information
    assert not _row(t, "row_id")["likely_leak"]
    assert _row(t, "row_id")["mutual_information"] < 0.01


def test_redundant_pair(table):
    assert _row(table, "informative")["redundant_with"] == ["informative_x2"]
    assert _row(table, "informative_x2")["redundant_with"] == ["informative"]
    assert _row(table, "noise")["redundant_with"] == []


def test_constant_and_near_constant(table):
    assert _row(table, "constant")["near_constant"]
    assert _row(table, "mostly_constant")["near_constant"]
    assert not _row(table, "informative")["near_constant"]
    assert not _row(table, "city")["near_constant"]
    assert _row(table, "constant")["mutual_information"] == 0.0
    assert _row(table, "constant")["single_feature_auc"] == 0.5


def test_mi_ranks_informative_above_noise(table):
    assert _row(table, "informative")["rank"] < _row(table, "noise")["rank"]
    assert _row(table, "informative")["mutual_information"] > 0.1
    assert _row(table, "noise")["mutual_information"] < 0.05


def test_deterministic_for_a_seed(data):
    X, y = data
    a = rank_features(X, y, seed=3, max_rows=1000)
    b = rank_features(X, y, seed=3, max_rows=1000)
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs["rows_used"] == 1000


def test_regression_r2_and_leak():
    rng = np.random.default_rng(2)
    x = rng.normal(size=2000)
    y = pd.DataFrame({"price": 3 * x + rng.normal(size=2000)})
    X = pd.DataFrame({"x": x, "noise": rng.normal(size=2000), "price_copy": y["price"] * 2 + 1})
    t = rank_features(X, y)
    assert t.attrs["task"] == "regression"
    assert _row(t, "price_copy")["likely_leak"]
    assert "alone predicts the label (R² 1.000)" in _row(t, "price_copy")["leak_reason"]
    assert _row(t, "x")["rank"] < _row(t, "noise")["rank"]
    assert not _row(t, "x")["likely_leak"]
    assert "R2" in selection_report(t).splitlines()[0]


def test_event_time_after_label_is_a_leak(data):
    X, y = data
    label_time = pd.Series(pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(np.arange(N), unit="h"))
    later = label_time + pd.Timedelta("1h")
    earlier = (label_time - pd.Timedelta("1D")).dt.tz_localize(None)  # naive = UTC
    t = rank_features(X[["noise", "informative"]], y, label_time=label_time,
                      event_times={"noise": later, "informative": earlier})
    assert _row(t, "noise")["likely_leak"]
    assert "event time after the label's (100% of rows)" in _row(t, "noise")["leak_reason"]
    assert not _row(t, "informative")["likely_leak"]


def test_report_is_readable(table):
    text = selection_report(table)
    lines = text.splitlines()
    assert lines[0].split() == ["rank", "feature", "MI", "AUC", "flags"]
    assert any("label_copy" in ln and "LEAK: alone predicts the label" in ln for ln in lines)
    assert any("informative " in ln and "redundant with informative_x2" in ln for ln in lines)
    assert any(ln.split()[1] == "constant" and "near-constant" in ln for ln in lines[2:-2])
    assert lines[-1].startswith("8 features (classification): 1 likely leak(s), 2 near-constant")


def test_bad_input(data):
    X, y = data
    with pytest.raises(InvalidArgumentError, match=r"one value per row of X \(3000\). Got 10"):
        rank_features(X, y.iloc[:10])
    with pytest.raises(InvalidArgumentError, match="exactly one label column. Got 2"):
        rank_features(X, pd.DataFrame({"a": y, "b": y}))
    with pytest.raises(InvalidArgumentError, match="event_times needs label_time"):
        rank_features(X, y, event_times={"noise": y})
    with pytest.raises(SchemaMismatchError, match="'nois'.*Did you mean 'noise'"):
        rank_features(X, y, event_times={"nois": y}, label_time=y)
    with pytest.raises(InvalidArgumentError, match="max_rows must be an integer of at least 10"):
        rank_features(X, y, max_rows=5)
    with pytest.raises(InvalidArgumentError, match=r"unique column names. Got duplicates \['noise'\]"):
        rank_features(pd.concat([X[["noise"]], X[["noise"]]], axis=1), y)
    with pytest.raises(InvalidArgumentError, match="table must be the output of rank_features"):
        selection_report(pd.DataFrame({"feature": ["a"]}))
