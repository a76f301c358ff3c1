"""Writes that used to commit bad state: +inf, null partition keys, orphan Delta folders."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from fstrain.kernel.errors import InvalidArgumentError


def _versions(fg) -> int:
    return fg._table.version() if fg.id is not None else -1


@pytest.mark.parametrize("bad", [math.inf, -math.inf, np.float32("inf")])
@pytest.mark.parametrize("existing", [False, True])
def test_infinite_value_is_refused_before_commit(fs, bad, existing):
    fg = fs.create_feature_group("inf_fg", version=1, primary_key=["id"])
    if existing:
        fg.insert(pd.DataFrame({"id": [0], "x": [1.0]}))
    before = _versions(fg)
    rows = fs.catalog.query("SELECT count(*) AS n FROM feature_groups")[0]["n"]
    with pytest.raises(InvalidArgumentError, match=r"inf_fg.*column 'x'.*infinite"):
        fg.insert(pd.DataFrame({"id": [1, 2], "x": [1.0, bad]}))
    assert _versions(fg) == before
    assert fs.catalog.query("SELECT count(*) AS n FROM feature_groups")[0]["n"] == rows
    fg.insert(pd.DataFrame({"id": [3], "x": [2.0]}))  # the group still takes good data
    assert fg.get_statistics()["row_count"] == (2 if existing else 1)


def test_nan_and_null_floats_are_still_accepted(fs):
    fg = fs.create_feature_group("nan_fg", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2], "x": [float("nan"), None]}))
    assert len(fg.read()) == 2


def test_statistics_survive_stored_infinity():
    import duckdb

    from feature_store.local.storage.statistics import compute_statistics

    con = duckdb.connect()
    table = pa.table({"x": [1.0, math.inf]})
    con.register("t", table)
    stats = compute_statistics(con, "t", table.schema)
    import json

    json.dumps(stats, allow_nan=False)  # storable
    assert stats["features"][0]["max"] is None


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
