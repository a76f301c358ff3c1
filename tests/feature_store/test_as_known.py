"""As-known point-in-time joins against the brute-force replay oracle (``pit_oracle``), on the
single statement and the partitioned path, with backfills, corrections and deletions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError
from tests.feature_store.pit_oracle import (
    backfilled,
    commit_clock,
    hours,
    pit_oracle,
    random_history,
)


def _labels(fs, clock, rng, n=24, keys=("k1", "k2")):
    clock[0] = hours(0.5)
    frame = pd.DataFrame({"id": np.arange(n), "ts": [hours(h) for h in np.round(rng.uniform(0, 110, n), 2)]})
    for k in keys:
        frame[k] = rng.integers(0, 4, n)
    fg = fs.get_or_create_feature_group("labels", version=1, primary_key=["id"], event_time="ts")
    fg.insert(frame)
    return fg, frame


def _history(fs, monkeypatch, seed, *, deletes, same_key=False):
    """Labels and two groups with random histories; ``same_key``: both joined on ``k1`` (the
    shape the partitioned path runs)."""
    rng = np.random.default_rng(seed)
    with commit_clock(monkeypatch) as clock:
        labels, frame = _labels(fs, clock, rng)
        joined = [random_history(fs, clock, rng, "r1", "k1", tie=False, deletes=deletes),
                  random_history(fs, clock, rng, "r2", "k2", tie=True, deletes=deletes)]
    keys = {"r1": "k1", "r2": "k1" if same_key else "k2"}
    return labels, frame, joined, keys


def _query(labels, joined, keys, as_known):
    query = labels.select_all()
    for j in joined:
        query.join(j.fg.select(j.values), left_on=[keys[j.fg.name]], right_on=[j.key],
                   as_known=as_known)
    return query


def _check(got, want, values):
    got = got.sort_values("id").reset_index(drop=True)
    want = want.sort_values("id").reset_index(drop=True)
    for v in values:
        np.testing.assert_allclose(got[v].to_numpy(float), want[v].to_numpy(float),
                                   equal_nan=True, err_msg=v)


def _single_statement(query):
    from feature_store.local.storage import engine
    from feature_store.local.query import pit

    compiled = pit.compile_query(query.spec(), order_by_root_key=True)
    con = engine.connect()
    try:
        return compiled.fetch(con, single_statement=True).to_pandas()
    finally:
        con.close()


def _partitioned(fs, query, name, partitions):
    from feature_store.local.query import partitioned_join as pj

    fv = fs.create_feature_view(name, query=query, labels=[])
    assert fv._td._prepare(None, None, None, None)[0].partition_keys is not None
    version, _ = fv.create_training_data(write_options={"partitions": partitions})
    assert pj.bucket_count is not None
    return fv.get_training_data(version)[0]


def _against_oracle(fs, monkeypatch, seed, *, deletes, partitions=(3,)):
    labels, frame, joined, keys = _history(fs, monkeypatch, seed, deletes=deletes, same_key=True)
    values = [v for j in joined for v in j.values]
    for as_known in (False, True):
        query = _query(labels, joined, keys, as_known)
        want = pit_oracle(frame, joined, as_known=as_known, label_key=keys)
        _check(query.read(), want, values)
        _check(_single_statement(query), want, values)
        for n in partitions:
            got = _partitioned(fs, query, f"p{int(as_known)}_{n}", n)
            _check(got.assign(id=frame.sort_values("id")["id"].to_numpy()), want, values)


def test_as_known_and_plain_joins_match_the_replay_oracle_on_every_path(fs, monkeypatch):
    _against_oracle(fs, monkeypatch, 3, deletes=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_replay_oracle_sweep(fs, monkeypatch, seed):
    _against_oracle(fs, monkeypatch, 100 + seed, deletes=seed % 2 == 0, partitions=(2, 5))


@pytest.mark.parametrize("seed", [7, 8])
def test_lookback_and_inner_joins_match_the_oracle_on_every_path(fs, monkeypatch, seed):
    """A lookback bounds the version an as-known join picks (a known match older than the label
    time less it is none) and an inner join drops the labels it matches none for, plain and as
    known, in memory, as one statement and partitioned."""
    labels, frame, joined, keys = _history(fs, monkeypatch, seed, deletes=True, same_key=True)
    values = [v for j in joined for v in j.values]
    r1, r2 = joined
    for as_known in (False, True):
        query = labels.select_all()
        query.join(r1.fg.select(r1.values), left_on=["k1"], right_on=[r1.key],
                   as_known=as_known, lookback="20h")
        query.join(r2.fg.select(r2.values), left_on=["k1"], right_on=[r2.key],
                   as_known=as_known, join_type="inner")
        want = pit_oracle(frame, joined, as_known=as_known, label_key=keys,
                          lookback={"r1": pd.Timedelta(hours=20)}, inner=frozenset({"r2"}))
        assert 0 < len(want) < len(frame)  # the inner join dropped some labels, not all
        assert want["v_r1"].isna().any()  # and the lookback cut some matches
        _check(query.read(), want, values)
        _check(_single_statement(query), want, values)
        fv = fs.create_feature_view(f"lb{int(as_known)}_{seed}", query=query, labels=[])
        assert fv._td._prepare(None, None, None, None)[0].partition_keys is not None
        version, _ = fv.create_training_data(write_options={"partitions": 3})
        _check(fv.get_training_data(version, primary_key=True)[0], want, values)


def test_different_keys_match_the_oracle(fs, monkeypatch):
    labels, frame, joined, keys = _history(fs, monkeypatch, 1, deletes=False)
    query = _query(labels, joined, keys, True)
    want = pit_oracle(frame, joined, as_known=True, label_key=keys)
    _check(query.read(), want, [v for j in joined for v in j.values])


def test_as_known_differs_from_the_plain_join_on_a_backfill(fs, monkeypatch):
    labels, feats = backfilled(fs, monkeypatch)
    plain = labels.select_all().join(feats.select(["x"]), on=["k"]).read().sort_values("id")
    known = labels.select_all().join(feats.select(["x"]), on=["k"], as_known=True).read().sort_values("id")
    assert list(plain["x"]) == [2.0, 2.0]  # the label at 10h sees the backfill of 20h
    assert list(known["x"]) == [1.0, 2.0]  # at 10h only the 4h row was known, as first written


def test_as_known_is_recorded_with_the_query(fs, monkeypatch):
    from feature_store.local.objects.query import Query

    labels, _, joined, keys = _history(fs, monkeypatch, 4, deletes=False)
    query = _query(labels, joined, keys, True)
    again = Query.from_dict(fs, query.to_dict())
    assert [j.as_known for j in again.joins] == [True, True]
    pd.testing.assert_frame_equal(again.read(), query.read())


def test_as_known_needs_event_times_and_a_bool(fs):
    plain = fs.create_feature_group("plain", version=1, primary_key=["k"])
    plain.insert(pd.DataFrame({"k": [1], "x": [1.0]}))
    timed = fs.create_feature_group("timed", version=1, primary_key=["k"], event_time="ts")
    timed.insert(pd.DataFrame({"k": [1], "ts": [hours(1)], "x": [1.0]}))
    with pytest.raises(InvalidArgumentError, match=r"as_known=True needs an event_time.*'plain'"):
        timed.select_all().join(plain.select(["x"]), as_known=True)
    with pytest.raises(InvalidArgumentError, match=r"as_known must be True or False. Got 'yes'"):
        timed.select_all().join(timed.select(["x"]), as_known="yes")


def _typed_history(fs, monkeypatch):
    """Labels and a group of several column types with a backfill, a correction and a deletion."""
    with commit_clock(monkeypatch) as clock:
        labels = fs.create_feature_group("tlab", version=1, primary_key=["id"], event_time="ts")
        labels.insert(pd.DataFrame({"id": range(6), "k": [1, 1, 2, 2, 3, 3],
                                    "ts": [hours(h) for h in (3, 9, 3, 9, 3, 9)]}))
        feats = fs.create_feature_group("typed", version=1, primary_key=["k"], event_time="ts")
        clock[0] = hours(1)
        feats.insert(pd.DataFrame({"k": [1, 2, 3], "ts": [hours(1)] * 3, "name": ["a", "b", "c"],
                                   "n": [1, 2, 3], "flag": [True, False, True],
                                   "seen": [hours(0)] * 3, "x": [0.5, 1.5, 2.5]}))
        clock[0] = hours(6)
        feats.insert(pd.DataFrame({"k": [1, 2], "ts": [hours(2), hours(1)], "name": ["late", "fixed"],
                                   "n": [10, 20], "flag": [False, True], "seen": [hours(5)] * 2,
                                   "x": [9.5, 8.5]}))
        clock[0] = hours(7)
        feats.remove_rows(pd.DataFrame({"k": [3], "ts": [hours(1)]}))
    return labels, feats


def test_as_known_columns_are_taken_from_the_row_versions_exactly_as_one_statement_joins_them(
        fs, monkeypatch):
    """The statement that runs carries only the timeline's keys, event time and version id
    through the ASOF join and takes the group's columns from its row versions by id; the
    result equals the single statement's, value for value and type for type."""
    from feature_store.local.query import pit
    from feature_store.local.storage import engine

    labels, feats = _typed_history(fs, monkeypatch)
    columns = ["name", "n", "flag", "seen", "x"]
    query = labels.select_all().join(feats.select(columns), on=["k"], as_known=True)
    compiled = pit.compile_query(query.spec(), order_by_root_key=True)
    assert [g.versions for g in compiled.gathers] == [True]
    assert '"flag"' not in compiled.template and '"flag"' in compiled.display_template
    con = engine.connect()
    try:
        ran, one = compiled.fetch(con), compiled.fetch(con, single_statement=True)
    finally:
        con.close()
    assert ran.schema == one.schema and ran.equals(one)
    got = ran.to_pandas().set_index("id")
    assert got.loc[1, "name"] == "late" and got.loc[0, "name"] == "a"  # the 2h row known at 6h
    assert got.loc[2, "n"] == 2 and got.loc[3, "n"] == 20  # the correction known at 6h
    assert got.loc[4, "name"] == "c" and pd.isna(got.loc[5, "name"])  # deleted at 7h


