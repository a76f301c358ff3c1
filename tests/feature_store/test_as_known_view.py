"""A feature view's ``as_known`` option and a group's ``ingestion_time`` column (fstrain
extensions of the as-known point-in-time join, issue 33 item 1)."""

from __future__ import annotations

import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError, SchemaMismatchError
from tests.feature_store.pit_oracle import backfilled, commit_clock, hours


def test_a_view_created_as_known_joins_every_group_as_known_and_records_it(fs, monkeypatch):
    labels, feats = backfilled(fs, monkeypatch)
    query = labels.select_all().join(feats.select(["x"]), on=["k"])
    plain = fs.create_feature_view("plain", version=1, query=query, labels=[])
    known = fs.create_feature_view("known", version=1, query=query, labels=[], as_known=True)
    assert [j.as_known for j in query.joins] == [False]  # the user's query is not changed
    v_plain, _ = plain.create_training_data()
    v_known, _ = known.create_training_data()
    assert list(plain.get_training_data(v_plain)[0]["x"]) == [2.0, 2.0]
    assert list(known.get_training_data(v_known)[0]["x"]) == [1.0, 2.0]
    again = fs.get_feature_view("known", version=1)
    assert again.as_known is True and [j.as_known for j in again.query.joins] == [True]
    assert fs.get_feature_view("plain", version=1).as_known is False
    assert known.get_training_dataset(v_known).extra["as_known"] is True
    assert plain.get_training_dataset(v_plain).extra["as_known"] is False
    batch = again.get_batch_data(event_time=True).sort_values("ts")
    assert list(batch["x"]) == [1.0, 2.0]


def test_a_view_as_known_needs_a_bool_and_a_root_with_an_event_time(fs):
    timed = fs.create_feature_group("timed", version=1, primary_key=["k"], event_time="ts")
    timed.insert(pd.DataFrame({"k": [1], "ts": [hours(1)], "x": [1.0]}))
    untimed = fs.create_feature_group("untimed", version=1, primary_key=["k"])
    untimed.insert(pd.DataFrame({"k": [1], "y": [1.0]}))
    with pytest.raises(InvalidArgumentError, match=r"feature view 'v': as_known must be True or "
                                                   r"False. Got 'yes'"):
        fs.create_feature_view("v", version=1, query=timed.select_all(), as_known="yes")
    with pytest.raises(InvalidArgumentError, match=r"as_known=True needs an event_time on the "
                                                   r"root group 'untimed'"):
        fs.create_feature_view("v", version=1, query=untimed.select_all().join(
            timed.select(["x"]), on=["k"]), as_known=True)
    assert fs.get_feature_views() == []


def _loaded_late(fs, monkeypatch, ingestion_time):
    """History of 4h and 8h loaded in one commit at 100h, the 8h row corrected at 120h;
    ``ingestion_time`` says when each row arrived upstream."""
    with commit_clock(monkeypatch) as clock:
        labels = fs.create_feature_group("lab", version=1, primary_key=["id"], event_time="ts")
        labels.insert(pd.DataFrame({"id": [1, 2, 3], "k": [1, 1, 1],
                                    "ts": [hours(6), hours(12), hours(40)]}))
        feats = fs.create_feature_group("f", version=1, primary_key=["k"], event_time="ts",
                                        ingestion_time=ingestion_time)
        clock[0] = hours(100)
        first = pd.DataFrame({"k": [1, 1], "ts": [hours(4), hours(8)], "x": [1.0, 2.0]})
        if ingestion_time:
            first[ingestion_time] = [hours(5), hours(11)]
        feats.insert(first)
        clock[0] = hours(120)
        fix = pd.DataFrame({"k": [1], "ts": [hours(8)], "x": [2.5]})
        if ingestion_time:
            fix[ingestion_time] = [hours(30)]
        feats.insert(fix)
    query = labels.select_all().join(feats.select(["x"]), on=["k"], as_known=True)
    return query.read().sort_values("id")


def test_ingestion_time_says_when_history_loaded_later_became_known(fs, monkeypatch):
    by_commit = _loaded_late(fs, monkeypatch, None)
    assert by_commit["x"].isna().all()  # committed at 100h: no label knew any of it
    fs.get_feature_group("f", version=1).delete()
    fs.get_feature_group("lab", version=1).delete()
    by_ingestion = _loaded_late(fs, monkeypatch, "arrived")
    # 6h: the 4h row (arrived 5h); 12h: the 8h row as first loaded; 40h: its correction (30h)
    assert list(by_ingestion["x"]) == [1.0, 2.0, 2.5]
    assert fs.get_feature_group("f", version=1).ingestion_time == "arrived"


def test_ingestion_time_is_checked_before_anything_is_written(fs):
    with pytest.raises(InvalidArgumentError, match=r"ingestion_time='ts' is also the group's "
                                                   r"event_time"):
        fs.create_feature_group("g", version=1, primary_key=["k"], event_time="ts",
                                ingestion_time="ts")
    with pytest.raises(InvalidArgumentError, match=r"ingestion_time='at' needs an event_time"):
        fs.create_feature_group("g", version=1, primary_key=["k"], ingestion_time="at")
    fg = fs.create_feature_group("g", version=1, primary_key=["k"], event_time="ts",
                                 ingestion_time="at")
    rows = pd.DataFrame({"k": [1, 2], "ts": [hours(1), hours(2)]})
    with pytest.raises(SchemaMismatchError, match=r"ingestion_time column 'at' is missing"):
        fg.insert(rows)
    with pytest.raises(SchemaMismatchError, match=r"ingestion_time column 'at' must be a "
                                                  r"timestamp. Got string"):
        fg.insert(rows.assign(at=["x", "y"]))
    with pytest.raises(SchemaMismatchError, match=r"ingestion_time column 'at' has 1 null"):
        fg.insert(rows.assign(at=[hours(1), pd.NaT]))
    assert fs.get_feature_groups() == []  # nothing was written
