"""Feature groups: creation, upsert semantics, reads, time travel, tags, statistics."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feature_store.feature import Feature
from fstrain.kernel.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError


def _frame(ids, days, values):
    return pd.DataFrame(
        {
            "id": ids,
            "ts": pd.to_datetime("2024-01-01", utc=True) + pd.to_timedelta(days, unit="D"),
            "value": values,
        }
    )


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["id", "ts"]).reset_index(drop=True)


def test_insert_creates_group_and_reads_back(fs):
    fg = fs.get_or_create_feature_group("trips", version=1, primary_key=["id"], event_time="ts")
    assert fg.id is None  # lazy until the first insert
    job, report = fg.insert(_frame([1, 2], [0, 1], [1.0, 2.0]))
    assert job is None and report is None
    assert fg.id is not None
    assert [f.name for f in fg.features] == ["id", "ts", "value"]
    assert fg.get_feature("id").primary and fg.get_feature("ts").event_time
    out = _sorted(fg.read())
    assert out["value"].tolist() == [1.0, 2.0]
    assert str(out["ts"].dtype) == "datetime64[us, UTC]"
    again = fs.get_feature_group("trips", 1)
    assert again.primary_key == ["id"] and again.event_time == "ts"


def test_new_event_time_adds_history_same_key_replaces(fs):
    fg = fs.get_or_create_feature_group("h", version=1, primary_key=["id"], event_time="ts")
    fg.insert(_frame([1, 2], [0, 0], [1.0, 2.0]))
    fg.insert(_frame([1, 1], [0, 3], [10.0, 30.0]))  # replace (1, day0), add (1, day3)
    out = _sorted(fg.read())
    assert list(zip(out["id"], out["value"], strict=True)) == [(1, 10.0), (1, 30.0), (2, 2.0)]
    details = fg.commit_details()
    latest = details[max(details)]
    assert (latest["rowsInserted"], latest["rowsUpdated"]) == (1, 1)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(
        st.lists(
            st.tuples(st.integers(0, 5), st.integers(0, 3), st.floats(-1e6, 1e6, allow_nan=False)),
            min_size=1,
            max_size=12,
            unique_by=lambda r: (r[0], r[1]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_upsert_matches_pandas_oracle(tmp_path_factory, batches):
    import feature_store

    fs = feature_store.login(root=tmp_path_factory.mktemp("oracle")).get_feature_store()
    fg = fs.get_or_create_feature_group("oracle", version=1, primary_key=["id"], event_time="ts")
    oracle: dict[tuple[int, int], float] = {}
    changing = 0  # batches that insert or change a row: each is one commit; a no-op writes none
    for batch in batches:
        ids, days, values = zip(*batch, strict=True)
        fg.insert(_frame(list(ids), list(days), list(values)))
        changing += any(oracle.get((i, d)) != v for i, d, v in batch)
        for i, d, v in batch:
            oracle[(i, d)] = v
    out = fg.read()
    got = {
        (int(r.id), int((r.ts - pd.Timestamp("2024-01-01", tz="UTC")).days)): r.value
        for r in out.itertuples()
    }
    assert got == oracle
    assert len(fg.commit_details()) == changing


def test_group_without_event_time_upserts_on_primary_key(fs):
    fg = fs.get_or_create_feature_group("plain", version=1, primary_key=["k"])
    fg.insert(pd.DataFrame({"k": ["a", "b"], "v": [1, 2]}))
    fg.insert(pd.DataFrame({"k": ["a"], "v": [5]}))
    out = fg.read().sort_values("k")
    assert out["v"].tolist() == [5, 2]


def test_arrow_input_and_column_normalisation(fs):
    fg = fs.get_or_create_feature_group("arrowfg", version=1, primary_key=["id"])
    fg.insert(pa.table({"ID": pa.array([1, 2], pa.int32()), "Some Value": [0.5, 1.5]}))
    assert [f.name for f in fg.features] == ["id", "some_value"]
    assert fg.get_feature("id").type == "int64"


def test_overwrite_replaces_everything(fs):
    fg = fs.get_or_create_feature_group("ow", version=1, primary_key=["id"], event_time="ts")
    fg.insert(_frame([1, 2, 3], [0, 0, 0], [1.0, 2.0, 3.0]))
    fg.insert(_frame([9], [0], [9.0]), overwrite=True)
    assert fg.read()["id"].tolist() == [9]


def test_read_window_is_half_open(fs):
    fg = fs.get_or_create_feature_group("win", version=1, primary_key=["id"], event_time="ts")
    fg.insert(_frame([1, 2, 3], [0, 1, 2], [1.0, 2.0, 3.0]))
    out = fg.read(start_time="2024-01-02", end_time="2024-01-03")
    assert out["id"].tolist() == [2]


def test_read_uses_hops_window_from_environment(fs, monkeypatch):
    fg = fs.get_or_create_feature_group("hops", version=1, primary_key=["id"], event_time="ts")
    fg.insert(_frame([1, 2, 3], [0, 1, 2], [1.0, 2.0, 3.0]))
    monkeypatch.setenv("HOPS_START_TIME", "2024-01-02T00:00:00Z")
    monkeypatch.setenv("HOPS_END_TIME", "2024-01-04T00:00:00Z")
    assert sorted(fg.read()["id"].tolist()) == [2, 3]


def test_time_travel_by_commit_and_wallclock(fs):
    fg = fs.get_or_create_feature_group("tt", version=1, primary_key=["id"], event_time="ts")
    fg.insert(_frame([1], [0], [1.0]))
    first = fg.latest_commit_id()
    time.sleep(0.05)
    between = pd.Timestamp.now(tz="UTC")
    time.sleep(0.05)
    fg.insert(_frame([1, 2], [0, 0], [100.0, 2.0]))
    assert fg.as_of(commit_id=first).read()["value"].tolist() == [1.0]
    assert fg.as_of(between).read()["value"].tolist() == [1.0]
    assert fg.read(wallclock_time=between)["value"].tolist() == [1.0]
    assert sorted(fg.read()["value"].tolist()) == [2.0, 100.0]
    assert len(fg.commit_details(limit=1)) == 1
    assert list(fg.commit_details(wallclock_time=between)) == [first]
    for bad in ({"wallclock_time": ""}, {"computation_time": " "}):  # given, but no time
        with pytest.raises(InvalidArgumentError, match=r"_time must be a time\. Got '\s*'"):
            fg.commit_details(**bad) if "wallclock_time" in bad else fg.get_statistics(**bad)


def test_remove_rows_deletes_matching_keys(fs):
    fg = fs.get_or_create_feature_group("rm", version=1, primary_key=["id"], event_time="ts")
    fg.insert(_frame([1, 1, 2], [0, 1, 0], [1.0, 2.0, 3.0]))
    fg.remove_rows(_frame([1], [1], [0.0]))
    out = _sorted(fg.read())
    assert list(zip(out["id"], out["value"], strict=True)) == [(1, 1.0), (2, 3.0)]
    assert fg.commit_details()[fg.latest_commit_id()]["rowsDeleted"] == 1


def test_append_features_adds_nullable_column(fs):
    fg = fs.get_or_create_feature_group("evo", version=1, primary_key=["id"], event_time="ts")
    fg.insert(_frame([1], [0], [1.0]))
    fg.append_features(Feature("extra", type="double", description="added later"))
    assert fg.read()["extra"].isna().all()
    fg.insert(_frame([2], [0], [2.0]).assign(extra=[7.5]))
    out = _sorted(fg.read())
    assert out["extra"].isna().tolist() == [True, False]
    assert fs.get_feature_group("evo", 1).get_feature("extra").description == "added later"


def test_versions_listing_and_errors(fs):
    fs.create_feature_group("v", primary_key=["id"]).insert(pd.DataFrame({"id": [1]}))
    second = fs.create_feature_group("v", primary_key=["id"])
    assert second.version == 2
    second.insert(pd.DataFrame({"id": [1]}))
    assert [g.version for g in fs.get_feature_groups("v")] == [1, 2]
    with pytest.raises(AlreadyExistsError, match="'v' v1 already exists"):
        fs.create_feature_group("v", version=1, primary_key=["id"])
    with pytest.raises(NotFoundError, match=r"no version 7 \(versions: 1, 2\)"):
        fs.get_feature_group("v", 7)
    with pytest.raises(NotFoundError, match="Did you mean 'v'"):
        fs.get_feature_group("vv", 1)
    with pytest.warns(UserWarning, match="defaulting to version 1"):
        assert fs.get_feature_group("v").version == 1


def test_get_or_create_returns_existing_unchanged(fs):
    fg = fs.get_or_create_feature_group("same", version=1, primary_key=["id"], description="first")
    fg.insert(pd.DataFrame({"id": [1]}))
    again = fs.get_or_create_feature_group("same", version=1, primary_key=["other"], description="x")
    assert again.id == fg.id and again.primary_key == ["id"] and again.description == "first"


def test_a_handle_binds_to_a_group_created_meanwhile_only_if_it_declares_the_same(fs):
    def handle(**declared):
        return fs.create_feature_group("raced", version=1, primary_key=["id"], event_time="ts",
                                       statistics_config=False, **declared)

    first, same, other = handle(ingestion_time="at"), handle(ingestion_time="at"), handle()
    rows = pd.DataFrame({"id": [1], "ts": [pd.Timestamp("2024-01-01", tz="UTC")],
                         "at": [pd.Timestamp("2024-01-02", tz="UTC")], "x": [1.0]})
    first.insert(rows)
    with pytest.raises(InvalidArgumentError, match=r"ingestion_time=None here, 'at' there"):
        other.insert(rows.assign(id=2))  # its rows would be read as known at their commit
    same.insert(rows.assign(id=3))
    assert same.id == first.id and sorted(first.read()["id"]) == [1, 3]  # nothing of other's


def test_delete_removes_table_and_metadata(fs):
    fg = fs.get_or_create_feature_group("gone", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1]}))
    location = fg.location
    fg.delete()
    with pytest.raises(NotFoundError):
        fs.get_feature_group("gone", 1)
    import os

    assert not os.path.exists(location)


def test_group_and_feature_tags(fs):
    fg = fs.get_or_create_feature_group(
        "people", version=1, primary_key=["id"], tags={"owner": "risk-team"}
    )
    fg.insert(pd.DataFrame({"id": [1], "sex": ["f"], "income": [1.0]}))
    assert fg.get_tags() == {"owner": "risk-team"}
    fg.add_tag("pii", True)
    fg.add_feature_tag("sex", "pii", {"category": "protected"})
    assert fg.get_tag("pii") is True
    assert fg.get_feature_tags("sex") == {"pii": {"category": "protected"}}
    assert fg.get_all_feature_tags() == {"sex": {"pii": {"category": "protected"}}}
    fg.delete_tag("pii")
    with pytest.raises(NotFoundError, match="no tag 'pii'"):
        fg.get_tag("pii")
    with pytest.raises(NotFoundError, match="Did you mean 'sex'"):
        fg.add_feature_tag("sexx", "pii", True)


def test_statistics_per_commit(fs):
    fg = fs.get_or_create_feature_group("stats", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2, 3], "x": [1.0, np.nan, 3.0], "c": ["a", "a", "b"]}))
    stats = fg.get_statistics()
    by_name = {f["feature"]: f for f in stats["features"]}
    assert stats["row_count"] == 3
    assert by_name["x"]["null_count"] == 1 and by_name["x"]["mean"] == 2.0
    assert by_name["x"]["min"] == 1.0 and by_name["x"]["max"] == 3.0
    assert by_name["c"]["distinct_count"] == 2
    assert by_name["c"]["top_values"][0] == {"value": "a", "count": 2}
    fg.insert(pd.DataFrame({"id": [4], "x": [10.0], "c": ["z"]}))
    assert fg.get_statistics()["row_count"] == 4
    assert [s["row_count"] for s in fg.get_all_statistics()] == [3, 4]


def test_statistics_can_be_disabled(fs):
    fg = fs.get_or_create_feature_group("nostats", version=1, primary_key=["id"], statistics_config=False)
    fg.insert(pd.DataFrame({"id": [1]}))
    assert fg.get_all_statistics() == []


def test_feature_attribute_access_builds_filters(fs):
    fg = fs.get_or_create_feature_group("flt", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2, 3], "amount": [50.0, 150.0, 300.0], "c": ["x", "y", "z"]}))
    assert sorted(fg.filter(fg.amount > 100).read()["id"]) == [2, 3]
    assert sorted(fg.filter((fg.amount > 100) & fg.c.isin(["z"])).read()["id"]) == [3]
    assert sorted(fg.filter((fg.amount < 100) | (fg["c"] == "y")).read()["id"]) == [1, 2]


def test_recreated_group_does_not_see_the_dropped_tables_data(fs):
    first = fs.get_or_create_feature_group("reborn", version=1, primary_key=["id"])
    first.insert(pd.DataFrame({"id": [1, 2], "x": [1.0, 2.0]}))
    first.read()  # caches the snapshot at commit 1
    first.delete()
    second = fs.get_or_create_feature_group("reborn", version=1, primary_key=["id"])
    second.insert(pd.DataFrame({"id": [9], "x": [9.0]}))
    assert second.read()["id"].tolist() == [9]
    assert second.as_of(commit_id=1).read()["id"].tolist() == [9]


def test_latest_commit_matches_delta_rs_after_checkpoint_and_log_cleanup(fs):
    from deltalake import DeltaTable

    fg = fs.create_feature_group("commits", version=1, primary_key=["id"], event_time="ts",
                                 statistics_config=False)
    for day in range(4):
        fg.insert(_frame([1, 2], [day, day], [float(day), 1.0]))
        assert fg._table.version() == DeltaTable(str(fg._table.path)).version()
    table = DeltaTable(str(fg._table.path))
    table.create_checkpoint()
    table.cleanup_metadata()
    fg.insert(_frame([3], [9], [3.0]))
    assert fg._table.version() == DeltaTable(str(fg._table.path)).version() == 5
    assert max(fg.commit_details()) == 5


def test_checkpoints_never_take_the_history_a_version_pins(fs):
    """delta-rs removes commit files older than the log retention (30 days) at each checkpoint
    (every 100 commits) unless told not to: with the retention elapsed (set to 0 here, as a
    month-old store has it), every older version was gone, and with it time travel and the
    commits training-dataset versions pin."""
    from deltalake import DeltaTable

    fg = fs.create_feature_group("kept", version=1, primary_key=["id"], event_time="ts",
                                 statistics_config=False)
    fg.insert(_frame([0], [0], [0.0]))
    DeltaTable(str(fg._table.path)).alter.set_table_properties({
        "delta.logRetentionDuration": "interval 0 seconds", "delta.checkpointInterval": "2",
        "delta.enableExpiredLogCleanup": "true"})  # a table created before fstrain set it
    view = fs.create_feature_view("kept_view", query=fg.select_all(), labels=[])
    pinned, _ = view.create_training_data(seed=1)
    before = view.get_training_data(pinned)[0]
    for i in range(1, 6):
        fg.insert(_frame([i], [i], [float(i)]))
    log = fg._table.path / "_delta_log"
    assert (log / f"{0:020d}.json").exists() and list(log.glob("*.checkpoint.parquet"))
    assert len(fg.read(wallclock_time=None)) == 6
    assert fg._table.files_by_version(1)[1] == DeltaTable(str(fg._table.path),
                                                          version=1).file_uris()
    view.purge_training_data(pinned)
    view.recreate_training_dataset(pinned)  # from its pinned commit, hash-checked
    pd.testing.assert_frame_equal(view.get_training_data(pinned)[0], before)
    fresh = fs.create_feature_group("fresh", version=1, primary_key=["id"])
    fresh.insert(pd.DataFrame({"id": [1]}))
    config = DeltaTable(str(fresh._table.path)).metadata().configuration
    assert config.get("delta.enableExpiredLogCleanup") == "false"


def test_files_by_version_read_from_the_log_equal_each_version_loaded(fs):
    from deltalake import DeltaTable

    fg = fs.create_feature_group("walked", version=1, primary_key=["id"], event_time="ts",
                                 statistics_config=False)
    fg.insert(_frame([1, 2, 3], [0, 0, 0], [1.0, 2.0, 3.0]))
    fg.insert(_frame([2, 4], [0, 1], [9.0, 4.0]))  # a merge: rewrites a file, removes one
    fg.remove_rows(_frame([1], [0], [1.0]))
    fg.insert(_frame([5], [2], [5.0]), overwrite=True)
    table = fg._table
    want = [sorted(DeltaTable(str(table.path), version=v).file_uris())
            for v in range(table.version() + 1)]
    assert [sorted(files) for files in table.files_by_version(table.version())] == want
    assert any(set(a) - set(b) for a, b in zip(want, want[1:]))  # some version removed files
    (table.path / "_delta_log" / f"{1:020d}.json").rename(table.path / "moved.json")
    from fstrain.kernel.errors import HistoryRemovedError

    with pytest.raises(HistoryRemovedError, match="'walked' v1: the commit file of version 1 is gone"):
        table.files_by_version(table.version())  # a commit file is gone: its versions with it


def test_select_takes_one_name_or_feature_alone_as_the_sdk(fs):
    # the online fraud tutorial writes trans_fg.select('cc_num'); a string was read as letters
    fg = fs.create_feature_group("one", version=1, primary_key=["k"])
    fg.insert(pd.DataFrame({"k": [2, 1], "x": [0.5, 1.5]}))
    assert fg.select("k").read()["k"].tolist() == [1, 2]
    assert list(fg.select(fg.get_feature("x")).read().columns) == ["x"]
