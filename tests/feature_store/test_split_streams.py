"""Stratified, group and random splits in bounded memory (``feature_store.core.split_streams``)
give exactly the codes and the refusals of :func:`assign_split_codes` on the whole column, for
every batching, and take every O(rows) array from ``alloc``."""

from __future__ import annotations

import datetime as dt
import tracemalloc
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feature_store.core import split_assignment
from feature_store.core.split_streams import (
    group_split_codes_streamed,
    random_split_codes,
    stratified_split_codes_streamed,
)
from feature_store.core.splits import SplitSpec, assign_split_codes, make_split_spec
from fstrain.kernel.errors import InvalidArgumentError

SIZES: list[dict[str, Any]] = [
    {"test_size": 0.2}, {"test_size": 0.25, "validation_size": 0.15, "three_way": True}]


def _spec(strategy: str, seed: int = 7, sizes: dict[str, Any] | None = None) -> SplitSpec:
    extra = {"group_column": "k"} if strategy == "group" else {}
    return make_split_spec(strategy, seed=seed, **(sizes or SIZES[0]), **extra)


def _cuts(n: int, seed: int) -> Iterator[list[tuple[int, int]]]:
    """Batch bounds: one batch, single rows (small columns), fixed sizes and random cuts with
    empty batches."""
    yield [(0, n)]
    if n <= 60:
        yield [(i, i + 1) for i in range(n)]
    for size in (7, 1000) if n <= 5000 else (1000, 8191):
        yield [(i, min(i + size, n)) for i in range(0, n, size)]
    rng = np.random.default_rng(seed)
    for _ in range(2):
        edges = [0, *np.sort(rng.integers(0, n + 1, rng.integers(1, 8))).tolist(), n]
        yield list(pairwise(edges))


def _reader(column: pd.Series, cuts: list[tuple[int, int]]) -> Callable[[], Iterator[pd.Series]]:
    return lambda: (column.iloc[a:b] for a, b in cuts)


def _streamed(column: pd.Series, spec: SplitSpec, read: Callable[[], Iterator[Any]],
              alloc: Callable[[int, Any], np.ndarray] = np.empty) -> np.ndarray:
    if spec.strategy == "stratified":
        return stratified_split_codes_streamed(read, spec, "k", rows=len(column), alloc=alloc)
    return group_split_codes_streamed(read, spec, rows=len(column), alloc=alloc)


def _whole(column: pd.Series, spec: SplitSpec) -> np.ndarray:
    return assign_split_codes(pd.DataFrame({"k": column}), spec, label_column="k")


def _check(column: pd.Series, spec: SplitSpec, seed: int = 0) -> None:
    """Equal codes, or the same refusal, for every batching."""
    try:
        want = _whole(column, spec)
    except InvalidArgumentError as exc:
        for cuts in _cuts(len(column), seed):
            with pytest.raises(InvalidArgumentError) as got:
                _streamed(column, spec, _reader(column, cuts))
            assert str(got.value) == str(exc)
        return
    for cuts in _cuts(len(column), seed):
        got = _streamed(column, spec, _reader(column, cuts))
        assert got.dtype == np.int8 and np.array_equal(got, want), cuts


def _labels(kind: str, n: int, seed: int) -> pd.Series:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 5, n)
    if kind == "int":
        return pd.Series(k * 3 - 4)
    if kind == "str":
        return pd.Series(np.array(["b", "a", "dd", "c", "e"], dtype=object)[k])
    if kind == "bool":
        return pd.Series(k % 2 == 0)
    if kind == "float-nan":  # NaN is a class of its own
        return pd.Series(np.where(k == 4, np.nan, k / 2))
    if kind == "str-none":
        return pd.Series(np.array(["b", None, "a", "c", None], dtype=object)[k])
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["int", "str", "bool", "float-nan", "str-none"])
@pytest.mark.parametrize("sizes", SIZES)
def test_stratified_codes_equal_the_in_memory_split(kind: str, sizes: dict[str, Any]) -> None:
    for seed, n in ((0, 240), (11, 40)):
        _check(_labels(kind, n, seed), _spec("stratified", seed, sizes), seed)


def test_a_two_class_100k_label_streams_to_the_same_codes() -> None:
    rng = np.random.default_rng(3)
    label = pd.Series((rng.random(100_000) < 0.07).astype(np.int64))
    for sizes in SIZES:
        _check(label, _spec("stratified", 5, sizes), seed=2)


def test_mixed_labels_that_do_not_sort_keep_first_appearance_order() -> None:
    day = dt.date(2024, 1, 1)
    for values in ([1, day, None, 2, 1, day, 2], [b"x", 1.5, "a", None, 1.5, "a", b"x"]):
        column = pd.Series(values * 20, dtype=object)
        with pytest.raises(TypeError):  # the fallback is what this case exercises
            pd.factorize(column, sort=True, use_na_sentinel=False)
        for sizes in SIZES:
            _check(column, _spec("stratified", 1, sizes))
    # numbers among nulls (pandas' sort then keeps their order), numbers and strings (sorted
    # apart), booleans with nulls
    for values in ([3, None, np.nan, 1, 3, 1], [3, "a", None, 1.5, "b", 3],
                   [True, None, False, True]):
        _check(pd.Series(values * 30, dtype=object), _spec("stratified"))


