"""Model-dependent transformations fitted from the train split's batches.

:func:`fit_transformations_streamed` gives what :func:`~feature_store.core.transformations.
fit_transformations` gives for the whole train columns, ``==`` on every statistic, whatever the
batching, in memory bounded by a batch plus what the fit keeps:

* ``min_max_scaler``: the extremes; ``standard_scaler``: the block moments of
  :mod:`feature_store.core.moments` (the whole-column fit uses the same);
* ``robust_scaler``: the exact quartiles, by :mod:`feature_store.core.order_statistics` (a few
  more passes over the batches once the column has more than its gather limit of values);
* ``label_encoder``/``one_hot_encoder``: the distinct values (O(distinct)), turned into pandas
  values as the whole column would be (its dtype follows whether any row is null);
* a Hopsworks ``@udf`` with statistics still gathers its statistics columns whole (its
  statistics hold all 100 percentiles and a histogram); one without reads nothing.

Refusals (non-numeric, empty, non-finite, unorderable) are the whole-column fit's, with the
same messages, decided on the whole column's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from feature_store.core import order_statistics
from feature_store.core import transformations as tr
from feature_store.core.moments import BlockMoments
from feature_store.core.order_statistics import select_ranks

__all__ = ["DistinctValues", "fit_transformations_streamed", "pandas_dtype"]

_SCALERS = ("min_max_scaler", "standard_scaler", "robust_scaler")

Batches = Callable[[], Iterable[pa.RecordBatch | pa.Table]]


def pandas_dtype(kind: pa.DataType, has_nulls: bool) -> Any:
    """The pandas dtype a whole column of Arrow type ``kind`` converts to (``has_nulls``: whether
    any of its rows is null: integers become floats, booleans objects)."""
    probe = pa.nulls(1, kind) if has_nulls else pa.array([], kind)
    return probe.to_pandas().dtype


def _chunks(column: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    return [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in chunks]


class DistinctValues:
    """The distinct values of an Arrow column fed a piece at a time (null included when one
    was), in the order of their first appearance: O(distinct values). Each piece's distinct
    values wait until they are as many as those merged so far, then merge in one pass (so the
    work grows as the values' count times its logarithm, not as the count times the pieces)."""

    def __init__(self, kind: pa.DataType) -> None:
        self._merged = pa.array([], kind)
        self._pending: list[pa.Array] = []
        self._waiting = 0

    def add(self, chunk: pa.Array) -> None:
        found = pc.unique(chunk)
        self._pending.append(found)
        self._waiting += len(found)
        if self._waiting >= max(len(self._merged), 1 << 16):
            self._merge()

    def _merge(self) -> None:
        if self._pending:
            self._merged = pc.unique(pa.concat_arrays([self._merged, *self._pending]))
            self._pending, self._waiting = [], 0

    @property
    def values(self) -> pa.Array:
        """Every distinct value fed so far, in order of first appearance."""
        self._merge()
        return self._merged


class _Fold:
    """What one built-in transformation's fit keeps of its feature's batches."""

    def __init__(self, tf: tr.TransformationFunction, kind: pa.DataType, gather_limit: int):
        self.tf, self.kind, self.gather_limit = tf, kind, gather_limit
        self.nulls = 0
        self.count, self.low, self.high = 0, math.inf, -math.inf
        self.bad: float | None = None
        self.scaler = tf.name in _SCALERS
        value_type = kind.value_type if pa.types.is_dictionary(kind) else kind
        # a column whose null-free form pandas refuses is refused whatever its nulls
        self.numeric = self.scaler and _numeric(pandas_dtype(value_type, False))
        self.moments = BlockMoments() if tf.name == "standard_scaler" else None
        self.kept: list[np.ndarray] | None = [] if tf.name == "robust_scaler" else None
        self.distinct = None if self.scaler else DistinctValues(value_type)

    def update(self, column: pa.Array | pa.ChunkedArray) -> None:
        for chunk in _chunks(column):
            self.nulls += chunk.null_count
            if self.distinct is not None:
                self.distinct.add(chunk)
            if self.numeric:
                self._values(chunk.to_pandas().dropna().to_numpy(dtype="float64"))

    def _values(self, v: np.ndarray) -> None:
        self.count += v.size
        if self.bad is None and v.size:
            self.bad = tr.first_non_finite(v)
        if self.bad is not None or not v.size:
            return  # refused at the end: nothing more to keep
        self.low, self.high = min(self.low, float(v.min())), max(self.high, float(v.max()))
        if self.moments is not None:
            self.moments.feed(v)
        if self.kept is not None:
            self.kept.append(v.copy())
            if self.count > self.gather_limit:
                self.kept = None  # selected in further passes instead

    def fit(self, batches: Batches) -> dict[str, Any]:
        tf = self.tf
        if self.distinct is not None:
            return tf.fit(self._distinct_series())
        tr.check_numeric(tf, pandas_dtype(self.kind, self.nulls > 0))
        tr.check_values(tf, self.count, self.bad)
        if tf.name == "min_max_scaler":
            return {"min": self.low, "max": self.high}
        if self.moments is not None:
            return tr.standard_stats(tf, self.moments.result())
        ranks = tr.quartile_ranks(self.count)
        if self.kept is not None:
            v = np.concatenate(self.kept)
            placed = np.partition(v, ranks)
            return tr.robust_stats(self.count, {k: float(placed[k]) for k in ranks})
        return tr.robust_stats(self.count, select_ranks(
            lambda: _feature_values(batches, tf.feature), ranks, self.count, self.low, self.high,
            self.gather_limit))

    def _distinct_series(self) -> pd.Series:
        """A column with every distinct value once (in order of first appearance) and a null if
        the whole one had any: its pandas form holds the whole column's distinct values, typed
        as the whole column's."""
        assert self.distinct is not None
        values = self.distinct.values
        if self.nulls and not values.null_count:
            values = pa.concat_arrays([values, pa.nulls(1, values.type)])
        if pa.types.is_dictionary(self.kind):
            values = values.dictionary_encode()
        return pd.Series(values.to_pandas(), name=self.tf.feature)


def _numeric(dtype: Any) -> bool:
    return bool(pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))


