"""Incremental reads, ``as_of(wallclock_time, exclude_until=...)`` (issue 33 item 4).

Each commit's time comes from ``commit_details()``; a window between two commits must return
what a brute-force difference of two time-travel reads says: the rows of the later snapshot
that are not rows of the earlier one (inserts and updated keys with their new values; deleted
keys not at all).
"""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError

DAY = pd.Timestamp("2024-01-01", tz="UTC")


def _frame(ids, values, day=0):
    return pd.DataFrame({"id": ids, "ts": DAY + pd.Timedelta(days=day), "value": values})


def _rows(df: pd.DataFrame) -> list[tuple]:
    return sorted(df.itertuples(index=False, name=None))


def _difference(now: pd.DataFrame, then: pd.DataFrame) -> list[tuple]:
    """Brute force: the rows of ``now`` that are not rows of ``then`` (whole-row compare)."""
    before = set(_rows(then))
    return sorted(r for r in _rows(now) if r not in before)


def _commit_times(fg) -> list[str]:
    """Commit times, oldest first."""
    details = fg.commit_details()
    return [details[c]["committedOn"] for c in sorted(details)]


def _history(fs):
    """A group with five commits: insert, upsert (update + insert), insert, delete, upsert
    (an update that changes a value back and one that changes nothing)."""
    fg = fs.get_or_create_feature_group("clicks", version=1, primary_key=["id"], event_time="ts")
    fg.insert(_frame([1, 2, 3], [1.0, 2.0, 3.0]))
    fg.insert(_frame([2, 4], [20.0, 4.0]))
    fg.insert(_frame([5, 6], [5.0, 6.0], day=1))
    fg.remove_rows(_frame([3], [3.0]))
    # 2 back to 2.0, 5 unchanged, 7 new
    fg.insert(pd.concat([_frame([2, 7], [2.0, 7.0]), _frame([5], [5.0], day=1)]))
    times = _commit_times(fg)
    assert len(times) == 5
    return fg, times


@pytest.fixture
def history(fs):
    """The clicks group with its five commits' times."""
    return _history(fs)


def test_every_window_is_the_difference_of_two_time_travel_reads(history):
    fg, times = history
    snapshots = {t: fg.as_of(t).read() for t in times}
    for start, end in itertools.combinations_with_replacement(times, 2):
        got = fg.as_of(end, exclude_until=start).read()
        assert _rows(got) == _difference(snapshots[end], snapshots[start]), (start, end)
    # a single commit: its time, excluding everything up to the commit before it
    upsert = fg.as_of(times[1], exclude_until=times[0]).read()
    assert _rows(upsert) == [(2, DAY, 20.0), (4, DAY, 4.0)]
    # deleted key 3 is not returned; key 2 changed (20.0 -> 2.0), 5 unchanged, 7 new
    assert _rows(fg.as_of(times[4], exclude_until=times[2]).read()) == [
        (2, DAY, 2.0), (7, DAY, 7.0)]


def test_no_wallclock_time_reads_changes_up_to_the_latest_commit(history):
    fg, times = history
    got = fg.as_of(None, exclude_until=times[1]).read()
    assert _rows(got) == _difference(fg.read(), fg.as_of(times[1]).read())
    assert _rows(got) == [(2, DAY, 2.0), (5, DAY + pd.Timedelta(days=1), 5.0),
                          (6, DAY + pd.Timedelta(days=1), 6.0), (7, DAY, 7.0)]
    assert fg.select_all().as_of(None, exclude_until=times[-1]).read().empty


def test_a_joined_query_reads_every_group_over_the_window(fs):
    labels = fs.get_or_create_feature_group("labels", version=1, primary_key=["id"])
    labels.insert(pd.DataFrame({"id": [1, 2, 4], "label": [0, 1, 0]}))
    fg, times = _history(fs)
    labels.insert(pd.DataFrame({"id": [4, 7], "label": [1, 1]}))
    start, end = times[1], _commit_times(labels)[-1]
    query = fg.select_all().join(labels.select(["id", "label"])).as_of(end, exclude_until=start)
    got = query.read()
    clicks = pd.DataFrame(_difference(fg.as_of(end).read(), fg.as_of(start).read()),
                          columns=["id", "ts", "value"])
    label_rows = pd.DataFrame(_difference(labels.as_of(end).read(), labels.as_of(start).read()),
                              columns=["id", "label"])
    expected = clicks.merge(label_rows, on="id", how="left")
    def filled(df):
        return _rows(df.astype({"label": "float"}).fillna({"label": -1.0}))

    assert filled(got) == filled(expected)
    assert got.set_index("id")["label"].isna().to_dict() == {2: True, 5: True, 6: True, 7: False}


def test_exclude_until_after_wallclock_time_is_refused_naming_group_and_values(history):
    fg, times = history
    with pytest.raises(InvalidArgumentError) as info:
        fg.as_of(times[0], exclude_until=times[2])
    message = str(info.value)
    assert "'clicks' v1" in message and "exclude_until must not be after wallclock_time" in message
    assert pd.Timestamp(times[2]).isoformat() in message
    assert pd.Timestamp(times[0]).isoformat() in message


@pytest.mark.parametrize("argument", ["exclude_until", "wallclock_time"])
def test_a_time_before_the_table_existed_is_refused(history, argument):
    fg, times = history
    kwargs = {"wallclock_time": times[-1], "exclude_until": "1970-01-02"}
    if argument == "wallclock_time":
        kwargs = {"wallclock_time": "1970-01-03", "exclude_until": "1970-01-02"}
    with pytest.raises(FeatureStoreError) as info:
        fg.as_of(**kwargs).read()
    message = str(info.value)
    assert isinstance(info.value, InvalidArgumentError)
    assert "'clicks' v1" in message and f"{argument}=1970-01-0" in message
    assert "before the group's first commit" in message


def test_incremental_queries_combine_with_nothing_that_would_read_them_whole(fs, history):
    fg, times = history
    with pytest.raises(InvalidArgumentError, match="does not combine with commit_id"):
        fg.as_of(exclude_until=times[0], commit_id=1)
    with pytest.raises(InvalidArgumentError, match="feature view 'inc'.*exclude_until"):
        fs.create_feature_view("inc", fg.as_of(times[-1], exclude_until=times[0]))
    assert fs.get_feature_views("inc") == []