def test_a_class_too_small_is_refused_with_the_in_memory_message_before_any_alloc() -> None:
    column = pd.Series(["a"] * 50 + ["b"] + ["c"] * 40)
    asked: list[int] = []
    with pytest.raises(InvalidArgumentError, match="class 'b' has 1 row"):
        _streamed(column, _spec("stratified"), _reader(column, [(0, 30), (30, 91)]),
                  lambda n, dtype: asked.append(n) or np.empty(n, dtype))
    assert asked == []
    _check(column, _spec("stratified"))
    _check(pd.Series(["a"] * 50 + ["b"] * 2), _spec("stratified", 1, SIZES[1]))


@pytest.mark.parametrize("kind", ["str", "int"])
@pytest.mark.parametrize("sizes", SIZES)
def test_group_codes_equal_the_in_memory_split(kind: str, sizes: dict[str, Any]) -> None:
    rng = np.random.default_rng(4)
    for seed, n in ((0, 300), (9, 50)):
        groups = rng.integers(0, n // 5, n)
        column = pd.Series(groups * 7 if kind == "int" else [f"g{g}" for g in groups])
        _check(column, _spec("group", seed, sizes), seed)


def test_null_groups_and_empty_splits_are_refused_as_in_memory_before_any_alloc() -> None:
    asked: list[int] = []

    def alloc(n: int, dtype: Any) -> np.ndarray:
        asked.append(n)
        return np.empty(n, dtype)

    nulls = pd.Series(["a", None, "b", "c"] * 10 + [None])
    one_group = pd.Series(["a"] * 40)
    for column in (nulls, one_group):
        _check(column, _spec("group"))
        with pytest.raises(InvalidArgumentError, match="null row|is empty"):
            _streamed(column, _spec("group"), _reader(column, [(0, 15), (15, len(column))]), alloc)
    assert asked == []
    with pytest.raises(InvalidArgumentError, match="11 null row"):
        _streamed(nulls, _spec("group"), _reader(nulls, [(0, 41)]))


@pytest.mark.parametrize("sizes", SIZES)
def test_random_codes_equal_the_in_memory_split(sizes: dict[str, Any]) -> None:
    for n, seed in ((1, 0), (10, 1), (997, 2), (50_000, 3)):
        spec = _spec("random", seed, sizes)
        frame = pd.DataFrame(index=pd.RangeIndex(n))
        try:
            want = assign_split_codes(frame, spec)
        except InvalidArgumentError as exc:
            with pytest.raises(InvalidArgumentError) as got:
                random_split_codes(n, spec, alloc=np.empty)
            assert str(got.value) == str(exc)
            continue
        assert np.array_equal(random_split_codes(n, spec, alloc=np.empty), want)
        # the in-memory split shuffles as rng.permutation does
        perm = np.random.default_rng(seed).permutation(n)
        assert (want[perm[:int(n * spec.test_size)]] == spec.splits.index("test")).all()


def _arrow_columns(n: int) -> list[pa.Array]:
    """Columns with nulls in their second half only, so ``to_pandas`` of early batches gives
    another dtype (ints, bools); floats with NaN, null, 0.0 and -0.0; strings; timestamps."""
    rng = np.random.default_rng(8)
    late = np.arange(n) > n // 2

    def holed(values: np.ndarray, share: float) -> list[Any]:
        values = values.astype(object)
        values[late & (rng.random(n) < share)] = None
        return values.tolist()

    floats = np.array([0.0, -0.0, np.nan, 1.5])[rng.integers(0, 4, n)]
    times = pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(rng.integers(0, 3, n), "D")
    return [pa.array(holed(rng.integers(0, 4, n), 0.02), type=pa.int64()),
            pa.array(holed(rng.random(n) < 0.5, 0.03), type=pa.bool_()),
            pa.array(holed(floats, 0.02), type=pa.float64()),
            pa.array(holed(np.array(["x", "y", "z"])[rng.integers(0, 3, n)], 0.05)),
            pa.array(times),
            pa.array(holed(np.array(["q", "p", "r"])[rng.integers(0, 3, n)], 0.05)).cast(
                pa.dictionary(pa.int32(), pa.string()))]


def test_arrow_and_to_pandas_batches_give_the_whole_columns_classes() -> None:
    """Arrow batches (arrays, chunked arrays, record batches) and their ``to_pandas`` (whose
    dtype differs from batch to batch) give the codes of the whole column's ``to_pandas``."""
    n = 3000
    for array in _arrow_columns(n):
        whole = array.to_pandas()
        for length in (97, 1400):
            slices = [array.slice(i, length) for i in range(0, n, length)]
            kinds = [[s.to_pandas() for s in slices], slices,
                     [pa.chunked_array([s[:10], s[10:]]) for s in slices],
                     [pa.record_batch([s], names=["k"]) for s in slices]]
            if pa.types.is_integer(array.type) or pa.types.is_boolean(array.type):
                assert len({b.dtype for b in kinds[0]}) == 2  # the batches' dtypes do differ
            for spec in (_spec("stratified", length), _spec("stratified", 3, SIZES[1]))[
                    :1 if length > 100 else 2]:
                want = _whole(whole, spec)
                for batches in kinds:
                    got = _streamed(whole, spec, lambda b=batches: iter(b))
                    assert np.array_equal(got, want), (array.type, type(batches[0]))
        present = array.filter(pa.array(whole.notna().to_numpy()))  # NaN too
        cuts = [(i, i + 700) for i in range(0, len(present), 700)]
        want = _whole(present.to_pandas(), _spec("group"))
        assert np.array_equal(_streamed(present.to_pandas(), _spec("group"),
                                        lambda p=present, c=cuts: (p.slice(a, b - a) for a, b in c)),
                              want)


def test_one_column_frames_are_read_and_other_batches_refused() -> None:
    column = _labels("str", 200, 1)
    frames = [pd.DataFrame({"k": column.iloc[:90]}), pd.DataFrame({"k": column.iloc[90:]})]
    spec = _spec("stratified")
    assert np.array_equal(_streamed(column, spec, lambda: iter(frames)), _whole(column, spec))
    two = [pd.DataFrame({"k": column, "z": column})]
    with pytest.raises(InvalidArgumentError, match="DataFrame of 2 columns"):
        _streamed(column, spec, lambda: iter(two))
    with pytest.raises(InvalidArgumentError, match="Got a list instead"):
        _streamed(column, spec, lambda: iter([column.tolist()]))
    with pytest.raises(InvalidArgumentError, match="strategy='stratified'"):
        stratified_split_codes_streamed(lambda: iter([column]), _spec("group"), "k", rows=200,
                                        alloc=np.empty)


def test_a_stream_that_changes_between_passes_is_refused() -> None:
    column = _labels("str", 200, 1)
    passes: list[int] = []

    def read() -> Iterator[pd.Series]:
        passes.append(1)
        return iter([column if len(passes) == 1 else column.replace("a", "zz")])

    with pytest.raises(InvalidArgumentError, match="same rows on every pass"):
        _streamed(column, _spec("stratified"), read)
    with pytest.raises(InvalidArgumentError, match="got 200 row.*first pass"):
        stratified_split_codes_streamed(lambda: iter([column]), _spec("stratified"), "k",
                                        rows=201, alloc=np.empty)


def test_alloc_gives_every_o_rows_array_and_a_memmap_gives_the_same_codes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each O(rows) array comes from ``alloc`` (here a disk-backed memmap, which gives the same
    codes): the other memory traced while 600k rows stream in 1,000-row batches (arrays filled
    in 4,096-value chunks) stays below what one byte per row would take."""
    monkeypatch.setattr(split_assignment, "_CHUNK", 1 << 12)
    files: list[tuple[int, Any]] = []

    def on_disk(rows: int, dtype: Any) -> np.ndarray:
        files.append((rows, np.dtype(dtype)))
        return np.memmap(tmp_path / f"a{len(files)}", dtype=dtype, mode="w+", shape=(rows,))

    n = 600_000
    label = pd.Series(np.random.default_rng(5).integers(0, 30, n))
    read = _reader(label, [(i, i + 1000) for i in range(0, n, 1000)])
    largest = int(label.value_counts().max())
    wanted = {"stratified": [(n, np.int8), (largest, np.int32), (n, np.int8)],
              "group": [(n, np.int8)], "random": [(n, np.int32), (n, np.int8)]}
    for strategy, allocated in wanted.items():
        files.clear()
        tracemalloc.start()
        got = (random_split_codes(n, _spec(strategy), alloc=on_disk) if strategy == "random"
               else _streamed(label, _spec(strategy), read, on_disk))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert isinstance(got, np.memmap) and files == allocated, strategy
        assert peak < n * 3 // 4, (strategy, peak)  # measured: 0.1–0.3 byte per row
        assert np.array_equal(got, _whole(label, _spec(strategy))), strategy


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.sampled_from(["a", "b", None, "c"]), min_size=0, max_size=60),
       cuts=st.lists(st.integers(0, 60), max_size=5), seed=st.integers(0, 2**31),
       three_way=st.booleans(), strategy=st.sampled_from(["stratified", "group"]))
def test_any_batching_gives_the_in_memory_codes_or_refusal(
        values: list[str | None], cuts: list[int], seed: int, three_way: bool,
        strategy: str) -> None:
    column = pd.Series(values, dtype=object)
    edges = [0, *sorted(min(c, len(values)) for c in cuts), len(values)]
    spec = _spec(strategy, seed, SIZES[int(three_way)])
    read = _reader(column, list(pairwise(edges)))
    try:
        want = _whole(column, spec)
    except InvalidArgumentError as exc:
        with pytest.raises(InvalidArgumentError) as got:
            _streamed(column, spec, read)
        assert str(got.value) == str(exc)
        return
    assert np.array_equal(_streamed(column, spec, read), want)
