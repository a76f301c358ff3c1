"""Split assignment in bounded memory (out-of-core creation), for every strategy.

Each function returns exactly the codes :func:`feature_store.core.splits.assign_split_codes`
gives on the whole key column (one byte per row: the row's index in ``spec.splits``), with the
same refusals and the same messages, but reads the column batch by batch:

* ``read()`` returns the key column's batches, the same rows in the same order on every call:
  pandas Series (a one-column DataFrame, as ``RecordBatch.to_pandas()`` gives, is taken as its
  only column), or Arrow arrays (``RecordBatch.column(0)``; a one-column RecordBatch or Table
  is taken as its column): string ones are factorized in Arrow and only their distinct values
  go to pandas (for string keys, less CPU than ``to_pandas`` batches). The classes are
  those of the whole column's ``to_pandas``: pandas batches may differ in dtype the way
  ``to_pandas`` makes them (an integer batch holding a null arrives as floats, a boolean one as
  objects). Categorical (Arrow dictionary) keys are ordered by their categories, as in memory,
  when every batch has the same categories.
* ``alloc(n, dtype)`` allocates every O(rows) array: the codes returned, a permutation, the
  per-class occurrence codes. The local backend passes a disk-backed ``np.memmap``; tests may
  pass ``np.empty``. Besides them, memory holds O(distinct values + one batch).

The time split (:func:`time_split_codes_streamed`) reads the event-time column the same
way: its size-based cut points are exact order statistics found in radix passes.

Every refusal (a null group, a class too small to stratify, an empty split, a stream that
changes between passes) comes before the first ``alloc``, so a refused split writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa

from feature_store.core.order_statistics import GATHER_LIMIT, select_key_ranks
from feature_store.core.split_assignment import (
    Alloc,
    _TRAIN,
    _arange_into,
    _check_nonempty,
    _class_quotas,
    _code,
    _cut_sizes,
    _event_times,
    _factorize,
    _group_splits,
    _random_assign,
    _random_sizes,
    _refuse_empty,
    _refuse_null_groups,
    _scatter,
    _time_codes,
)
from feature_store.core.split_spec import SplitSpec, relative_bounds
from fstrain.kernel.errors import InvalidArgumentError

__all__ = ["group_split_codes_streamed", "random_split_codes", "stratified_split_codes_streamed",
           "time_split_codes_streamed"]

#: one batch of the key column (see the module docstring)
Batch: TypeAlias = "pd.Series | pd.DataFrame | pa.Array | pa.ChunkedArray | pa.RecordBatch | pa.Table"
#: ``read()``: the key column's batches, the same rows in the same order on every call
Read = Callable[[], Iterable[Batch]]


def random_split_codes(rows: int, spec: SplitSpec, *, alloc: Alloc) -> np.ndarray:
    """:func:`assign_split_codes` of a random split of ``rows`` rows: the seeded permutation
    (4 bytes per row below 2**31 rows) and the codes come from ``alloc``; an empty split is
    refused before either is allocated."""
    _check_strategy(spec, "random", "random_split_codes")
    n_test, n_val = _random_sizes(rows, spec)
    sizes = {"train": rows - n_test - n_val, "validation": n_val, "test": n_test}
    _refuse_empty([sizes[name] > 0 for name in spec.splits], rows, spec)
    return _random_assign(rows, spec, alloc)


def stratified_split_codes_streamed(read: Read, spec: SplitSpec, column: str, *, rows: int,
                                    alloc: Alloc) -> np.ndarray:
    """:func:`assign_split_codes` of a stratified split on ``column`` (named in messages), from
    its batches, in two passes over ``read()``.

    Pass 1 counts the classes (nulls are a class). Each class's rows are dealt from the seeded
    permutation of its occurrences, in class order as the in-memory split draws them, into an
    occurrence-code array laid out class by class (segment ``k``: what class ``k``'s ``j``-th
    row in row order gets). Pass 2 gives each row its occurrence's code, keeping a running
    count per class. From ``alloc``: the codes and the occurrence codes (a byte per row each)
    and one permutation as long as the largest class (4 bytes per row)."""
    _check_strategy(spec, "stratified", "stratified_split_codes_streamed")
    seen = _Uniques.counted(read, rows, use_na_sentinel=False)
    rank, classes = seen.sorted_rank()
    counts = np.bincount(rank, weights=seen.counts, minlength=len(classes)).astype(np.int64)
    n_test, n_val = _class_quotas(counts, classes, spec, column)
    sizes = {"train": int((counts - n_test - n_val).sum()), "validation": int(n_val.sum()),
             "test": int(n_test.sum())}
    _refuse_empty([sizes[name] > 0 for name in spec.splits], rows, spec)
    occurrences = _dealt_occurrences(counts, n_test, n_val, spec, alloc)
    out = alloc(rows, np.int8)
    starts = np.cumsum(counts) - counts
    taken = np.zeros(len(counts), dtype=np.int64)  # rows of each class placed so far
    view, dealt = out.view(np.ndarray), occurrences.view(np.ndarray)
    for at, codes, found in seen.batches(read, rows):
        placed = _occurrence_index(codes, rank[found], starts, taken)
        view[at:at + len(codes)] = dealt[placed]
    return out


def group_split_codes_streamed(read: Read, spec: SplitSpec, *, rows: int,
                               alloc: Alloc) -> np.ndarray:
    """:func:`assign_split_codes` of a group split on ``spec.group_column`` from its batches,
    in two passes over ``read()``: pass 1 counts each group's rows (and refuses nulls), the
    groups are dealt to the splits as in memory, pass 2 writes each row its group's split. The
    codes come from ``alloc``; the groups, their sizes and their seeded permutation are held
    in memory (O(groups), as ``rng.permutation(n_groups)`` needs)."""
    _check_strategy(spec, "group", "group_split_codes_streamed")
    seen = _Uniques.counted(read, rows, use_na_sentinel=True)
    _refuse_null_groups(seen.nulls, spec)
    rank, groups = seen.sorted_rank()
    sizes = np.bincount(rank, weights=seen.counts, minlength=len(groups)).astype(np.int64)
    group_split = _group_splits(sizes, rows, spec)
    present = np.bincount(group_split, weights=sizes, minlength=len(spec.splits)) > 0
    _refuse_empty([bool(present[code]) for code in range(len(spec.splits))], rows, spec)
    split_of = group_split[rank]  # by first appearance
    out = alloc(rows, np.int8)
    view = out.view(np.ndarray)
    for at, codes, found in seen.batches(read, rows):
        view[at:at + len(codes)] = split_of[found][codes]
    return out


# --------------------------------------------------------------------------- helpers


def _check_strategy(spec: SplitSpec, strategy: str, function: str) -> None:
    if not isinstance(spec, SplitSpec) or spec.strategy != strategy:
        got = spec.strategy if isinstance(spec, SplitSpec) else type(spec).__name__
        raise InvalidArgumentError(
            f"{function} needs a SplitSpec with strategy={strategy!r}. Got {got!r} instead."
        )


def _local_codes(batch: Batch, use_na_sentinel: bool) -> tuple[np.ndarray, pd.Index]:
    """``pd.factorize(values, sort=False)`` of a batch's values as pandas sees them: a code per
    row and the batch's distinct values in first-appearance order. An Arrow batch of strings
    is dictionary-encoded in Arrow and only its dictionary goes to pandas (which merges what
    pandas takes as equal); other Arrow batches go through ``to_pandas`` (zero-copy for numbers
    without nulls, and pandas hashes numbers faster than Arrow's dictionary encoding)."""
    column = _column(batch)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column, pa.Array) and _is_text(column.type):
        encoded = column.dictionary_encode(null_encoding="encode")
        merged, values = pd.factorize(encoded.dictionary.to_pandas(), sort=False,
                                      use_na_sentinel=use_na_sentinel)
        return merged[encoded.indices.to_numpy(zero_copy_only=False)], values
    if isinstance(column, pa.Array):
        column = column.to_pandas()
    return pd.factorize(column, sort=False, use_na_sentinel=use_na_sentinel)


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t))


