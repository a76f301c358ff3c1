"""Writes that used to commit bad state (null partition keys, orphan Delta folders) or to refuse
good data (±inf)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest


@pytest.mark.parametrize("bad", [math.inf, -math.inf, np.float32("inf")])
@pytest.mark.parametrize("existing", [False, True])
def test_infinite_value_is_stored_in_one_commit(fs, bad, existing):
    """Hopsworks stores ±inf in a double column; the local store did not (a notebook inserting
    such data stopped). It is stored, read back as itself and counted apart in the statistics."""
    fg = fs.create_feature_group("inf_fg", version=1, primary_key=["id"])
    if existing:
        fg.insert(pd.DataFrame({"id": [0], "x": [1.0]}))
    commits = len(fg.commit_details()) if existing else 0
    fg.insert(pd.DataFrame({"id": [1, 2], "x": [1.0, bad]}))
    assert len(fg.commit_details()) == commits + 1
    assert fg.read().set_index("id")["x"][2] == float(bad)
    x = next(f for f in fg.get_statistics()["features"] if f["feature"] == "x")
    assert (x["posinf_count"], x["neginf_count"]) == ((1, 0) if bad > 0 else (0, 1))
    assert (x["min"], x["max"], x["mean"]) == (1.0, 1.0, 1.0)


def test_nan_and_null_floats_are_still_accepted(fs):
    fg = fs.create_feature_group("nan_fg", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2], "x": [float("nan"), None]}))
    assert len(fg.read()) == 2


def test_statistics_survive_stored_infinity():
    import json

    import duckdb

    from feature_store.local.storage.statistics import compute_statistics

    con = duckdb.connect()
    table = pa.table({"x": [1.0, math.inf]})
    con.register("t", table)
    stats = compute_statistics(con, "t", table.schema)
    json.dumps(stats, allow_nan=False)  # storable
    x = stats["features"][0]
    assert (x["max"], x["posinf_count"], x["count"]) == (1.0, 1, 2)


def test_null_partition_key_upserts_replace_not_append(fs):
    fg = fs.create_feature_group("part_fg", version=1, primary_key=["id"], partition_key=["region"])
    df = pd.DataFrame({"id": [1, 2], "region": [None, "eu"], "v": [1.0, 2.0]})
    for _ in range(3):
        fg.insert(df)
    assert len(fg.read()) == 2
    fg.insert(pd.DataFrame({"id": [1], "region": [None], "v": [5.0]}))
    out = fg.read().sort_values("id")
    assert list(out["v"]) == [5.0, 2.0]
    fg.remove_rows(pd.DataFrame({"id": [1], "region": [None]}))
    assert list(fg.read()["id"]) == [2]


def test_orphan_delta_folder_from_a_killed_first_insert_is_recovered(fs):
    from deltalake import DeltaTable

    fg = fs.create_feature_group("orphan", version=1, primary_key=["id"])
    path = fg._table.path
    # what a kill -9 between creating the folder and committing the catalog row leaves
    DeltaTable.create(str(path), schema=pa.schema([("id", pa.int64()), ("old", pa.string())]))
    fg.insert(pd.DataFrame({"id": [1], "new": [2.0]}))
    again = fs.get_feature_group("orphan", version=1)
    assert [f.name for f in again.features] == ["id", "new"]
    assert again._table.schema().names == ["id", "new"]
    assert list(again.read()["new"]) == [2.0]
    again.insert(pd.DataFrame({"id": [2], "new": [3.0]}))
    assert len(again.read()) == 2


def test_vacuum_removes_part_files_of_killed_writers_and_keeps_pinned_commits(fs):
    fg = fs.create_feature_group("vac", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1], "v": [1.0]}))
    fv = fs.create_feature_view("vac_fv", version=1, query=fg.select_all())
    version, _ = fv.create_training_data(seed=1)
    fg.insert(pd.DataFrame({"id": [1], "v": [2.0]}))
    stray = fg._table.path / "part-00000-killed-writer.snappy.parquet"
    stray.write_bytes(b"PAR1 partial")
    removed = fg.vacuum()
    assert not stray.exists()
    assert any("killed-writer" in r for r in removed)
    x, _ = fv.get_training_data(version)  # the pinned commit's files survive
    assert list(x["v"]) == [1.0]
    assert list(fg.read()["v"]) == [2.0]
