"""The numpy bucket kernel (``bucket_join``): every covered shape gives the single statement's
rows, values, types and order whatever the number of buckets; uncovered shapes run the
statement per bucket."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from feature_store.local.query import bucket_join as bj
from feature_store.local.storage import engine
from feature_store.local.query import partitioned_join as pj
from feature_store.local.training_data import training_data_stream as ts

T0 = pd.Timestamp("2024-01-01", tz="UTC")
MS0 = int(T0.value // 1_000_000)
N = 300


def _keys(rng, n, nulls=True):
    a = pd.array(rng.integers(0, 6, n), dtype="Int64")
    b = rng.choice(["x", "y", "zz", None] if nulls else ["x", "y", "zz"], n)
    if nulls:
        a[::17] = pd.NA
    return a, b


def _root(fs, name="ev", epoch_ms=False):
    """Root rows keyed by ``rid`` with event time ``ts`` (a timestamp, or epoch milliseconds),
    on keys (a, b) with nulls (event times and primary keys are never null)."""
    rng = np.random.default_rng(11)
    a, b = _keys(rng, N)
    hours = rng.permutation(N)
    times = T0 + pd.to_timedelta(hours, unit="h")
    frame = pd.DataFrame({"rid": np.arange(N), "a": a, "b": b,
                          "ts": (times.astype("int64") // 1_000_000) if epoch_ms else times,
                          "x": rng.normal(size=N), "label": rng.integers(0, 2, N)})
    fg = fs.get_or_create_feature_group(name, version=1, primary_key=["rid"], event_time="ts")
    fg.insert(frame)
    return fg


def _history(fs, name, kind="timestamp", rows=200, seed=3):
    """A group on keys (a, b) with many equal (keys, event time) rows (ties broken by ``v``)
    and keys the root lacks; event time ``et`` a timestamp, epoch ms or a date."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 8, rows)  # 6, 7: no root row has them
    b = rng.choice(["x", "y", "zz", "w"], rows)
    hours = rng.integers(-20, N // 6, rows) * 6
    times = T0 + pd.to_timedelta(hours, unit="h")
    et = {"timestamp": times, "ms": times.astype("int64") // 1_000_000,
          "date": [t.date() for t in times]}[kind]
    fg = fs.get_or_create_feature_group(name, version=1, primary_key=["a", "b", "v"],
                                        event_time="et")
    fg.insert(pd.DataFrame({"a": a, "b": b, "v": rng.permutation(rows), "et": et,
                            "h": rng.normal(size=rows), "s": rng.choice(["p", None], rows)}))
    return fg


def _check(fv, buckets, tmp_path, *, kernel=True, extra=None, start=None, end=None):
    """Run the view's query partitioned, merge, and compare with the single statement."""
    compiled = fv._td._prepare(extra, start, end, None)[0]
    con = ts.connect("1GB", tmp_path / "spill")
    try:
        run = pj.PartitionedQuery(con, compiled, buckets, tmp_path / f"parts{buckets}")
        assert (run.kernel is not None) is kernel
        files = run.run()
        # every joined bucket's inputs are removed by the time run() returns
        assert not list((tmp_path / f"parts{buckets}").glob(f"*/{pj.BUCKET}=*"))
        expected = engine.fetch_arrow(con, compiled.bind(con, single_statement=True),
                                      compiled.params)
        schema = run.schema()
    finally:
        con.close()
    order = list(fv.root_feature_group.upsert_key)
    merged = pa.concat_tables([t.cast(pa.schema([f.with_nullable(True) for f in t.schema]))
                               for t in pj.merge_ordered(files, order, None, 97)])
    assert merged.schema.names == expected.schema.names
    assert merged.cast(schema).equals(expected.cast(schema))
    assert [f.type for f in schema] == [f.type for f in expected.schema]
    assert expected.num_rows > 0
    return expected


@pytest.mark.parametrize("buckets", [4, 7])
def test_ties_nulls_multicolumn_string_keys_and_lookback(fs, tmp_path, buckets):
    root, hist = _root(fs), _history(fs, "hist")
    query = (root.select_all()
             .join(hist.select(["h", "s", "et"]), on=["a", "b"])
             .join(hist.select(["h", "a"]), on=["b", "a"], prefix="fresh_", lookback="30h")
             .filter(root.x > -1.0))
    fv = fs.create_feature_view("v", query=query, labels=["label"])
    out = _check(fv, buckets, tmp_path)
    assert out.column("h").null_count and out.column("fresh_h").null_count > out.column("h").null_count


@pytest.mark.parametrize("buckets", [3])
def test_inner_joins_with_and_without_lookback(fs, tmp_path, buckets):
    root, hist = _root(fs), _history(fs, "hist")
    other = _history(fs, "other", seed=9)
    query = (root.select(["rid", "ts", "label"])
             .join(hist.select(["h"]), on=["a", "b"], join_type="inner", lookback="40h")
             .join(other.select(["s"]), on=["a", "b"], join_type="inner"))
    fv = fs.create_feature_view("inner", query=query, labels=["label"])
    out = _check(fv, buckets, tmp_path)
    assert 0 < out.num_rows < N


@pytest.mark.parametrize("kind", ["ms", "date"])
def test_mixed_event_time_types(fs, tmp_path, kind):
    root, hist = _root(fs), _history(fs, "hist", kind=kind)
    query = (root.select_all().join(hist.select(["h", "et"]), on=["a", "b"])
             .join(hist.select(["h"]), on=["a", "b"], prefix="lb_", lookback="2d"))
    fv = fs.create_feature_view("mixed", query=query, labels=["label"])
    out = _check(fv, 3, tmp_path)
    assert out.column("lb_h").null_count < N


def test_epoch_ms_on_both_sides_and_against_timestamps(fs, tmp_path):
    root = _root(fs, "evms", epoch_ms=True)
    ms, stamps = _history(fs, "hms", kind="ms"), _history(fs, "hts", seed=4)
    query = (root.select_all().join(ms.select(["h"]), on=["a", "b"], lookback="1d")
             .join(stamps.select(["h"]), on=["a", "b"], prefix="t_", lookback="1d"))
    fv = fs.create_feature_view("ms", query=query, labels=["label"])
    _check(fv, 4, tmp_path)


def test_window_and_root_filters_are_applied_while_partitioning(fs, tmp_path):
    root, hist = _root(fs), _history(fs, "hist")
    fv = fs.create_feature_view("w", query=root.select_all().join(hist.select(["h"]), on=["a", "b"]),
                                labels=["label"])
    out = _check(fv, 3, tmp_path, extra=root.label == 1, start=T0 + pd.Timedelta(hours=30),
                 end=dt.datetime(2024, 1, 9, tzinfo=dt.timezone.utc))
    assert set(out.column("label").to_pylist()) == {1}
    assert out.num_rows < N // 2


@pytest.mark.parametrize("pack_bits, time_bits", [(43, 52), (9, 4)])
def test_passes_ranked_times_and_recoded_keys(fs, tmp_path, monkeypatch, pack_bits, time_bits):
    """Codes searched in passes of 4 (times of 41 bits, or ranked, beside 2 bits of code);
    multi-column codes re-densified."""
    monkeypatch.setattr(bj, "_PACK_BITS", pack_bits)
    monkeypatch.setattr(bj, "_MAX_TIME_BITS", time_bits)
    monkeypatch.setattr(bj, "_DENSE_LIMIT", 4)
    passes = []
    real = bj._latest
    monkeypatch.setattr(bj, "_latest", lambda *a: passes.append(a[4]) or real(*a))
    root, hist = _root(fs), _history(fs, "hist")
    query = root.select_all().join(hist.select(["h", "s"]), on=["a", "b"], lookback="50h")
    _check(fs.create_feature_view("r", query=query, labels=["label"]), 3, tmp_path)
    assert len(passes) > 3  # several passes in every bucket
    # offsets span 41 bits (hours of microseconds); ranks of a few hundred times fewer
    assert set(passes) == {41} if time_bits > 41 else max(passes) < 12


def test_uncovered_shapes_run_the_statement(fs, tmp_path, monkeypatch):
    root, hist = _root(fs), _history(fs, "hist")
    ran = []
    monkeypatch.setattr(pj.PartitionedQuery, "_run_statement",
                        lambda self, b, real=pj.PartitionedQuery._run_statement:
                        ran.append(b) or real(self, b))
    post = root.select_all().join(hist.select(["h"]), on=["a", "b"]).filter(hist.h < 0.5)
    fv = fs.create_feature_view("post", query=post, labels=["label"])
    assert fv._td._prepare(None, None, None, None)[0].partition_keys is not None
    _check(fv, 3, tmp_path, kernel=False)
    assert ran
    covered = fs.create_feature_view(
        "covered", query=root.select_all().join(hist.select(["h"]), on=["a", "b"]), labels=["label"])
    ran.clear()
    _check(covered, 3, tmp_path)
    assert ran == []


def test_uncovered_key_type(fs):
    rng = np.random.default_rng(2)
    left = fs.get_or_create_feature_group("fl", version=1, primary_key=["id"], event_time="ts")
    left.insert(pd.DataFrame({"id": range(20), "k": rng.normal(size=20),
                              "ts": T0 + pd.to_timedelta(np.arange(20), unit="h")}))
    right = fs.get_or_create_feature_group("fr", version=1, primary_key=["k"], event_time="ts")
    right.insert(pd.DataFrame({"k": rng.normal(size=20), "f": np.arange(20.0),
                               "ts": T0 + pd.to_timedelta(np.arange(20), unit="h")}))
    fv = fs.create_feature_view("fk", query=left.select_all().join(right.select(["f"]), on=["k"]))
    compiled = fv._td._prepare(None, None, None, None)[0]
    assert compiled.partition_keys is not None and bj.plan(compiled) is None


def _integer_keyed(fs, name, rows, seed, *, pk, low, high, dtype="int64", nulls=False):
    """A group on one integer key ``k`` (values low..high, every (k, ts) distinct)."""
    rng = np.random.default_rng(seed)
    k = pd.array(rng.integers(low, high, rows), dtype="Int64" if nulls else dtype)
    if nulls:
        k[::13] = pd.NA
    frame = pd.DataFrame({"rid": np.arange(rows), "k": k, "g": rng.integers(0, 4, rows),
                          "ts": T0 + pd.to_timedelta(rng.permutation(rows) * 3, unit="h"),
                          "v": rng.normal(size=rows), "n": pd.array(rng.integers(0, 9, rows),
                                                                    dtype="Int64")})
    frame.loc[::7, "n"] = pd.NA  # a column with nulls of its own (taken by pyarrow)
    fg = fs.get_or_create_feature_group(name, version=1, primary_key=pk, event_time="ts")
    fg.insert(frame)
    return fg


@pytest.mark.parametrize("keep_unusable", [0.0, 1.0])
@pytest.mark.parametrize("root_key", [["rid"], ["g", "rid"]])
def test_single_integer_key_coded_by_lookup(fs, tmp_path, monkeypatch, keep_unusable, root_key):
    """One integer key (nulls, right values below, inside and above the root's range, an int32
    right key) is coded through the lookup table; right rows that cannot match are kept with
    a code past the root's or left out; the root ordered by numpy (distinct first column) or
    pyarrow (repeated first column); the gathered columns equal pyarrow's take."""
    monkeypatch.setattr(bj, "_KEEP_UNUSABLE", keep_unusable)
    looked_up = []
    real = bj._Lookup.of
    monkeypatch.setattr(bj._Lookup, "of", lambda column, rows: looked_up.append(
        real(column, rows)) or looked_up[-1])
    root = _integer_keyed(fs, "iroot", N, 5, pk=root_key, low=100, high=160, nulls=True)
    near = _integer_keyed(fs, "inear", 400, 6, pk=["k"], low=80, high=190, dtype="int32")
    tied = _integer_keyed(fs, "itied", 400, 7, pk=["k", "rid"], low=90, high=170)
    query = (root.select(["rid", "k", "g", "ts", "v"])
             .join(near.select(["v", "n", "ts"]), on=["k"], prefix="near_")
             .join(tied.select(["v", "n"]), on=["k"], prefix="tied_", lookback="200h"))
    fv = fs.create_feature_view("ik", query=query, labels=["v"])
    out = _check(fv, 3, tmp_path)
    assert looked_up and all(lookup is not None for lookup in looked_up)
    assert out.column("near_v").null_count and out.column("tied_n").null_count
    assert out.column("near_v").null_count < out.num_rows


@pytest.mark.parametrize("pack_bits", [63, 30, 24, 12])
def test_sorted_pairs_and_pair_order(monkeypatch, pack_bits):
    """The packed sort gives (code, time, index) order with every time bit kept, with low
    bits left out and put back by the stable sort, and by argsort when the indices do not fit;
    the root side is sorted by code whatever is kept of its times."""
    monkeypatch.setattr(bj, "_PACK_BITS", pack_bits)
    rng = np.random.default_rng(pack_bits)
    codes = rng.integers(0, 5, 3000)
    times = rng.integers(0, 1 << 20, 3000) | rng.integers(0, 4, 3000)  # equal pairs too
    shift = 20
    order, ordered = bj._sorted_pairs((codes << shift) | times, codes, times, shift)
    expected = np.lexsort((np.arange(3000), times, codes))
    assert np.array_equal(order, expected)
    assert np.array_equal(ordered, ((codes << shift) | times)[expected])
    rows, sorted_codes = bj._pair_order(codes, times)
    assert np.array_equal(np.sort(rows), np.arange(3000))
    assert np.array_equal(sorted_codes, np.sort(codes)) and np.array_equal(codes[rows], sorted_codes)


def test_broken_ties_keep_the_smallest_tie_values():
    """Of rows with equal packed values, the one with the smallest tie values (nulls last,
    then by index) is kept, as a pyarrow sort of all rows by (value, ties) keeps it."""
    rng = np.random.default_rng(8)
    packed = rng.integers(0, 400, 2000)
    ties = pa.table({"__tie0": pa.array(rng.integers(0, 3, 2000), mask=rng.random(2000) < 0.2),
                     "__tie1": pa.array(rng.choice(["a", "b", "c"], 2000))})
    order, ordered = bj._sorted_pairs(packed, packed, np.zeros(2000, dtype=np.int64), 0)
    kept, values = bj._broken_ties(order, ordered, ties)
    table = pa.table({"__packed": packed, **{n: ties.column(n) for n in ties.column_names}})
    full = np.asarray(pa.compute.sort_indices(table, sort_keys=[
        (n, "ascending", "at_end") for n in table.column_names]).to_numpy())
    first = np.ones(len(full), dtype=bool)
    first[1:] = packed[full][1:] != packed[full][:-1]
    assert np.array_equal(kept, full[first]) and np.array_equal(values, packed[full[first]])
    assert len(kept) < len(packed)
    alone, alone_values = bj._broken_ties(order[::5][:300], np.arange(300), ties)  # no runs
    assert np.array_equal(alone, order[::5][:300]) and np.array_equal(alone_values, np.arange(300))


def test_a_bucket_without_rows_of_a_group_takes_nulls():
    """A bucket holding root rows but no row of a joined group (every match -1) takes nulls
    (the numpy gather indexed row 0 of the empty column: IndexError)."""
    import numpy as np
    import pyarrow as pa

    from feature_store.local.query.bucket_join import _Gather

    taken = _Gather(np.array([-1, -1, -1])).take(pa.chunked_array([], pa.float64()))
    assert taken.null_count == 3 and taken.type == pa.float64()