def _column(batch: Batch) -> pd.Series | pa.Array | pa.ChunkedArray:
    """A batch's one column."""
    if isinstance(batch, pd.DataFrame | pa.RecordBatch | pa.Table) and batch.shape[1] == 1:
        batch = batch.iloc[:, 0] if isinstance(batch, pd.DataFrame) else batch.column(0)
    if not isinstance(batch, pd.Series | pa.Array | pa.ChunkedArray):
        shape = f" of {batch.shape[1]} columns" if hasattr(batch, "shape") else ""
        raise InvalidArgumentError(
            f"A streamed split reads the key column's batches as pandas Series or Arrow arrays "
            f"(or one-column frames, record batches or tables). Got a "
            f"{type(batch).__name__}{shape} instead."
        )
    return batch


def _dealt_occurrences(counts: np.ndarray, n_test: np.ndarray, n_val: np.ndarray,
                       spec: SplitSpec, alloc: Alloc) -> np.ndarray:
    """The code of each class's ``j``-th occurrence, class by class: the in-memory split gives
    test to the rows at the first ``n_test[k]`` positions of ``rng.permutation(counts[k])``
    (drawn per class in class order), validation to the next ``n_val[k]``; a shuffled arange
    draws the same permutation."""
    occurrences = alloc(int(counts.sum()), np.int8)
    dealt = occurrences.view(np.ndarray)
    largest = int(counts.max())
    scratch = alloc(largest, np.int32 if largest < 2**31 else np.int64).view(np.ndarray)
    rng = np.random.default_rng(spec.seed)
    test, validation = _code(spec, "test"), _code(spec, "validation") if spec.three_way else 0
    start = 0
    for count, k_test, k_val in zip(counts.tolist(), n_test.tolist(), n_val.tolist()):
        perm = _arange_into(scratch[:count])
        rng.shuffle(perm)
        segment = dealt[start:start + count]
        segment[:] = _TRAIN
        _scatter(segment, perm[:k_test], test)
        _scatter(segment, perm[k_test:k_test + k_val], validation)
        start += count
    return occurrences


