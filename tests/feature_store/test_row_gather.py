"""Point-in-time joins that fetch a group's columns by row id after the join.

The compiled query joins gathered groups on keys, event time and row id only, then takes their
columns from the same pinned files. Every case here checks the result against the equivalent
single statement that carries every column through the joins (``single_statement=True``):
same values, nulls, types and row order.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from feature_store.feature import Feature
from feature_store.local.storage import engine
from feature_store.local.query import row_gather
from feature_store.local.query.pit import compile_query

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _t(hours):
    return [T0 + pd.Timedelta(hours=h) for h in hours]


@pytest.fixture(autouse=True)
def _gather_small_files(monkeypatch):
    """These tables are tiny and joins bring few columns; gather them anyway (the rules that
    decide when gathering pays have their own tests)."""
    monkeypatch.setattr(row_gather, "MIN_ROWS_PER_FILE", 0)
    monkeypatch.setattr(row_gather, "MIN_COLUMNS", 1)


def _run_both(query, **kwargs):
    compiled = compile_query(query.spec(), order_by_root_key=True, **kwargs)
    con = engine.connect()
    try:
        return compiled, compiled.fetch(con), compiled.fetch(con, single_statement=True)
    finally:
        con.close()


def _assert_same(gathered: pa.Table, single: pa.Table) -> None:
    assert gathered.schema == single.schema
    assert gathered.num_rows == single.num_rows
    for name in single.column_names:
        assert gathered[name].equals(single[name]), name


@pytest.fixture
def labels(fs):
    fg = fs.get_or_create_feature_group("labels", version=1, primary_key=["id"], event_time="ts")
    fg.insert(pd.DataFrame({
        "id": np.arange(8),
        "card": ["a", "a", "b", "c", "a", "b", "b", "d"],
        "ts": _t([10, 20, 10, 10, 5, 40, 100, 1]),
        "y": [0, 1, 0, 1, 0, 1, 1, 0],
    }))
    return fg


def _card_history(fs):
    """Three inserts (three files), the last one updating a row the first wrote."""
    card = fs.get_or_create_feature_group("card", version=1, primary_key=["card"], event_time="ts")
    card.insert(pd.DataFrame({
        "card": ["a", "a", "b"], "ts": _t([0, 10, 11]),
        "spend": [1.0, None, 4.0], "kind": ["x", None, "z"], "n": pd.array([1, None, 3], "Int64"),
        "flag": [True, None, False], "day": [dt.date(2024, 1, 1), None, dt.date(2024, 1, 3)],
        "seen": _t([0, 1, 2]),
    }))
    card.insert(pd.DataFrame({
        "card": ["a", "b"], "ts": _t([15, 30]),
        "spend": [3.0, 5.0], "kind": ["w", "v"], "n": pd.array([4, 5], "Int64"),
        "flag": [True, True], "day": [dt.date(2024, 2, 1), dt.date(2024, 2, 2)], "seen": _t([3, 4]),
    }))
    card.insert(pd.DataFrame({
        "card": ["a"], "ts": _t([0]),
        "spend": [1.5], "kind": ["updated"], "n": pd.array([None], "Int64"),
        "flag": [False], "day": [dt.date(2024, 3, 1)], "seen": _t([5]),
    }))
    return card


def test_gathered_columns_equal_the_single_statement_across_files_and_types(fs, labels):
    card = _card_history(fs)
    assert len(card._table.files()) >= 2
    query = labels.select_all().join(card.select_features(), on=["card"])
    compiled, gathered, single = _run_both(query)
    assert [g.node.group.name for g in compiled.gathers] == ["card"]
    _assert_same(gathered, single)
    out = gathered.to_pandas().set_index("id")
    assert out.loc[0, "seen"] == _t([1])[0]  # a@10: the row the first insert wrote at exactly 10
    assert out.loc[1, "spend"] == 3.0  # a@20: latest of several (a@15, from the second file)
    assert out.loc[4, "kind"] == "updated"  # a@5: a@0 as the third insert updated it
    assert pd.isna(out.loc[3, "spend"]) and pd.isna(out.loc[7, "kind"])  # key absent / too early
    assert pd.isna(out.loc[0, "spend"]) and out.loc[0, "kind"] is None  # stored nulls stay null
    assert pd.isna(out.loc[0, "n"]) and out.loc[2, "day"] is None  # as do rows without a match


def test_evolved_columns_and_lookback_give_nulls_like_the_single_statement(fs, labels):
    card = _card_history(fs)
    card.append_features([Feature("risk", type="double")])
    card.insert(pd.DataFrame({
        "card": ["b"], "ts": _t([35]), "spend": [6.0], "kind": ["u"], "n": pd.array([6], "Int64"),
        "flag": [True], "day": [dt.date(2024, 4, 1)], "seen": _t([6]), "risk": [0.5],
    }))
    query = labels.select_all().join(card.select(["spend", "risk"]), on=["card"], lookback="2D")
    compiled, gathered, single = _run_both(query)
    assert len(compiled.gathers) == 1
    _assert_same(gathered, single)
    out = gathered.to_pandas().set_index("id")
    assert out.loc[5, "risk"] == 0.5  # b@40 matches b@35, written after the column was added
    assert pd.isna(out.loc[2, "risk"])  # b@10 has no earlier row
    assert pd.isna(out.loc[6, "spend"])  # b@100: latest row b@35 is older than the 2-day lookback
    assert out.loc[5, "spend"] == 6.0


def test_inner_join_ties_window_and_limit_match_the_single_statement(fs, labels):
    card = _card_history(fs)
    merchant = fs.get_or_create_feature_group("merchant", version=1, primary_key=["card", "shop"],
                                              event_time="ts")
    merchant.insert(pd.DataFrame({
        "card": ["a", "a", "b", "b"], "shop": ["s2", "s1", "s9", "s3"], "ts": _t([1, 1, 2, 2]),
        "amount": [20.0, 10.0, 90.0, 30.0],
    }))
    query = (labels.select_all()
             .join(card.select(["spend"]), on=["card"], join_type="inner")
             .join(merchant.select(["amount"]), on=["card"]))
    for kwargs in ({}, {"start_time": _t([6])[0]}, {"limit": 3}):
        compiled, gathered, single = _run_both(query, **kwargs)
        assert len(compiled.gathers) == 2
        _assert_same(gathered, single)
    out = _run_both(query)[1].to_pandas().set_index("id")
    assert 3 not in out.index and 7 not in out.index  # inner: no match, no row
    assert out.loc[0, "amount"] == 10.0  # a tie at a@1 goes to the smallest shop (s1)


def test_groups_read_after_their_join_stay_in_the_statement(fs, labels):
    card = _card_history(fs)
    region = fs.get_or_create_feature_group("region", version=1, primary_key=["kind"])
    region.insert(pd.DataFrame({"kind": ["x", "w", "z"], "region": ["north", "south", "east"]}))
    card_region = card.select(["spend", "kind"]).join(region.select(["region"]), on=["kind"])
    nested = labels.select_all().join(card_region, on=["card"])
    compiled, gathered, single = _run_both(nested)
    assert compiled.gathers == []  # card is the left side of the region join
    _assert_same(gathered, single)
    filtered = labels.select_all().join(card.select(["spend"]), on=["card"]).filter(card.spend > 2)
    compiled, gathered, single = _run_both(filtered)
    assert compiled.gathers == []  # the filter reads card.spend after the join
    _assert_same(gathered, single)
    assert sorted(gathered["id"].to_pylist()) == [1, 5, 6]


def test_training_data_and_its_hash_are_unchanged_by_gathering(fs, labels):
    card = _card_history(fs)
    query = labels.select_all().join(card.select_features(), on=["card"])
    fv = fs.create_feature_view("v", version=1, query=query, labels=["y"])
    X, y = fv.training_data(seed=0, statistics_config=False)
    compiled, gathered, single = _run_both(fv.query)
    assert compiled.gathers
    expected = single.to_pandas().drop(columns=["y"])
    pd.testing.assert_frame_equal(X.reset_index(drop=True),
                                  expected[X.columns].reset_index(drop=True))
    from feature_store.core.content_hash import table_sha256

    assert table_sha256(gathered) == table_sha256(single)


def test_positions_count_rows_of_earlier_files():
    shift = engine.ROW_ID_FILE_SHIFT
    file_rows = np.array([3, 0, 2])  # the middle file holds no rows
    wanted = pa.array([(2 << shift) | 1, None, 0, 2, (2 << shift) | 0], pa.int64())
    rows = row_gather.positions(file_rows, wanted)
    assert [rows.at[i].as_py() for i in (0, 2, 3, 4)] == [4, 0, 2, 3]
    assert rows.missing.tolist() == [False, True, False, False, False]
    values = pa.chunked_array([["f0r0", "f0r1"], ["f0r2", "f2r0", "f2r1"]])
    assert rows.take(values).to_pylist() == ["f2r1", None, "f0r0", "f0r2", "f2r0"]


def test_positions_refuse_a_row_id_the_files_do_not_hold():
    shift = engine.ROW_ID_FILE_SHIFT
    with pytest.raises(AssertionError, match="not in the files"):
        row_gather.positions(np.array([3]), pa.array([1, 3], pa.int64()))  # row 3 of 3
    with pytest.raises(AssertionError, match="not in the files"):
        row_gather.positions(np.array([3]), pa.array([1 << shift], pa.int64()))  # file 1 of 1
    with pytest.raises(AssertionError, match="hold no rows"):
        row_gather.positions(np.zeros(0, dtype=np.int64), pa.array([0], pa.int64()))
    empty = row_gather.positions(np.zeros(0, dtype=np.int64), pa.array([None, None], pa.int64()))
    assert empty.take(pa.chunked_array([[]], pa.float64())).to_pylist() == [None, None]


def test_take_keeps_stored_nulls_and_adds_missing_rows():
    source = pa.chunked_array([[1.0, None, 3.0], [4.0]])
    rows = row_gather.Rows(pa.array([3, 1, 0, 0]), np.array([False, False, False, True]))
    taken = rows.take(source)
    assert taken.to_pylist() == [4.0, None, 1.0, None]
    assert np.frombuffer(taken.buffers()[1], dtype="<f8")[3] == 0.0  # a missing row's slot: zero
    flags = pa.chunked_array([[True, None, False, True]])
    assert rows.take(flags).to_pylist() == [True, None, True, None]


def test_a_group_whose_rows_were_all_removed_gives_nulls(fs, labels):
    card = _card_history(fs)
    card.remove_rows(card.read()[["card", "ts"]])
    assert card.read().empty
    compiled, gathered, single = _run_both(labels.select_all().join(card.select(["spend", "kind"]), on=["card"]))
    assert len(compiled.gathers) == 1
    _assert_same(gathered, single)
    assert gathered["spend"].null_count == gathered.num_rows == 8


def test_groups_of_small_files_are_joined_in_one_statement(fs, labels, monkeypatch):
    card = _card_history(fs)  # 6 rows in 3 files
    query = labels.select_all().join(card.select(["spend"]), on=["card"])
    monkeypatch.setattr(row_gather, "MIN_ROWS_PER_FILE", 2)
    assert len(compile_query(query.spec()).gathers) == 1  # 2 rows per file on average: gathered
    monkeypatch.setattr(row_gather, "MIN_ROWS_PER_FILE", 3)
    compiled, gathered, single = _run_both(query)
    assert compiled.gathers == []  # below the rule: one statement
    _assert_same(gathered, single)


def test_joins_bringing_few_columns_are_joined_in_one_statement(fs, labels, monkeypatch):
    card = _card_history(fs)
    monkeypatch.setattr(row_gather, "MIN_COLUMNS", 3)
    two = labels.select_all().join(card.select(["spend", "kind"]), on=["card"])
    three = labels.select_all().join(card.select(["spend", "kind", "n"]), on=["card"])
    assert compile_query(two.spec()).gathers == []
    assert len(compile_query(three.spec()).gathers) == 1
    compiled, gathered, single = _run_both(two)
    _assert_same(gathered, single)


def test_prefixed_event_time_and_a_group_joined_twice(fs, labels):
    card = _card_history(fs)
    query = (labels.select_all()
             .join(card.select(["spend", "ts"]), on=["card"], prefix="now_")
             .join(card.select(["spend", "seen"]), on=["card"], prefix="again_", lookback="1D"))
    compiled, gathered, single = _run_both(query)
    assert len(compiled.gathers) == 2
    _assert_same(gathered, single)
    out = gathered.to_pandas().set_index("id")
    assert out.loc[1, "now_ts"] == _t([15])[0]  # the matched row's own event time
    assert out.loc[1, "again_spend"] == 3.0 and pd.isna(out.loc[6, "again_spend"])


def test_gathering_stays_within_its_memory_share(fs, labels, monkeypatch):
    card = _card_history(fs)
    merchant = fs.get_or_create_feature_group("merchant2", version=1, primary_key=["card"],
                                              event_time="ts")
    merchant.insert(pd.DataFrame({"card": ["a", "b"], "ts": _t([1, 2]), "amount": [1.0, 2.0],
                                  "visits": [3, 4], "region": ["n", "s"]}))
    query = (labels.select_all()
             .join(card.select(["spend", "n", "day"]), on=["card"])
             .join(merchant.select(["amount", "visits", "region"]), on=["card"]))
    card_size = card._table.row_count() * (8 + 8 + 4)  # double, bigint, date
    merchant_size = 2 * (8 + 8 + 32)  # double, bigint, a string estimated at 32 bytes
    assert merchant_size < card_size
    memory = row_gather.memory_bytes()
    assert memory > 1 << 20
    for budget, gathered_groups in ((card_size + merchant_size, ["card", "merchant2"]),
                                    (card_size, ["card"]),
                                    (card_size - 1, ["merchant2"]),
                                    (merchant_size - 1, [])):
        monkeypatch.setattr(row_gather, "MEMORY_SHARE", (budget + 0.5) / memory)
        compiled, gathered, single = _run_both(query)
        assert [g.node.group.name for g in compiled.gathers] == gathered_groups, budget
        _assert_same(gathered, single)
