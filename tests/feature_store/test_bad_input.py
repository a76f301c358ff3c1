"""Bad input gets a typed error naming the group, column and value — and writes nothing."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import (
    FeatureStoreError,
    InvalidArgumentError,
    InvalidNameError,
    NotFoundError,
    SchemaMismatchError,
)


@pytest.fixture
def fg(fs):
    group = fs.get_or_create_feature_group("orders", version=1, primary_key=["id"], event_time="ts")
    group.insert(
        pd.DataFrame(
            {"id": [1, 2], "ts": pd.to_datetime(["2024-01-01", "2024-01-02"], utc=True),
             "amount": [1.5, 2.5], "city": ["a", "b"]}
        )
    )
    return group


def _good(**overrides):
    data = {"id": [3], "ts": pd.to_datetime(["2024-01-03"], utc=True), "amount": [3.5], "city": ["c"]}
    data.update(overrides)
    return pd.DataFrame(data)


def _assert_unchanged(fg, rows=2, commits=1):
    assert len(fg.read()) == rows
    assert len(fg.commit_details()) == commits


def test_errors_share_one_root():
    for cls in (InvalidArgumentError, InvalidNameError, NotFoundError, SchemaMismatchError):
        assert issubclass(cls, FeatureStoreError)


def test_wrong_dtype_for_existing_column(fg):
    with pytest.raises(SchemaMismatchError, match=r"orders' v1: column 'amount' must be double.*'oops'"):
        fg.insert(_good(amount=["oops"]))
    _assert_unchanged(fg)


def test_lossy_cast_is_refused(fs):
    g = fs.get_or_create_feature_group("ints", version=1, primary_key=["id"])
    g.insert(pd.DataFrame({"id": [1], "n": [1]}))
    with pytest.raises(SchemaMismatchError, match="column 'n' cannot be stored as int64"):
        g.insert(pd.DataFrame({"id": [2], "n": [1.5]}))
    assert len(g.read()) == 1


def test_lossless_widening_is_accepted(fs):
    g = fs.get_or_create_feature_group("widen", version=1, primary_key=["id"])
    g.insert(pd.DataFrame({"id": [1], "x": [1.0]}))
    g.insert(pd.DataFrame({"id": np.array([2], dtype="int32"), "x": np.array([2], dtype="int16")}))
    assert sorted(g.read()["x"].tolist()) == [1.0, 2.0]


def test_extra_column_hints_append_features(fg):
    with pytest.raises(SchemaMismatchError, match=r"columns \['extra'\] are not in the feature group.*append_features"):
        fg.insert(_good(extra=[1]))
    _assert_unchanged(fg)


def test_missing_column(fg):
    with pytest.raises(SchemaMismatchError, match=r"columns \['city'\] are missing"):
        fg.insert(_good().drop(columns=["city"]))
    _assert_unchanged(fg)


@pytest.mark.parametrize("column,value", [("id", None), ("ts", pd.NaT)])
def test_null_in_key_columns(fg, column, value):
    frame = pd.concat([_good(), _good(id=[4])], ignore_index=True)
    frame[column] = frame[column].astype(object) if column == "id" else frame[column]
    frame.loc[1, column] = value
    role = "primary key" if column == "id" else "event_time"
    with pytest.raises(SchemaMismatchError, match=f"{role} column '{column}' has 1 null/NaN"):
        fg.insert(frame)
    _assert_unchanged(fg)


def test_nan_in_float_primary_key(fs):
    g = fs.get_or_create_feature_group("floatkey", version=1, primary_key=["k"])
    with pytest.raises(SchemaMismatchError, match="primary key column 'k' has 1 null/NaN"):
        g.insert(pd.DataFrame({"k": [1.0, np.nan], "v": [1, 2]}))
    assert g.id is None  # nothing created


def test_duplicate_key_in_batch_shows_example(fg):
    frame = pd.concat([_good(), _good(amount=[9.9])], ignore_index=True)
    with pytest.raises(SchemaMismatchError, match=r"1 key\(s\) appear more than once.*'id': 3"):
        fg.insert(frame)
    _assert_unchanged(fg)


def test_missing_event_time_column(fg):
    with pytest.raises(SchemaMismatchError, match="missing"):
        fg.insert(_good().drop(columns=["ts"]))
    _assert_unchanged(fg)


def test_event_time_declared_but_absent_on_first_insert(fs):
    g = fs.get_or_create_feature_group("noet", version=1, primary_key=["id"], event_time="when")
    with pytest.raises(SchemaMismatchError, match="event_time column 'when' is not in the data"):
        g.insert(pd.DataFrame({"id": [1], "whem": [1]}))
    assert g.id is None


def test_event_time_of_wrong_type(fs):
    g = fs.get_or_create_feature_group("badet", version=1, primary_key=["id"], event_time="ts")
    # epoch milliseconds (int64) are accepted, as Hopsworks documents; floats and strings are not
    with pytest.raises(SchemaMismatchError, match="event_time column 'ts' must be a timestamp, a "
                       "date or epoch milliseconds .* Got double"):
        g.insert(pd.DataFrame({"id": [1], "ts": [1700000000000.5]}))
    assert g.id is None


def test_mixed_naive_and_aware_timestamps(fs):
    g = fs.get_or_create_feature_group("tzmix", version=1, primary_key=["id"], event_time="ts")
    frame = pd.DataFrame(
        {"id": [1, 2], "ts": [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)]}
    )
    with pytest.raises(SchemaMismatchError, match="column 'ts' mixes tz-naive and tz-aware"):
        g.insert(frame)
    assert g.id is None


def test_naive_timestamps_mean_utc(fs):
    g = fs.get_or_create_feature_group("tznaive", version=1, primary_key=["id"], event_time="ts")
    g.insert(pd.DataFrame({"id": [1], "ts": [pd.Timestamp("2024-01-01 12:00")]}))
    g.insert(pd.DataFrame({"id": [2], "ts": [pd.Timestamp("2024-01-01 12:00", tz="Europe/Stockholm")]}))
    out = g.read().sort_values("id")
    assert out["ts"].tolist() == [pd.Timestamp("2024-01-01 12:00", tz="UTC"),
                                  pd.Timestamp("2024-01-01 11:00", tz="UTC")]


def test_empty_frame(fg):
    with pytest.raises(InvalidArgumentError, match="orders' v1: the data to insert is empty"):
        fg.insert(_good().iloc[0:0])
    _assert_unchanged(fg)


def test_all_null_column_on_first_insert(fs):
    g = fs.get_or_create_feature_group("nulls", version=1, primary_key=["id"])
    with pytest.raises(SchemaMismatchError, match="column 'x' holds only nulls"):
        g.insert(pd.DataFrame({"id": [1], "x": [None]}))
    assert g.id is None


@pytest.mark.parametrize("name", ["Bad-Name", "1abc", "with space", "", "x" * 64])
def test_invalid_feature_group_names(fs, name):
    with pytest.raises(InvalidNameError, match="feature group name must match"):
        fs.get_or_create_feature_group(name, version=1, primary_key=["id"])


def test_invalid_column_name(fs):
    g = fs.get_or_create_feature_group("cols", version=1, primary_key=["id"])
    with pytest.raises(InvalidNameError, match="column name 'a-b' is invalid"):
        g.insert(pd.DataFrame({"id": [1], "a-b": [1]}))
    assert g.id is None


def test_invalid_version(fs):
    with pytest.raises(InvalidArgumentError, match="version must be a positive integer. Got 0"):
        fs.get_or_create_feature_group("ver", version=0, primary_key=["id"])


def test_missing_primary_key_argument(fs):
    with pytest.raises(InvalidArgumentError, match="primary_key must name at least one column"):
        fs.get_or_create_feature_group("nopk", version=1)


def test_unknown_group_lists_existing(fs, fg):
    with pytest.raises(NotFoundError, match=r"does not exist \(feature groups: orders\)"):
        fs.get_feature_group("customers", 1)


def test_bad_window(fg):
    with pytest.raises(InvalidArgumentError, match="start_time must be before end_time"):
        fg.read(start_time="2024-02-01", end_time="2024-01-01")
    with pytest.raises(InvalidArgumentError, match="start_time must be an ISO-8601"):
        fg.read(start_time="not a date")


def test_wrong_input_type(fg):
    with pytest.raises(InvalidArgumentError, match="must be a pandas DataFrame or a pyarrow Table"):
        fg.insert([{"id": 1}])
    _assert_unchanged(fg)


def test_vacuum_rejects_negative_retention(fg):
    with pytest.raises(InvalidArgumentError, match="retention_hours must be >= 0. Got -1"):
        fg.vacuum(retention_hours=-1)
    _assert_unchanged(fg)
