"""Split assignment in memory: the split code of every row under a :class:`SplitSpec`
(:func:`assign_split_codes`, :func:`assign_splits`), and the seeded k-fold indices of
cross-validation (:func:`kfold_indices`). The streamed, bounded-memory assignment
(:mod:`feature_store.core.split_streams`) gives exactly these codes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    did_you_mean,
)
from feature_store.core.split_spec import SplitSpec, empty_split_message, relative_bounds

# --------------------------------------------------------------------------- assignment


def _column(frame: pd.DataFrame, column: str, what: str) -> pd.Series:
    if column not in frame.columns:
        cols = [str(c) for c in frame.columns]
        raise SchemaMismatchError(
            f"{what} column '{column}' is not in the frame (columns: {', '.join(cols)})."
            f"{did_you_mean(str(column), cols)}"
        )
    return frame[column]


def _event_times(frame: pd.DataFrame, spec: SplitSpec, event_time_column: str | None,
                 cache: bool = True) -> pd.Series:
    if event_time_column is None:
        raise InvalidArgumentError(
            f"A time split ({spec.setting_of('test')}) needs an event time, and the data has "
            "none (event_time_column is None). Use a random, stratified or group split, or give "
            "the root feature group an event_time."
        )
    col = _column(frame, event_time_column, "Event time")
    try:
        # epoch milliseconds (Hopsworks' bigint); a bigint column holding nulls reaches pandas
        # as floats, which pd.to_datetime would read as nanoseconds
        if (pd.api.types.is_integer_dtype(col.dtype) or pd.api.types.is_float_dtype(col.dtype)):
            return pd.to_datetime(col, unit="ms", utc=True, cache=cache)
        return pd.to_datetime(col, utc=True, cache=cache)
    except (TypeError, ValueError) as exc:
        raise SchemaMismatchError(
            f"Event time column '{event_time_column}' must hold timestamps. Got dtype {col.dtype} "
            "instead."
        ) from exc


def _cut_sizes(m: int, spec: SplitSpec, event_time_column: str) -> tuple[int, int]:
    """Rows of the test and validation windows of a size-based time split of ``m`` non-null
    event times (``int(m * size)``); refused when a split would be empty."""
    assert spec.test_size is not None
    n_test = int(m * spec.test_size)
    n_val = int(m * spec.validation_size) if spec.three_way and spec.validation_size else 0
    if m == 0 or n_test == 0 or (spec.three_way and n_val == 0) or n_test + n_val >= m:
        empty = ("test" if n_test == 0 else "validation" if spec.three_way and n_val == 0
                 else "train")
        raise InvalidArgumentError(
            f"A time split on '{event_time_column}' (rows with an event time only): "
            f"{empty_split_message(spec, empty, m)}"
        )
    return n_test, n_val


def resolve_time_bounds(
    frame: pd.DataFrame, spec: SplitSpec, *, event_time_column: str
) -> SplitSpec:
    """Turn a size-based time spec into explicit windows (to store with the dataset version).

    The cut points are event times at the sorted positions ``m - n_test`` (and
    ``m - n_test - n_validation``), ``m`` the number of non-null event times and
    ``n_x = int(m * x_size)``. A spec that already has bounds is returned unchanged.
    """
    if spec.strategy != "time":
        raise InvalidArgumentError(
            f"resolve_time_bounds needs strategy='time'. Got strategy={spec.strategy!r} instead."
        )
    if spec.has_time_bounds:
        return spec
    if spec.is_relative:
        times = _event_times(frame, spec, event_time_column).dropna()
        bounds: dict[str, Any] = relative_bounds(spec, None if times.empty else pd.Timestamp(times.max()))
        return replace(spec, **bounds)
    assert spec.test_size is not None
    times = _event_times(frame, spec, event_time_column).dropna()
    m = len(times)
    n_test, n_val = _cut_sizes(m, spec, event_time_column)
    test_start = _order_statistic(times, m - n_test)
    if spec.three_way:
        val_start = _order_statistic(times, m - n_test - n_val)
        return replace(
            spec, test_size=None, validation_size=None, train_end=val_start,
            validation_start=val_start, validation_end=test_start, test_start=test_start,
        )
    return replace(spec, test_size=None, validation_size=None, train_end=test_start,
                   test_start=test_start)


def _order_statistic(times: pd.Series, k: int) -> pd.Timestamp:
    """The ``k``-th smallest of ``times`` (no nulls), as the sorted series' ``iloc[k]`` would
    be, found by a partition in linear time instead of sorting every row."""
    at = int(np.argpartition(times.array.asi8, k)[k])
    return pd.Timestamp(times.iloc[at])


#: split codes: a row's split is ``spec.splits[code]``; :data:`NO_SPLIT` for a dropped row
NO_SPLIT = -1
_TRAIN = 0


def _code(spec: SplitSpec, name: str) -> int:
    return spec.splits.index(name)


def _time_assign(frame: pd.DataFrame, spec: SplitSpec, event_time_column: str | None) -> np.ndarray:
    t = _event_times(frame, spec, event_time_column)
    if not spec.has_time_bounds:
        spec = resolve_time_bounds(frame, spec, event_time_column=event_time_column or "")
    return _time_codes(t, spec)


def _time_codes(t: pd.Series, spec: SplitSpec) -> np.ndarray:
    """Each event time's split code under ``spec``'s explicit windows (row by row)."""
    out = np.full(len(t), NO_SPLIT, dtype=np.int8)
    valid = t.notna().to_numpy()
    for code, name in enumerate(spec.splits):
        start, end = getattr(spec, f"{name}_start"), getattr(spec, f"{name}_end")
        mask = valid.copy()
        if start is not None:
            mask &= (t >= start).to_numpy()
        if end is not None:
            mask &= (t < end).to_numpy()
        out[mask] = code
    if spec.gap is not None and spec.gap > pd.Timedelta(0):
        edges = [spec.train_end] + ([spec.validation_end] if spec.three_way else [])
        for edge in edges:
            if edge is not None:
                out[(valid & (t >= edge).to_numpy() & (t < edge + spec.gap).to_numpy())] = NO_SPLIT
    return out


#: rows a chunked step over an O(rows) array touches at a time (bounded temporaries)
_CHUNK = 1 << 16

#: ``alloc(n, dtype)``: a new (uninitialised) array of ``n`` values, e.g. ``np.empty`` or a
#: disk-backed ``np.memmap``; every O(rows) array of an assignment comes from it
Alloc = Callable[[int, Any], np.ndarray]


def _arange_into(a: np.ndarray) -> np.ndarray:
    """Fill ``a`` with ``0 … len(a)-1`` in chunks (no O(len) temporary); returns ``a``."""
    for lo in range(0, len(a), _CHUNK):
        hi = min(lo + _CHUNK, len(a))
        a[lo:hi] = np.arange(lo, hi, dtype=a.dtype)
    return a


def _scatter(out: np.ndarray, index: np.ndarray, value: int) -> None:
    """``out[index] = value`` in chunks of ``index`` (the cast of a narrow index to intp stays
    chunk-sized)."""
    for lo in range(0, len(index), _CHUNK):
        out[index[lo:lo + _CHUNK]] = value


def _permutation(rng: np.random.Generator, n: int, alloc: Alloc = np.empty) -> np.ndarray:
    """``rng.permutation(n)`` in an ``alloc``ated array, in half the memory below 2**31 rows:
    ``permutation`` shuffles an arange, and the shuffle draws the same random numbers whatever
    the array's dtype or kind (a memmap included), so the permutation is the same."""
    perm = alloc(n, np.int32 if n < 2**31 else np.int64)
    rng.shuffle(_arange_into(perm.view(np.ndarray)))
    return perm