def test_a_timeline_is_kept_with_the_row_versions_it_numbers(fs, monkeypatch):
    """The narrow timeline is computed once per row-version table; a table built afresh (after
    the cache let it go) gets its own, since it may number its versions differently."""
    from feature_store.local.query import as_known, pit
    from feature_store.local.storage import engine, row_history

    labels, feats = _typed_history(fs, monkeypatch)
    query = labels.select_all().join(feats.select(["name", "n", "x"]), on=["k"], as_known=True)
    compiled = pit.compile_query(query.spec(), order_by_root_key=True)
    (jp,) = compiled.timelines.values()
    group = jp.right.group

    def versions():
        return row_history.row_versions(group.delta_table, jp.right.commit, group.upsert_key)

    con = engine.connect()
    try:
        first = versions()
        timeline = as_known.timeline_table(con, jp, first)
        assert as_known.timeline_table(con, jp, versions()) is timeline
        row_history._cache.clear()
        again = versions()
        assert again is not first
        assert as_known.timeline_table(con, jp, again) is not timeline
        assert as_known.timeline_table(con, jp, first) is not timeline  # no longer cached: rebuilt
        expected = compiled.fetch(con, single_statement=True)
        assert compiled.fetch(con).equals(expected)
    finally:
        con.close()


def test_history_before_1970_ranks_its_versions_as_the_single_statement_does(fs):
    """The timeline that runs ranks a key's versions by event and known time packed in one
    128-bit number; event and ingestion times before 1970 (negative microseconds) order as in
    the single statement's struct."""
    from feature_store.local.query import pit
    from feature_store.local.storage import engine

    day = pd.Timestamp("1960-01-01", tz="UTC")
    labels = fs.create_feature_group("old_lab", version=1, primary_key=["id"], event_time="ts")
    labels.insert(pd.DataFrame({"id": range(4), "k": [1, 1, 2, 2],
                                "ts": [day + pd.Timedelta(days=d) for d in (10, 400, 10, 400)]}))
    feats = fs.create_feature_group("old", version=1, primary_key=["k"], event_time="ts",
                                    ingestion_time="loaded")
    feats.insert(pd.DataFrame({
        "k": [1, 1, 2, 2], "ts": [day + pd.Timedelta(days=d) for d in (1, 5, 2, 3)],
        "loaded": [day + pd.Timedelta(days=d) for d in (2, 300, 3, 4)], "x": [1.0, 2.0, 3.0, 4.0]}))
    query = labels.select_all().join(feats.select(["x"]), on=["k"], as_known=True)
    compiled = pit.compile_query(query.spec(), order_by_root_key=True)
    con = engine.connect()
    try:
        ran, one = compiled.fetch(con), compiled.fetch(con, single_statement=True)
    finally:
        con.close()
    assert ran.equals(one)
    # key 1: the day-5 row was loaded on day 300, after the first label; key 2: the latest
    assert ran.column("x").to_pylist() == [1.0, 2.0, 4.0, 4.0]
