"""The error contract at the storage boundary: every failure is a FeatureStoreError subclass
naming the object, and a failed call writes nothing (catalog rows, Delta versions, files)."""

from __future__ import annotations

import datetime as dt
import os
import sqlite3

import pandas as pd
import pytest

from fstrain.kernel.errors import (
    BackendError,
    FeatureStoreError,
    IntegrityError,
    InvalidArgumentError,
    NotFoundError,
    SchemaMismatchError,
    UnknownFeatureError,
)

T0 = pd.Timestamp("2024-01-01", tz="UTC")


@pytest.fixture
def fg(fs):
    group = fs.create_feature_group("sales", version=1, primary_key=["id"], event_time="ts")
    group.insert(pd.DataFrame({
        "id": [1, 2, 3], "ts": [T0, T0, T0], "amount": [1.0, 2.0, 3.0],
        "n": [1, 2, 3], "city": ["a", "b", None], "flag": [True, False, True],
    }))
    return group


def state(fs):
    """Everything a failed call must leave as it was."""
    with sqlite3.connect(fs.catalog.path) as conn:
        rows = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("feature_groups", "tags", "statistics", "feature_views",
                          "training_datasets", "validation_reports")}
    files = sorted(str(p.relative_to(fs.root)) for p in fs.root.rglob("*")
                   if p.is_file() and not p.name.startswith("catalog.sqlite") and not p.name.endswith(".lock"))
    return rows, files


# -- filters whose values do not fit the column ---------------------------------------------

FILTERS = [
    ("amount", ">", "x"), ("amount", "==", "abc"), ("amount", "<=", "1e"),
    ("city", ">", 1), ("city", "==", 2.5), ("n", "<", "many"),
    ("ts", ">", "not a time"), ("flag", "==", "maybe"),
    ("n", "isin", ["a", "b"]), ("amount", "isin", ["x"]),
]


def _apply(feature, op, value):
    if op == "isin":
        return feature.isin(value)
    return {">": feature.__gt__, "==": feature.__eq__, "<=": feature.__le__,
            "<": feature.__lt__}[op](value)


@pytest.mark.parametrize(("column", "op", "value"), FILTERS)
def test_filter_value_of_the_wrong_type_is_typed(fs, fg, column, op, value):
    before = state(fs)
    with pytest.raises(FeatureStoreError, match=r"sales") as info:
        fg.filter(_apply(fg[column], op, value)).read()
    assert isinstance(info.value, InvalidArgumentError | SchemaMismatchError)
    assert state(fs) == before


@pytest.mark.parametrize(("op", "value", "rows"), [("==", 2**70, 0), (">", -(2**70), 3),
                                                    ("<", 2**70, 3)])
def test_filter_values_beyond_64_bits_compare_exactly(fg, op, value, rows):
    assert len(fg.filter(_apply(fg["n"], op, value)).read()) == rows


@pytest.mark.parametrize("name", ["nope", "amountt", "ID"])
def test_unknown_filter_column_is_a_feature_store_error(fg, name):
    with pytest.raises(UnknownFeatureError, match=rf"feature group 'sales' v1 has no .*'{name}'"):
        getattr(fg, name)
    assert not hasattr(fg, name)  # still an AttributeError for hasattr


# -- values and types that cannot be stored -------------------------------------------------

BAD_ROWS = [
    ({"amount": [2**70]}, SchemaMismatchError, "amount"),
    ({"n": [2**70]}, SchemaMismatchError, "'n'"),
    ({"n": [-(2**70)]}, SchemaMismatchError, "'n'"),
    ({"id": [2**64]}, SchemaMismatchError, "'id'"),
    ({"n": ["three"]}, SchemaMismatchError, "'n'"),
    ({"amount": ["1.5"]}, SchemaMismatchError, "'amount'"),
    ({"city": [3]}, SchemaMismatchError, "'city'"),
    ({"ts": ["yesterday"]}, SchemaMismatchError, "'ts'"),
    ({"ts": [None]}, SchemaMismatchError, "'ts'"),
    ({"id": [None]}, SchemaMismatchError, "'id'"),
    ({"extra": [1]}, SchemaMismatchError, "extra"),
    ({"flag": ["yes"]}, SchemaMismatchError, "'flag'"),
]


@pytest.mark.parametrize(("change", "error", "needle"), BAD_ROWS)
def test_bad_values_are_refused_and_nothing_is_written(fs, fg, change, error, needle):
    row = {"id": [9], "ts": [T0], "amount": [1.0], "n": [1], "city": ["c"], "flag": [True]}
    row.update(change)
    before = state(fs)
    version = fg._table.version()
    with pytest.raises(error, match=r"sales") as info:
        fg.insert(pd.DataFrame(row))
    assert needle in str(info.value)
    assert fg._table.version() == version
    assert state(fs) == before