def _feature_values(batches: Batches, feature: str) -> Iterator[np.ndarray]:
    """The non-null values of ``feature`` as doubles, a batch at a time."""
    for batch in batches():
        for chunk in _chunks(batch.column(feature)):
            yield chunk.to_pandas().dropna().to_numpy(dtype="float64")


def fit_transformations_streamed(tfs: Iterable[Any], schema: pa.Schema, batches: Batches, *,
                                 gather_limit: int | None = None) -> dict[str, dict[str, Any]]:
    """:func:`~feature_store.core.transformations.fit_transformations` of the train split that
    ``batches()`` yields (record batches or tables of ``schema``'s columns, the same sequence on
    every call), reading it a batch at a time (see the module docstring). A robust scaler's
    values are kept and selected in memory up to ``gather_limit`` of them (default
    :data:`~feature_store.core.order_statistics.GATHER_LIMIT`), selected in passes beyond.

    Returns:
        JSON-able statistics keyed by each transformation's ``key``, ``==`` to the whole-column fit.
    """
    tfs = tr.validate_transformations(tfs, schema.names)
    limit = order_statistics.GATHER_LIMIT if gather_limit is None else gather_limit
    folds = {tf.key: _Fold(tf, schema.field(tf.feature).type, limit)
             for tf in tfs if isinstance(tf, tr.TransformationFunction)}
    gathered = list(dict.fromkeys(c for tf in tfs if not isinstance(tf, tr.TransformationFunction)
                                  for c in tf.udf.statistics_features))
    kept: list[pa.Table] = []
    for batch in batches():
        for fold in folds.values():
            fold.update(batch.column(fold.tf.feature))
        if gathered:
            part = batch.select(gathered)
            kept.append(pa.Table.from_batches([part]) if isinstance(part, pa.RecordBatch)
                        else part)
    frame = (pa.concat_tables(kept).to_pandas() if kept
             else schema.empty_table().select(gathered).to_pandas())
    del kept
    return {tf.key: folds[tf.key].fit(batches) if tf.key in folds else tf.fit_frame(frame)
            for tf in tfs}