def _occurrence_index(codes: np.ndarray, classes: np.ndarray, starts: np.ndarray,
                      taken: np.ndarray) -> np.ndarray:
    """Each batch row's place in the occurrence-code array: its class's segment start plus
    the rows of its class before it (earlier batches: ``taken``, which is advanced). ``codes``
    are the batch's local codes, ``classes`` the class of each local code."""
    present, local = np.unique(classes, return_inverse=True)
    row_class = local[codes]
    order = np.argsort(row_class.astype(_narrow(len(present))), kind="stable")
    per_class = np.bincount(row_class, minlength=len(present))
    first = np.cumsum(per_class) - per_class  # where each class's rows start in ``order``
    base = starts[present] + taken[present] - first
    placed = np.empty(len(codes), dtype=np.int64)
    placed[order] = np.arange(len(codes)) + np.repeat(base, per_class)
    taken[present] += per_class
    return placed


def _narrow(n: int) -> type[np.unsignedinteger[Any]]:
    """The smallest unsigned type holding ``0 … n-1`` (numpy's stable sort of ≤16-bit
    integers is a radix sort)."""
    return np.uint8 if n <= 1 << 8 else np.uint16 if n <= 1 << 16 else np.uint64


class _Uniques:
    """The distinct values of a streamed column in first-appearance order and their row
    counts: what ``pd.factorize(column, sort=False)`` gives on the whole column, held in
    O(distinct values). While counting, the values sit in a few Indexes of geometric sizes,
    merged like a binary counter, so a value is re-hashed O(log distinct) times, not once per
    batch."""

    def __init__(self, use_na_sentinel: bool) -> None:
        self.use_na_sentinel = use_na_sentinel
        self.levels: list[tuple[int, pd.Index]] = []  # (first value's number, values)
        self.total = 0
        self.counts = np.zeros(0, dtype=np.int64)
        self.nulls = 0

    @classmethod
    def counted(cls, read: Read, rows: int, *, use_na_sentinel: bool) -> _Uniques:
        """One pass over ``read()``; the batches must hold ``rows`` rows."""
        seen = cls(use_na_sentinel)
        n = 0
        for batch in read():
            n += seen.add(batch)
        _check_rows(n, rows, "first")
        seen.levels = [(0, seen.uniques())] if seen.levels else []
        return seen

    def add(self, batch: Batch) -> int:
        """Count one batch's values; returns its rows."""
        codes, values = _local_codes(batch, self.use_na_sentinel)
        rows = len(codes)
        found = self.find(values)
        new = np.flatnonzero(found < 0)
        if new.size:
            found[new] = np.arange(self.total, self.total + new.size)
            self.push(values[new])
        if codes.size and codes.min() < 0:  # nulls (only with use_na_sentinel)
            self.nulls += int(np.count_nonzero(codes < 0))
            codes = codes[codes >= 0]
        self.counts[found] += np.bincount(codes, minlength=len(values))
        return rows

    def find(self, values: pd.Index) -> np.ndarray:
        """The number of each of ``values`` (distinct), -1 for one not seen."""
        found = np.full(len(values), -1, dtype=np.int64)
        for offset, level in self.levels:
            missing = np.flatnonzero(found < 0)
            if not missing.size:
                break
            at = level.get_indexer(values[missing])
            hit = at >= 0
            found[missing[hit]] = offset + at[hit]
        return found

    def push(self, values: pd.Index) -> None:
        """Number new values after the ones seen."""
        self.levels.append((self.total, values))
        while len(self.levels) > 1 and len(self.levels[-2][1]) <= len(self.levels[-1][1]):
            (offset, older), (_, newer) = self.levels[-2:]
            self.levels[-2:] = [(offset, _concat([older, newer]))]
        self.total += len(values)
        if self.total > len(self.counts):
            grown = np.zeros(max(self.total, 2 * len(self.counts)), dtype=np.int64)
            grown[:len(self.counts)] = self.counts
            self.counts = grown

    def uniques(self) -> pd.Index:
        """Every value seen, in first-appearance order."""
        if not self.levels:
            return pd.Index([])
        return _concat([level for _, level in self.levels])

    def sorted_rank(self) -> tuple[np.ndarray, pd.Index]:
        """Each value's class number in the in-memory split's order (sorted, or first
        appearance for values that do not sort) and the classes in that order: the uniques
        are factorized exactly as the whole column's are."""
        self.counts = self.counts[:self.total]
        rank, classes = _factorize(self.uniques(), use_na_sentinel=self.use_na_sentinel)
        return rank, classes

    def batches(self, read: Read, rows: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Another pass over ``read()``: each batch's first row, its rows' local codes and each
        local code's value number."""
        at = 0
        for batch in read():
            codes, values = _local_codes(batch, self.use_na_sentinel)
            found = self.find(values)
            if (found < 0).any() or at + len(codes) > rows:
                raise InvalidArgumentError(
                    "A streamed split's read() must give the same rows on every pass. Its second "
                    f"pass gave {'values the first did not' if (found < 0).any() else 'more rows'}"
                    f" after row {at} instead."
                )
            yield at, codes, found
            at += len(codes)
        _check_rows(at, rows, "second")


def _concat(parts: list[pd.Index]) -> pd.Index:
    """The values of ``parts`` in one Index of the dtype their column would have (int and
    float batches give floats, bool and object ones objects), without ``Index.append``'s
    inference (which turns objects holding numbers into floats, as the column is not)."""
    if len(parts) == 1:
        return parts[0]
    joined = pd.concat([pd.Series(p, copy=False) for p in parts], ignore_index=True)
    return pd.Index(joined, dtype=joined.dtype)


def _check_rows(n: int, rows: int, which: str) -> None:
    if n != rows:
        raise InvalidArgumentError(
            f"A streamed split of {rows} row(s) got {n} row(s) from read()'s {which} pass. "
            "read() must give the same rows on every pass."
        )


# --------------------------------------------------------------------------- streamed time split

#: a size-based cut gathers its candidate event times once at most this many remain
_GATHER_LIMIT = GATHER_LIMIT


def time_split_codes_streamed(
    read: Callable[[], Iterable[pd.DataFrame]],
    spec: SplitSpec,
    *,
    event_time_column: str,
    gather_limit: int = _GATHER_LIMIT,
    rows: int | None = None,
    alloc: Callable[[int, Any], np.ndarray] | None = None,
) -> tuple[SplitSpec, np.ndarray]:
    """:func:`assign_split_codes` of a time split from batches, without holding the event-time
    column whole: ``read()`` yields the rows' batches (frames holding ``event_time_column``) in
    the same order on every call. The cut times are found in a few passes (the maximum for a
    relative spec; for a size-based one a radix selection of the order statistics that
    :func:`resolve_time_bounds` takes, gathering a cut's candidates once at most
    ``gather_limit`` remain), then the codes batch by batch. Returns the spec the codes used
    (a relative one resolved to dates, as :func:`resolve_time_bounds` gives) and the codes:
    with ``rows`` (how many ``read()`` yields) and ``alloc(n, dtype)``, written batch by batch
    into ``alloc(rows, int8)`` (for example an array mapped from a file), else concatenated."""
    if spec.strategy != "time":
        raise InvalidArgumentError(
            f"time_split_codes_streamed needs strategy='time'. Got strategy={spec.strategy!r} "
            "instead."
        )

    def times() -> Iterator[pd.Series]:
        for batch in read():
            # no cache of unique values: its sampling costs each batch what it costs a column
            yield _event_times(batch, spec, event_time_column, cache=False)

    resolved, whole = spec, None
    if not spec.has_time_bounds:
        m, lo, hi, last, whole = _time_range(times(), gather_limit)
        if spec.is_relative:
            bounds: dict[str, Any] = relative_bounds(spec, last)
            resolved = replace(spec, **bounds)
        else:
            kept = whole
            resolved = _streamed_size_bounds(times if kept is None else lambda: iter([kept]),
                                             spec, event_time_column, (m, lo, hi, last),
                                             gather_limit)
    out = _coded(times() if whole is None else iter([whole]), resolved, rows, alloc)
    _check_nonempty(out, resolved if spec.is_relative else spec)  # the spec creation passes
    return resolved, out


def _refuse_row_count(got: str, rows: int) -> None:
    raise InvalidArgumentError(
        f"A streamed time split of {rows} row(s) got {got} row(s) from read()'s codes pass. "
        "read() must give the same rows on every pass."
    )


def _coded(times: Iterator[pd.Series], spec: SplitSpec, rows: int | None,
           alloc: Callable[[int, Any], np.ndarray] | None) -> np.ndarray:
    """The codes of every batch of ``times`` under ``spec``'s explicit windows: into
    ``alloc(rows, int8)`` when given, else concatenated."""
    if rows is None or alloc is None:
        parts = [_time_codes(t, spec) for t in times]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int8)
    out = alloc(rows, np.int8)
    offset = 0
    for t in times:
        if offset + len(t) > rows:
            _refuse_row_count(f"more than {rows}", rows)
        out[offset:offset + len(t)] = _time_codes(t, spec)
        offset += len(t)
    if offset != rows:
        _refuse_row_count(str(offset), rows)
    return out