NEW_GROUP_COLUMNS = [
    ("d", [pd.Timedelta("1h")], "duration"),
    ("t", [dt.time(1, 2)], "time64"),
    ("big", [2**70], "big"),
    ("nothing", [None], "nothing"),
]


@pytest.mark.parametrize(("column", "values", "needle"), NEW_GROUP_COLUMNS)
def test_first_insert_of_an_unstorable_type_creates_nothing(fs, column, values, needle):
    group = fs.create_feature_group("odd", version=1, primary_key=["id"])
    before = state(fs)
    with pytest.raises(SchemaMismatchError, match=rf"feature group 'odd' v1.*{needle}"):
        group.insert(pd.DataFrame({"id": [1], column: values}))
    assert state(fs) == before
    assert group.id is None
    group.insert(pd.DataFrame({"id": [1], "ok": [1.0]}))  # the name is still free
    assert group.id is not None


# -- damaged storage ------------------------------------------------------------------------


def _forget():
    from feature_store.local.storage.delta_table import forget_snapshots

    forget_snapshots()


def _data_files(group):
    return sorted(p for p in group._table.path.iterdir() if p.suffix == ".parquet")


@pytest.mark.parametrize("garbage", [b"", b"garbage", b"PAR1" + b"\x00" * 20 + b"PAR1"])
@pytest.mark.parametrize("call", ["read", "insert", "training_data", "statistics"])
def test_garbage_parquet_is_an_integrity_error(fs, fg, garbage, call):
    fv = fs.create_feature_view("sales_fv", version=1, query=fg.select_all())
    _data_files(fg)[0].write_bytes(garbage)
    _forget()
    version = fg._table.version()
    calls = {
        "read": lambda: fg.read(),
        "insert": lambda: fg.insert(pd.DataFrame({"id": [7], "ts": [T0], "amount": [1.0], "n": [1],
                                                  "city": ["x"], "flag": [True]})),
        "training_data": lambda: fv.training_data(seed=1),
        "statistics": lambda: fg.compute_statistics(),
    }
    with pytest.raises(FeatureStoreError, match="sales") as info:
        calls[call]()
    assert isinstance(info.value, IntegrityError | BackendError)
    assert fg._table.version() == version


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
@pytest.mark.parametrize("call", ["read", "insert"])
def test_torn_delta_log_is_an_integrity_error(fs, fg, damage, call):
    fg.insert(pd.DataFrame({"id": [4], "ts": [T0], "amount": [4.0], "n": [4], "city": ["d"],
                            "flag": [False]}))
    log = fg._table.path / "_delta_log"
    last = sorted(p for p in log.iterdir() if p.suffix == ".json")[-1]
    text = last.read_text()
    last.write_text({"truncate": text[: len(text) // 2], "garbage": "{not json", "empty": ""}[damage])
    _forget()
    again = fs.get_feature_group("sales", version=1)
    with pytest.raises(FeatureStoreError, match="sales"):
        if call == "read":
            again.read()
        else:
            again.insert(pd.DataFrame({"id": [5], "ts": [T0], "amount": [5.0], "n": [5],
                                       "city": ["e"], "flag": [True]}))


def test_missing_data_file_is_typed(fs, fg):
    os.remove(_data_files(fg)[0])
    _forget()
    with pytest.raises(FeatureStoreError, match="sales"):
        fg.read()


@pytest.mark.parametrize("content", [b"garbage" * 200, b"SQLite format 3\x00" + b"\xff" * 200])
def test_corrupted_catalog_is_a_backend_error_naming_it(tmp_path, content):
    import feature_store

    root = tmp_path / "store"
    fs = feature_store.login(root=root).get_feature_store()
    fs.create_feature_group("x", version=1, primary_key=["id"]).insert(pd.DataFrame({"id": [1]}))
    catalog = fs.catalog.path
    for suffix in ("-wal", "-shm"):
        (catalog.parent / (catalog.name + suffix)).unlink(missing_ok=True)
    catalog.write_bytes(content)
    with pytest.raises(BackendError, match=r"catalog .*catalog\.sqlite"):
        feature_store.login(root=root).get_feature_store().get_feature_group("x", version=1)


# -- time travel ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"commit_id": 999}, NotFoundError), ({"commit_id": -1}, InvalidArgumentError),
    ({"wallclock_time": "1970-01-02"}, InvalidArgumentError),
    ({"wallclock_time": "not a time"}, InvalidArgumentError),
    ({"wallclock_time": "2024-13-45"}, InvalidArgumentError),
])
def test_bad_time_travel_is_typed_and_names_the_group(fg, kwargs, error):
    with pytest.raises(error) as info:
        fg.select_all().as_of(**kwargs).read()
    assert "sales" in str(info.value) or "wallclock_time" in str(info.value)