def _random_assign(n: int, spec: SplitSpec, alloc: Alloc = np.empty) -> np.ndarray:
    """A random split's codes: ``int(n*test_size)`` rows of a seeded permutation go to test,
    the next ``int(n*validation_size)`` to validation, the rest to train. Its two O(rows)
    arrays (the permutation and the codes) come from ``alloc``."""
    rng = np.random.default_rng(spec.seed)
    perm = _permutation(rng, n, alloc).view(np.ndarray)
    n_test, n_val = _random_sizes(n, spec)
    out = alloc(n, np.int8)
    view = out.view(np.ndarray)
    view[:] = _TRAIN
    _scatter(view, perm[:n_test], _code(spec, "test"))
    if n_val:
        _scatter(view, perm[n_test:n_test + n_val], _code(spec, "validation"))
    return out


def _random_sizes(n: int, spec: SplitSpec) -> tuple[int, int]:
    """Rows of test and validation in a random split of ``n`` rows."""
    n_test = int(n * (spec.test_size or 0.0))
    n_val = int(n * (spec.validation_size or 0.0)) if spec.three_way else 0
    return n_test, n_val


def _allocate(counts: np.ndarray, size: float, capacity: np.ndarray) -> np.ndarray:
    """Per-class rows for one split: ≥1 each, totals ``int(sum(counts)*size)`` by largest remainder."""
    desired = counts * size
    alloc = np.maximum(np.floor(desired).astype(np.int64), 1)
    alloc = np.minimum(alloc, capacity)
    target = int(counts.sum() * size)
    remainder = desired - np.floor(desired)
    order = np.lexsort((np.arange(len(counts)), -remainder))  # largest remainder first, stable
    deficit = target - int(alloc.sum())
    while deficit > 0:
        progressed = False
        for k in order:
            if deficit == 0:
                break
            if alloc[k] < capacity[k]:
                alloc[k] += 1
                deficit -= 1
                progressed = True
        if not progressed:
            break
    return alloc