def _time_range(batches: Iterable[pd.Series], gather_limit: int
                ) -> tuple[int, int, int, pd.Timestamp | None, pd.Series | None]:
    """The count, smallest and largest (as int64) and the largest (as a timestamp) of the
    non-null times; and every time (nulls included) when there are at most ``gather_limit``
    (no further pass is needed), else None."""
    m, lo, hi, last = 0, 0, 0, None
    kept: list[pd.Series] | None = []
    rows = 0
    for t in batches:
        rows += len(t)
        if kept is not None and rows > gather_limit:
            kept = None
        elif kept is not None:
            kept.append(t)
        t = t.dropna()
        if t.empty:
            continue
        v = t.array.asi8
        top = int(v.argmax())
        if m == 0 or int(v[top]) > hi:
            hi, last = int(v[top]), pd.Timestamp(t.iloc[top])
        lo = int(v.min()) if m == 0 else min(lo, int(v.min()))
        m += len(v)
    return m, lo, hi, last, pd.concat(kept) if kept else None


def _streamed_size_bounds(times: Callable[[], Iterator[pd.Series]], spec: SplitSpec,
                          event_time_column: str,
                          span: tuple[int, int, int, pd.Timestamp | None],
                          gather_limit: int) -> SplitSpec:
    """:func:`resolve_time_bounds` of a size-based spec from streamed times; ``span`` is
    :func:`_time_range`'s count, smallest and largest (as int64) and largest time."""
    assert spec.test_size is not None
    m, lo, hi, last = span
    n_test, n_val = _cut_sizes(m, spec, event_time_column)
    assert last is not None  # m > 0, or _cut_sizes refuses
    ks = [m - n_test] + ([m - n_test - n_val] if spec.three_way else [])
    test_start, *rest = _streamed_order_statistics(times, ks, m, lo, hi, gather_limit, last)
    if spec.three_way:
        (val_start,) = rest
        return replace(
            spec, test_size=None, validation_size=None, train_end=val_start,
            validation_start=val_start, validation_end=test_start, test_start=test_start,
        )
    return replace(spec, test_size=None, validation_size=None, train_end=test_start,
                   test_start=test_start)


def _streamed_order_statistics(times: Callable[[], Iterator[pd.Series]], ks: list[int], m: int,
                               lo: int, hi: int, gather_limit: int,
                               like: pd.Timestamp) -> list[pd.Timestamp]:
    """The ``k``-th smallest non-null time for each of ``ks``, as :func:`_order_statistic` on
    the whole column gives: the :func:`~feature_store.core.order_statistics.select_key_ranks`
    of the times' int64 ticks (``lo`` and ``hi`` their smallest and largest), as timestamps of
    ``like``'s unit and zone (the times' own)."""
    found = select_key_ranks(lambda: (t.dropna().array.asi8 for t in times()), ks, m, lo, hi,
                             gather_limit)
    return [pd.Timestamp(np.datetime64(found[k], like.unit)).tz_localize(like.tz) for k in ks]
