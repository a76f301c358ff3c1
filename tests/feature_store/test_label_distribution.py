"""Label distributions are counted a batch at a time and come out as pandas counts the whole
column (value counts with keys as pandas prints them, nulls included; distinct/missing of free
text), the same for a split in memory and a split file, whatever the batching."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feature_store.local.training_data import label_distribution as ld
from feature_store.local.training_data.label_distribution import (
    file_label_distribution,
    label_distribution,
    table_label_distribution,
)


def _pandas(table: pa.Table, labels: list[str]) -> dict:
    """What the whole column gives in pandas (the record before the counts were streamed; mean
    and std are compared to it approximately: they are now block moments)."""
    out = {}
    frame = table.select(labels).to_pandas()
    for label in labels:
        with np.errstate(invalid="ignore"):
            out[label] = _pandas_one(frame[label])
    return out


def _pandas_one(col: pd.Series) -> dict:
    if col.nunique(dropna=True) <= 50:
        counts = col.value_counts(dropna=False).sort_index()
        return {str(k): int(v) for k, v in counts.items()}
    if ld.pd_numeric(col):
        return {"mean": float(col.mean()), "std": float(col.std())}
    return {"distinct": int(col.nunique(dropna=True)), "missing": int(col.isna().sum())}


def _table(n: int = 600) -> pa.Table:
    rng = np.random.default_rng(0)
    nulls = np.arange(n) % 7 == 0

    def holed(values, kind=None):
        return pa.array([None if hole else v for hole, v in zip(nulls, values, strict=True)], kind)

    floats = rng.integers(0, 4, n) * 0.5
    floats[::13] = np.nan
    zeros = np.where(rng.random(n) > 0.5, 0.0, -0.0)
    zeros[5] = -0.0
    return pa.table({
        "int": pa.array(rng.integers(-3, 4, n)), "int8": pa.array(rng.integers(0, 3, n), pa.int8()),
        "bool": pa.array(rng.random(n) > 0.5), "str": pa.array(rng.choice(["x", "a b", "é"], n)),
        "large": pa.array(rng.choice(["x", "z"], n), pa.large_string()),
        "int_nulls": holed(rng.integers(0, 3, n).tolist(), pa.int64()),
        "str_nulls": holed(rng.choice(["0", "1"], n).tolist()),
        "bool_nulls": holed((rng.random(n) > 0.5).tolist(), pa.bool_()),
        "float_nan_nulls": holed(floats.tolist(), pa.float64()),
        "zeros": pa.array(zeros),
        "ts_nulls": holed(list(pd.Timestamp("2024-01-01", tz="UTC")
                               + pd.to_timedelta(rng.integers(0, 3, n), unit="D")),
                          pa.timestamp("us", "UTC")),
        "exactly_50": pa.array(np.arange(n) % 50),
        "many_ints": pa.array(np.arange(n) % 51),
        "many_floats": holed((rng.normal(size=n) * 1e6).tolist(), pa.float64()),
        "text": holed([f"t{i % 300}" for i in range(n)]),
        "all_null": pa.nulls(n, pa.string()),
    })


def _batched(table: pa.Table, rows: int):
    return lambda: table.to_batches(max_chunksize=rows)


@pytest.mark.parametrize("rows", [1, 13, 64, 10_000])
def test_counts_over_any_batching_equal_the_whole_column_counts(rows):
    table = _table()
    labels = table.column_names
    want = _pandas(table, labels)
    got = label_distribution(_batched(table, rows), table.schema, labels)
    assert list(got) == labels
    assert json.dumps(got) == json.dumps(table_label_distribution(table, labels))
    for label in labels:
        if label == "many_floats":
            assert got[label] == pytest.approx(want[label], rel=1e-12)
        else:
            assert got[label] == want[label], label
            assert list(got[label]) == list(want[label]), label  # sorted as pandas sorts
    assert got["bool_nulls"].keys() == {"False", "True", "None"}
    assert got["float_nan_nulls"]["nan"] == want["float_nan_nulls"]["nan"] > 0
    assert got["zeros"] == {"0.0": 600} or got["zeros"] == {"-0.0": 600}
    assert got["exactly_50"].keys() == {str(i) for i in range(50)}
    assert got["text"] == {"distinct": 300, "missing": table["text"].null_count}


def test_a_split_file_reads_as_the_table(tmp_path, monkeypatch):
    monkeypatch.setattr(ld, "BATCH_ROWS", 97)
    table = _table()
    path = tmp_path / "split.parquet"
    pq.write_table(table, path, row_group_size=200)
    labels = table.column_names
    assert json.dumps(file_label_distribution(path, labels)) == json.dumps(
        table_label_distribution(table, labels))
    pq.write_table(table.slice(0, 0), tmp_path / "empty.parquet")
    empty = file_label_distribution(tmp_path / "empty.parquet", labels)
    assert empty == _pandas(table.slice(0, 0), labels) == {label: {} for label in labels}


def test_moments_of_many_values_with_infinities_are_pandas_ones():
    n = 200
    for extra, mean in (([math.inf], math.inf), ([-math.inf], -math.inf),
                        ([math.inf, -math.inf], math.nan)):
        values = pa.array([*np.arange(n, dtype=float), *extra, None])
        table = pa.table({"y": values})
        want = _pandas(table, ["y"])["y"]
        for rows in (7, 1_000):
            got = label_distribution(_batched(table, rows), table.schema, ["y"])["y"]
            assert math.isnan(got["std"]) and math.isnan(want["std"])
            assert got["mean"] == want["mean"] or (math.isnan(got["mean"]) and math.isnan(mean))


def test_the_numbers_mean_and_std_do_not_depend_on_batching():
    values = np.random.default_rng(1).normal(3, 2, 140_001)
    table = pa.table({"y": values})
    got = [label_distribution(_batched(table, rows), table.schema, ["y"])["y"]
           for rows in (1_000, 65_537, 140_001)]
    assert got[0] == got[1] == got[2]
    assert got[0]["mean"] == pytest.approx(values.mean(), rel=1e-13)
    assert got[0]["std"] == pytest.approx(values.std(ddof=1), rel=1e-13)