def _factorize(values: Any, *, use_na_sentinel: bool) -> tuple[np.ndarray, pd.Index]:
    """``pd.factorize`` with sorted uniques, or in first-appearance order for values that do
    not sort (mixed types)."""
    try:
        return pd.factorize(values, sort=True, use_na_sentinel=use_na_sentinel)
    except TypeError:
        return pd.factorize(values, sort=False, use_na_sentinel=use_na_sentinel)


def _class_quotas(counts: np.ndarray, uniques: Any, spec: SplitSpec,
                  column: str) -> tuple[np.ndarray, np.ndarray]:
    """Per class (``counts[k]`` rows of ``uniques[k]``): the rows of test and of validation;
    a class with fewer rows than splits is refused."""
    n_splits = len(spec.splits)
    small = np.flatnonzero(counts < n_splits)
    if small.size:
        k = small[0]
        raise InvalidArgumentError(
            f"Stratified split on '{column}': class {uniques[k]!r} has {counts[k]} row(s), fewer "
            f"than the {n_splits} splits {spec.splits}; every class needs at least one row per "
            "split. Merge rare classes, drop them or use strategy='random'."
        )
    # each split must leave >= 1 row per class for the splits still to fill
    n_test = _allocate(counts, spec.test_size or 0.0, counts - (n_splits - 1))
    if spec.three_way:
        n_val = _allocate(counts, spec.validation_size or 0.0, counts - n_test - 1)
    else:
        n_val = np.zeros_like(counts)
    return n_test, n_val


def _stratified_assign(labels: pd.Series, spec: SplitSpec, column: str) -> np.ndarray:
    n = len(labels)
    codes, uniques = _factorize(labels, use_na_sentinel=False)
    counts = np.bincount(codes, minlength=len(uniques))
    n_test, n_val = _class_quotas(counts, uniques, spec, column)
    rng = np.random.default_rng(spec.seed)
    out = np.full(n, _TRAIN, dtype=np.int8)
    test, validation = _code(spec, "test"), _code(spec, "validation") if spec.three_way else 0
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for k in range(len(uniques)):
        rows = order[starts[k]:starts[k] + counts[k]]
        rows = rows[rng.permutation(len(rows))]
        out[rows[:n_test[k]]] = test
        out[rows[n_test[k]:n_test[k] + n_val[k]]] = validation
    return out


