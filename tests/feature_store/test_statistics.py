"""Streaming statistics of a split (``StreamingStatistics``): bit-identical for any batching of
the same rows in the same order, and equal to DuckDB's and numpy's to rounding."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyarrow as pa
import pytest

from feature_store.local.storage import engine
from feature_store.local.storage import statistics as st


def _table(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    f = rng.normal(size=n)
    return pa.table({
        "f": pa.array(f, mask=rng.random(n) < 0.2),
        "shifted": 1e3 + rng.normal(size=n),  # sums that round differently per batching
        "i": pa.array(rng.integers(-2**53, 2**53, n)),
        "g": pa.array(rng.normal(size=n)).cast(pa.float32()),
        "nan": pa.array(np.where(np.arange(n) == n // 2, np.nan, f)),
        "inf": pa.array(np.where(np.arange(n) == n - 1, np.inf, f)),
        "ts": pa.array(rng.integers(0, 10**15, n)).cast(pa.timestamp("us", tz="UTC")),
        "one": pa.array([None] * (n - 1) + [3], pa.int64()),
        "s": pa.array(rng.choice(["a", "b", None], n)),
    })


def _batchings(table: pa.Table, rng: np.random.Generator, sizes: tuple[int, ...]):
    """The table as one batch, as batches of each size, and cut at random points (empty
    batches included)."""
    n = table.num_rows
    yield table.to_batches()
    for size in sizes:
        yield table.to_batches(max_chunksize=size)
    for cuts in (3, 40):
        points = np.sort(np.concatenate([[0, n, 0, n // 2, n // 2], rng.integers(0, n, cuts)]))
        yield [b for lo, hi in itertools.pairwise(points)
               for b in table.slice(int(lo), int(hi - lo)).to_batches() or [table.slice(0, 0)]]


def _fed(table: pa.Table, batches, con) -> dict:
    stats = st.StreamingStatistics(table.schema)
    for batch in batches:
        stats.update(batch)
    return stats.result(con, "x")


def _check(table: pa.Table, sizes: tuple[int, ...]) -> dict:
    con = engine.connect()
    con.register("x", table)
    results = [_fed(table, batches, con) for batches in _batchings(table, np.random.default_rng(1),
                                                                    sizes)]
    want = st.compute_statistics(con, "x", table.schema)
    con.close()
    assert len(results) == len(sizes) + 3
    for got in results[1:]:
        assert got == results[0]  # bit for bit, not approximately
    for a, b in zip(results[0]["features"], want["features"], strict=True):
        assert list(a) == list(b)
        for key, value in b.items():
            assert a[key] == (pytest.approx(value, rel=1e-12)
                              if isinstance(value, float) else value), (a["feature"], key)
    return results[0]


def test_any_batching_gives_identical_statistics(monkeypatch):
    """Blocks of 16 values: every batching here breaks blocks in other places (single rows,
    batches straddling blocks, empty batches, nulls compacted per batch)."""
    monkeypatch.setattr(st, "BLOCK", 16)
    result = _check(_table(500), (1, 7, 16, 17, 100))
    entries = {e["feature"]: e for e in result["features"]}
    assert entries["nan"]["mean"] is None  # left to DuckDB
    finite = np.random.default_rng(0).normal(size=500)[:-1]  # "inf" holds one +inf, last
    assert (entries["inf"]["posinf_count"], entries["inf"]["neginf_count"]) == (1, 0)
    assert entries["inf"]["mean"] == pytest.approx(finite.mean(), rel=1e-12)  # not poisoned
    assert entries["inf"]["std"] == pytest.approx(finite.std(ddof=1), rel=1e-12)
    assert entries["inf"]["max"] == finite.max()
    assert entries["one"]["mean"] == 3.0 and entries["one"]["std"] is None


def test_any_batching_gives_identical_statistics_with_real_blocks():
    """More than three blocks of :data:`BLOCK` values, fed in batches of the streamed writes'
    sizes; numpy's mean and sample standard deviation agree to rounding."""
    n = 3 * st.BLOCK + 123
    table = _table(n, seed=2)
    result = _check(table, (16_384, st.BLOCK + 1))
    for name in ("f", "shifted", "i", "g"):
        values = table[name].drop_null().to_numpy().astype(np.float64)
        entry = next(e for e in result["features"] if e["feature"] == name)
        assert entry["mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert entry["std"] == pytest.approx(values.std(ddof=1), rel=1e-12)
        assert (entry["min"], entry["max"]) == (values.min(), values.max())


def test_at_most_one_block_is_held():
    moments = st._Moments()
    column = pa.array(np.arange(st.BLOCK * 2 + 5, dtype=np.float64))
    moments.update(column)
    assert moments.filled == 5 and len(moments.held) == st.BLOCK and len(moments.sums) == 2
    moments.update(column.slice(0, st.BLOCK - 5))
    assert moments.filled == 0 and len(moments.sums) == 3
    fed = [*range(st.BLOCK * 2 + 5), *range(st.BLOCK - 5)]
    assert moments.entry()["mean"] == math.fsum(fed) / len(fed)
