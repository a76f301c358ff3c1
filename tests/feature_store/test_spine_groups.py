"""Spine groups on the embedded store: a spine as a query's root, ``spine=`` on batch and
training reads, versions that re-read their spine bit for bit, and bad spines refused by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from feature_store.core.content_hash import table_sha256
from fstrain.kernel.errors import InvalidArgumentError, SchemaMismatchError

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _t(hours):
    return [T0 + pd.Timedelta(hours=h) for h in hours]


def _spine_df():
    return pd.DataFrame({"card": ["a", "a", "b", "c"], "ts": _t([10, 20, 12, 5]),
                         "y": [0, 1, 1, 0]})


@pytest.fixture
def card(fs):
    group = fs.get_or_create_feature_group("card_feats", version=1, primary_key=["card"],
                                           event_time="ts")
    group.insert(pd.DataFrame({"card": ["a", "a", "a", "b"], "ts": _t([0, 10, 15, 11]),
                               "spend": [1.0, 2.0, 3.0, 4.0]}))
    return group


@pytest.fixture
def view(fs, card):
    """A view rooted at a label feature group (whose rows a spine replaces)."""
    labels = fs.get_or_create_feature_group("labels", version=1, primary_key=["card"],
                                            event_time="ts")
    labels.insert(pd.DataFrame({"card": ["b"], "ts": _t([30]), "y": [1]}))
    return fs.create_feature_view("fraud", version=1, labels=["y"],
                                  query=labels.select_all().join(card.select(["spend"])))


def _spine(fs, df=None):
    return fs.get_or_create_spine_group("label_spine", version=1, primary_key=["card"],
                                        event_time="ts", dataframe=_spine_df() if df is None else df)


def test_a_spine_is_the_root_of_a_point_in_time_join(fs, card):
    out = _spine(fs).select_all().join(card.select(["spend"])).read()
    assert list(out.columns) == ["card", "ts", "y", "spend"]
    by_row = {(r.card, r.ts.hour): r.spend for r in out.itertuples()}
    assert by_row[("a", 10)] == 2.0  # a@10 matches inclusively
    assert by_row[("a", 20)] == 3.0  # latest earlier row
    assert by_row[("b", 12)] == 4.0
    assert np.isnan(by_row[("c", 5)])  # no card row: nulls, the spine row stays


def test_get_or_create_returns_the_recorded_group_with_new_rows(fs):
    first = _spine(fs)
    again = fs.get_or_create_spine_group("label_spine", version=1,
                                         dataframe=_spine_df().iloc[:2])
    assert again.id == first.id and again.primary_key == ["card"] and again.event_time == "ts"
    assert len(again.dataframe) == 2
    with pytest.raises(SchemaMismatchError, match=r"spine group 'label_spine' v1.*\['y'\]"):
        fs.get_or_create_spine_group("label_spine", version=1,
                                     dataframe=_spine_df().drop(columns=["y"]))


def test_a_spine_cannot_be_joined_on_the_right(fs, card):
    with pytest.raises(InvalidArgumentError, match="spine group 'label_spine' v1.*left side"):
        card.select_all().join(_spine(fs).select_all())


def test_batch_data_for_a_spine_dataframe_or_group(view):
    spine = view.feature_store.get_or_create_spine_group(
        "label_spine", version=1, primary_key=["card"], event_time="ts", dataframe=_spine_df())
    from_df = view.get_batch_data(spine=_spine_df(), primary_key=True, event_time=True)
    from_group = view.get_batch_data(spine=spine, primary_key=True, event_time=True)
    pd.testing.assert_frame_equal(from_df, from_group)
    assert list(from_df["card"]) == ["a", "a", "b", "c"]  # the spine's rows, not the root's
    assert from_df["spend"].tolist()[:3] == [2.0, 3.0, 4.0]
    # the window bounds the spine's event time
    assert list(view.get_batch_data(start_time=_t([11])[0], spine=_spine_df())["spend"]) == [3.0, 4.0]


def test_a_spine_version_rereads_bit_for_bit_after_the_sources_change(view, card):
    X, y = view.training_data(spine=_spine_df(), seed=1)
    td = view.get_training_dataset(1)
    record = td.extra["spine"]
    assert record["rows"] == 4 and record["name"] == "labels_spine"
    assert td.feature_group_commits["labels_spine:1"] == 0
    card.insert(pd.DataFrame({"card": ["a", "b"], "ts": _t([9, 11]), "spend": [100.0, 200.0]}))
    X2, y2 = view.get_training_data(1)
    pd.testing.assert_frame_equal(X, X2)
    pd.testing.assert_frame_equal(y, y2)
    fresh, _ = view.training_data(spine=_spine_df(), seed=1)
    assert fresh["spend"].tolist() != X["spend"].tolist()  # the new rows reach a new version


def test_a_materialized_spine_version_is_recreated_from_its_stored_spine(view, card):
    version, _ = view.create_train_test_split(test_size=0.5, seed=3, spine=_spine_df())
    before = view.get_train_test_split(version)
    view.purge_training_data(version)
    card.insert(pd.DataFrame({"card": ["a"], "ts": _t([9]), "spend": [100.0]}))
    view.recreate_training_dataset(version)  # the pinned commits and stored spine: same hash
    for a, b in zip(before, view.get_train_test_split(version), strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_the_spine_is_stored_under_its_content_hash(fs, view):
    import pyarrow as pa

    view.training_data(spine=_spine_df())
    record = view.get_training_dataset(1).extra["spine"]
    stored = fs.root / "spines" / record["sha256"]
    from deltalake import DeltaTable

    table = DeltaTable(str(stored)).to_pyarrow_table()
    assert table_sha256(table) == record["sha256"]
    assert table.column("ts").type == pa.timestamp("us", tz="UTC")


def test_vacuum_removes_batch_spines_unused_for_a_day_and_keeps_recorded_ones(fs, view, card):
    import os
    import time

    view.training_data(spine=_spine_df(), seed=1)  # recorded by version 1
    recorded = view.get_training_dataset(1).extra["spine"]["sha256"]
    scoring = _spine_df().assign(ts=_t([40, 41, 42, 43]))
    group = _spine(fs, scoring)
    view.get_batch_data(spine=group)  # a batch read's spine: no version records it
    spines = fs.root / "spines"
    batch = {p.name for p in spines.iterdir()} - {recorded}
    assert len(batch) == 1
    assert card.vacuum() == []  # used just now: kept for the reads still running on it
    day_ago = time.time() - 25 * 3600
    for path in spines.iterdir():
        os.utime(path, (day_ago, day_ago))
    assert card.vacuum(dry_run=True) == [f"spines/{next(iter(batch))}"]
    assert len(list(spines.iterdir())) == 2  # dry run: nothing removed
    assert card.vacuum() == [f"spines/{next(iter(batch))}"]
    assert [p.name for p in spines.iterdir()] == [recorded]
    X, _ = view.get_training_data(1)  # the recorded spine still re-reads
    assert len(X) == 4
    assert len(view.get_batch_data(spine=group)) == 4  # a later read stores it again
    assert len(view.get_batch_data(spine=scoring)) == 4


def test_a_spine_holding_infinities_is_stored_and_reread(fs, card):
    """A spine is checked as a group's first insert is: ±inf is kept (Hopsworks stores it)."""
    spine = _spine(fs, _spine_df().assign(weight=[1.0, np.inf, -np.inf, 2.0]))
    out = spine.select_all().join(card.select(["spend"])).read()
    assert sorted(out["weight"]) == [-np.inf, 1.0, 2.0, np.inf]
    assert spine.dataframe["weight"].tolist() == [1.0, np.inf, -np.inf, 2.0]


