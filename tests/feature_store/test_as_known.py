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