def _refuse_null_groups(nulls: int, spec: SplitSpec) -> None:
    if nulls:
        raise InvalidArgumentError(
            f"Group split on '{spec.group_column}': the group column must not be null. Got "
            f"{nulls} null row(s) instead. Fill or drop them first."
        )


def _group_splits(sizes: np.ndarray, n: int, spec: SplitSpec) -> np.ndarray:
    """Each group's split code (``sizes[g]`` rows in group ``g``, ``n`` rows in all): groups
    in seeded random order fill test, then validation, each up to ``int(n*size)`` rows."""
    rng = np.random.default_rng(spec.seed)
    perm = rng.permutation(len(sizes))
    targets = [(_code(spec, "test"), int(n * (spec.test_size or 0.0)))]
    if spec.three_way:
        targets.append((_code(spec, "validation"), int(n * (spec.validation_size or 0.0))))
    group_split = np.full(len(sizes), _TRAIN, dtype=np.int8)
    i = 0
    for code, target in targets:
        filled = 0
        while filled < target and i < len(perm):
            group_split[perm[i]] = code
            filled += sizes[perm[i]]
            i += 1
    return group_split


def _group_assign(groups: pd.Series, spec: SplitSpec) -> np.ndarray:
    _refuse_null_groups(int(groups.isna().sum()), spec)
    codes, uniques = _factorize(groups, use_na_sentinel=True)
    sizes = np.bincount(codes, minlength=len(uniques))
    return _group_splits(sizes, len(groups), spec)[codes]


def assign_splits(
    frame: pd.DataFrame,
    spec: SplitSpec,
    *,
    event_time_column: str | None = None,
    label_column: str | None = None,
) -> np.ndarray:
    """The split name of every row of ``frame`` (``None`` for rows dropped by a gap or window).

    Args:
        frame: rows already sorted deterministically by the caller.
        spec: from :func:`make_split_spec`.
        event_time_column: the root feature group's event time (``time`` strategy).
        label_column: stratification column when ``spec.stratify_column`` is ``None``.

    Returns:
        An object array of ``"train"``/``"validation"``/``"test"``/``None``, one per row.

    Raises:
        InvalidArgumentError: a split comes out empty, a class is too small to stratify, the
            event time or stratification column is not given.
        SchemaMismatchError: a named column is not in ``frame``.
    """
    codes = assign_split_codes(frame, spec, event_time_column=event_time_column,
                               label_column=label_column)
    names = np.array([*spec.splits, None], dtype=object)  # NO_SPLIT (-1) picks the last
    return names[codes]


def assign_split_codes(
    frame: pd.DataFrame,
    spec: SplitSpec,
    *,
    event_time_column: str | None = None,
    label_column: str | None = None,
) -> np.ndarray:
    """:func:`assign_splits` as one byte per row: the index of the row's split in
    ``spec.splits``, :data:`NO_SPLIT` for a dropped row (what out-of-core creation holds for
    every row, instead of an object array)."""
    if not isinstance(spec, SplitSpec):
        raise InvalidArgumentError(
            f"spec must be a SplitSpec from make_split_spec(). Got {type(spec).__name__} instead."
        )
    if spec.strategy == "time":
        out = _time_assign(frame, spec, event_time_column)
    elif spec.strategy == "random":
        out = _random_assign(len(frame), spec)
    elif spec.strategy == "stratified":
        column = spec.stratify_column or label_column
        if column is None:
            raise InvalidArgumentError(
                "A stratified split needs a column: pass label_column or stratify_column. "
                "Got neither instead."
            )
        out = _stratified_assign(_column(frame, column, "Stratification"), spec, column)
    elif spec.strategy == "group":
        assert spec.group_column is not None
        out = _group_assign(_column(frame, spec.group_column, "Group"), spec)
    else:  # pragma: no cover - make_split_spec rejects it
        raise InvalidArgumentError(f"Unknown split strategy {spec.strategy!r}.")
    _check_nonempty(out, spec)
    return out