def test_a_view_over_a_spine_group_needs_a_spine_on_every_read(fs, card):
    spine = _spine(fs)
    fs.create_feature_view("over_spine", version=1, labels=["y"],
                           query=spine.select_all().join(card.select(["spend"])))
    fv = fs.get_feature_view("over_spine", version=1)  # rebuilt from the catalog, no rows
    assert [f.name for f in fv.features] == ["card", "ts", "y", "spend"]
    with pytest.raises(InvalidArgumentError, match="over spine group 'label_spine' v1.*spine="):
        fv.get_batch_data()
    with pytest.raises(InvalidArgumentError, match="spine="):
        fv.training_data()
    X, y = fv.training_data(spine=_spine_df())
    assert X["spend"].tolist()[:3] == [2.0, 3.0, 4.0] and y["y"].tolist() == [0, 1, 1, 0]


@pytest.mark.parametrize("df, match", [
    (_spine_df().drop(columns=["card"]), r"label_spine' v1: primary key column 'card' is missing"),
    (_spine_df().drop(columns=["ts"]), r"label_spine' v1: event_time column 'ts' is missing"),
    (_spine_df().assign(ts=["x", "y", "z", "w"]),
     r"label_spine' v1: event_time column 'ts' must be a timestamp.*'x'"),
    (_spine_df().assign(card=["a", None, "b", "c"]), r"primary key column 'card' has 1 null"),
])
def test_a_bad_new_spine_is_refused_and_nothing_is_written(fs, df, match):
    with pytest.raises(SchemaMismatchError, match=match):
        _spine(fs, df)
    assert fs.catalog.spine_group_row("label_spine", 1) is None
    assert not (fs.root / "spines").exists()


