"""A joined sub-query's own as_of is honoured; lookback needs a unit; bad commits are typed."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError, NotFoundError


@pytest.fixture
def two_groups(fs):
    users = fs.create_feature_group("users", version=1, primary_key=["id"])
    users.insert(pd.DataFrame({"id": [1, 2], "name": ["a", "b"]}))
    scores = fs.create_feature_group("scores", version=1, primary_key=["id"])
    scores.insert(pd.DataFrame({"id": [1, 2], "score": [10.0, 20.0]}))  # commit 1
    scores.insert(pd.DataFrame({"id": [1, 2], "score": [11.0, 21.0]}))  # commit 2
    return users, scores


def test_joined_sub_query_reads_its_own_commit(two_groups):
    users, scores = two_groups
    alone = scores.select_all().as_of(commit_id=1).read().sort_values("id")
    assert list(alone["score"]) == [10.0, 20.0]
    joined = users.select_all().join(scores.select_all().as_of(commit_id=1)).read().sort_values("id")
    assert list(joined["score"]) == [10.0, 20.0]


def test_joined_sub_query_reads_its_own_wallclock(two_groups):
    users, scores = two_groups
    first = scores.commit_details()
    t1 = pd.Timestamp(min(first.values(), key=lambda c: c["committedOn"])["committedOn"])
    joined = users.select_all().join(scores.select_all().as_of(t1)).read().sort_values("id")
    assert list(joined["score"]) == [10.0, 20.0]


def test_outer_as_of_applies_to_joined_groups(two_groups):
    users, scores = two_groups
    details = scores.commit_details()
    t1 = pd.Timestamp(details[1]["committedOn"])
    out = users.select_all().join(scores.select_all()).as_of(t1).read().sort_values("id")
    assert list(out["score"]) == [10.0, 20.0]


def test_training_data_reads_the_sub_query_commit(fs, two_groups):
    users, scores = two_groups
    query = users.select_all().join(scores.select_all().as_of(commit_id=1))
    assert query.resolve_commits()["scores:1"] == 1
    fv = fs.create_feature_view("fv_pinned", version=1, query=query, labels=[])
    version, _ = fv.create_training_data()
    x, _ = fv.get_training_data(version)
    assert sorted(x["score"]) == [10.0, 20.0]


@pytest.mark.parametrize("lookback", [7, 7.0, 0, -1])
def test_numeric_lookback_is_refused_naming_the_units(two_groups, lookback):
    users, scores = two_groups
    with pytest.raises(InvalidArgumentError, match=r"lookback.*'7D'.*timedelta"):
        users.select_all().join(scores.select_all(), lookback=lookback)


@pytest.mark.parametrize("lookback", ["7D", dt.timedelta(days=7), pd.Timedelta("7D")])
def test_durations_are_accepted_as_lookback(fs, lookback):
    a = fs.create_feature_group("a_et", version=1, primary_key=["id"], event_time="ts")
    a.insert(pd.DataFrame({"id": [1], "ts": [pd.Timestamp("2024-01-10", tz="UTC")]}))
    b = fs.create_feature_group("b_et", version=1, primary_key=["id"], event_time="ts")
    b.insert(pd.DataFrame({"id": [1], "ts": [pd.Timestamp("2024-01-05", tz="UTC")], "v": [1.0]}))
    out = a.select_all().join(b.select(["id", "ts", "v"]), lookback=lookback).read()
    assert list(out["v"]) == [1.0]


@pytest.mark.parametrize("commit_id", [999, 3])
def test_unknown_commit_id_names_the_group_and_its_commits(two_groups, commit_id):
    _, scores = two_groups
    with pytest.raises(NotFoundError, match=rf"feature group 'scores' v1 has no commit {commit_id}"):
        scores.select_all().as_of(commit_id=commit_id).read()


@pytest.mark.parametrize("commit_id", [-1, "1", 1.5, True])
def test_malformed_commit_id_is_refused(two_groups, commit_id):
    _, scores = two_groups
    with pytest.raises(InvalidArgumentError, match="commit_id"):
        scores.select_all().as_of(commit_id=commit_id)


def test_far_future_wallclock_reads_the_latest_commit(two_groups):
    _, scores = two_groups
    out = scores.select_all().as_of("2999-01-01").read().sort_values("id")
    assert list(out["score"]) == [11.0, 21.0]


def test_wallclock_before_the_first_commit_is_typed(two_groups):
    _, scores = two_groups
    with pytest.raises(FeatureStoreError, match="scores"):
        scores.select_all().as_of("1990-01-01").read()