#: codes compared at a time when checking that no split is empty (the codes may be a mapped
#: file of 100M rows: a comparison of them whole would take a byte per row)
_CHECK_BLOCK = 1 << 20


def _check_nonempty(out: np.ndarray, spec: SplitSpec) -> None:
    seen = np.zeros(len(spec.splits), dtype=bool)
    for start in range(0, len(out), _CHECK_BLOCK):
        block = np.asarray(out[start:start + _CHECK_BLOCK])
        for missing in np.flatnonzero(~seen):
            seen[missing] = bool((block == missing).any())
        if seen.all():
            return
    _refuse_empty(seen.tolist(), len(out), spec)


def _refuse_empty(present: Sequence[bool], rows: int, spec: SplitSpec) -> None:
    """Refuse a split assignment of ``rows`` rows in which split ``k`` has no row
    (``present[k]`` false)."""
    for name, has_rows in zip(spec.splits, present):
        if not has_rows:
            raise InvalidArgumentError(empty_split_message(spec, name, rows))


# --------------------------------------------------------------------------- k-fold


def kfold_indices(
    n_rows: int, k: int, seed: int, stratify: Sequence[Any] | np.ndarray | pd.Series | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Deterministic (stratified) k-fold: ``k`` pairs ``(train_idx, val_idx)`` of sorted indices.

    Every row is in exactly one validation fold; fold sizes differ by at most one. With
    ``stratify`` the rows of each class are shuffled and dealt round-robin over the folds, so every
    fold holds each class's count ``±1``; a class with fewer than ``k`` rows is refused.
    """
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 0:
        raise InvalidArgumentError(f"n_rows must be a non-negative integer. Got {n_rows!r} instead.")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise InvalidArgumentError(f"k must be an integer of at least 2. Got {k!r} instead.")
    if k > n_rows:
        raise InvalidArgumentError(
            f"k must be at most the number of rows ({n_rows}) so no fold is empty. Got {k} instead."
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgumentError(f"seed must be a non-negative integer. Got {seed!r} instead.")
    rng = np.random.default_rng(seed)
    fold = np.empty(n_rows, dtype=np.int64)
    if stratify is None:
        perm = rng.permutation(n_rows)
        fold[perm] = np.arange(n_rows) % k
    else:
        labels = pd.Series(np.asarray(stratify, dtype=object) if not isinstance(stratify, pd.Series)
                           else stratify.to_numpy())
        if len(labels) != n_rows:
            raise InvalidArgumentError(
                f"stratify must have one value per row ({n_rows}). Got {len(labels)} instead."
            )
        try:
            codes, uniques = pd.factorize(labels, sort=True, use_na_sentinel=False)
        except TypeError:
            codes, uniques = pd.factorize(labels, sort=False, use_na_sentinel=False)
        counts = np.bincount(codes, minlength=len(uniques))
        small = np.flatnonzero(counts < k)
        if small.size:
            c = small[0]
            raise InvalidArgumentError(
                f"Stratified k-fold: class {uniques[c]!r} has {counts[c]} row(s), fewer than "
                f"k={k}; every class must appear in every fold. Lower k or merge rare classes."
            )
        order = np.argsort(codes, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        dealt = np.concatenate([
            rng.permutation(order[starts[c]:starts[c] + counts[c]]) for c in range(len(uniques))
        ])
        fold[dealt] = np.arange(n_rows) % k
    idx = np.arange(n_rows)
    return [(idx[fold != f], idx[fold == f]) for f in range(k)]