def test_a_bad_spine_for_a_view_is_refused_before_anything_runs(fs, view):
    with pytest.raises(SchemaMismatchError, match=r"spine 'labels_spine' v1: column 'y' is missing"):
        view.training_data(spine=_spine_df().drop(columns=["y"]))
    with pytest.raises(SchemaMismatchError, match=r"join key 'card' is int64.*'card' is string"):
        view.get_batch_data(spine=_spine_df().assign(card=[1, 1, 2, 3]))
    with pytest.raises(InvalidArgumentError, match="spine= takes a spine group.*FeatureGroup"):
        view.get_batch_data(spine=fs.get_feature_group("card_feats", version=1))
    with pytest.raises(InvalidArgumentError, match="data must be a pandas DataFrame"):
        view.get_batch_data(spine=[["a", 1]])
    assert view.get_training_datasets() == []
    assert not (fs.root / "spines").exists()


def test_scoring_rows_need_no_label_column(fs, view, card):
    scoring = _spine_df().drop(columns=["y"])
    out = view.get_batch_data(spine=scoring)
    assert out["spend"].tolist()[:3] == [2.0, 3.0, 4.0] and "y" not in out.columns
    fs.create_feature_view("over_spine", version=1, labels=["y"],
                           query=_spine(fs).select_all().join(card.select(["spend"])))
    over = fs.get_feature_view("over_spine", version=1)
    assert over.get_batch_data(spine=scoring)["spend"].tolist()[:3] == [2.0, 3.0, 4.0]
    with pytest.raises(SchemaMismatchError, match="column 'y' is missing"):
        over.training_data(spine=scoring)  # training rows do need their labels


def test_an_extra_filter_on_the_root_reads_the_spine_in_its_place(fs, view, card):
    labels = fs.get_feature_group("labels", version=1)
    X, y = view.training_data(spine=_spine_df(), extra_filter=labels.y == 1)
    assert y["y"].tolist() == [1, 1] and X["spend"].tolist() == [3.0, 4.0]
    card.insert(pd.DataFrame({"card": ["b"], "ts": _t([11.5]), "spend": [7.0]}))
    X1, y1 = view.get_training_data(1)
    pd.testing.assert_frame_equal(X, X1)


def test_a_spine_version_of_an_as_known_view_records_both(fs, card):
    labels = fs.get_or_create_feature_group("labels", version=1, primary_key=["card"],
                                            event_time="ts")
    labels.insert(pd.DataFrame({"card": ["b"], "ts": _t([30]), "y": [1]}))
    fv = fs.create_feature_view("known", version=1, labels=["y"], as_known=True,
                                query=labels.select_all().join(card.select(["spend"])))
    fv.training_data(spine=_spine_df())
    extra = fv.get_training_dataset(1).extra
    assert extra["as_known"] is True and extra["spine"]["rows"] == 4
