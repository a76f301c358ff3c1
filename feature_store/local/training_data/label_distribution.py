"""The label distributions a training-dataset version records per split, counted a batch at a
time (in memory bounded by a batch plus O(distinct values)), the same for a split held in memory
and one read from its file, whatever the batching.

Per label, as pandas sees the whole column (its dtype follows whether any row is null):

* at most :data:`DISTINCT_LIMIT` distinct non-null values: ``value_counts(dropna=False)``
  sorted by value, keys as pandas prints them (nulls as ``None``/``nan``/``NaT``);
* more, numbers: ``mean`` and sample ``std`` (ddof 1) of the non-null values, from the block
  moments of :mod:`feature_store.core.moments` (a function of the values' sequence only);
  ``±inf`` values give pandas' ``inf``/``-inf``/``nan`` mean and a ``nan`` std, sums that
  overflow a double ``nan`` for both;
* more, anything else (free text): the ``distinct`` non-null values and the ``missing`` ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from feature_store.core.moments import BlockMoments
from feature_store.core.transformation_fit import DistinctValues, pandas_dtype
from feature_store.local.training_data.training_data_stream import open_parquet

__all__ = ["DISTINCT_LIMIT", "file_label_distribution", "label_distribution", "pd_numeric"]

#: labels with at most this many distinct values record their value counts
DISTINCT_LIMIT = 50
#: rows per batch read from a split file
BATCH_ROWS = 1 << 20
_NAN = object()  # the key of NaN values (equal to one another, unlike float NaNs)


def pd_numeric(column: Any) -> bool:
    """Whether a pandas column (or dtype) holds numbers (booleans excluded)."""
    return bool(pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column))


class _Label:
    """What one label's distribution keeps of its batches."""

    def __init__(self, kind: pa.DataType) -> None:
        self.kind = kind.value_type if pa.types.is_dictionary(kind) else kind
        self.nulls = 0
        self.counts: dict[Any, int] | None = {}  # by value, in order of first appearance
        self.numeric = pd_numeric(pandas_dtype(self.kind, False))
        self.moments = BlockMoments() if self.numeric else None
        self.nan = 0
        self.infinities: set[float] = set()
        self.distinct = None if self.numeric else DistinctValues(self.kind)

    def update(self, column: pa.Array | pa.ChunkedArray) -> None:
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        for chunk in chunks:
            if pa.types.is_dictionary(chunk.type):
                chunk = chunk.dictionary_decode()
            self.nulls += chunk.null_count
            self._count(chunk)
            if self.distinct is not None:
                self.distinct.add(chunk)
            if self.moments is not None:
                x = chunk.cast(pa.float64(), safe=False).drop_null().to_numpy()
                finite = np.isfinite(x)
                if not finite.all():
                    self.nan += int(np.isnan(x).sum())
                    self.infinities.update(float(v) for v in np.unique(x[np.isinf(x)]))
                    x = x[finite]
                self.moments.feed(x)

    def _count(self, chunk: pa.Array) -> None:
        """Add the chunk's value counts while the label has few distinct values."""
        if self.counts is None:
            return
        if pc.count_distinct(chunk, mode="all").as_py() > DISTINCT_LIMIT + 3:
            self.counts = None  # (null and NaN are no values to pandas; -0.0 and 0.0 are one)
            return
        found = pc.value_counts(chunk)
        for value, count in zip(found.field("values").to_pylist(),
                                found.field("counts").to_pylist(), strict=True):
            key = _NAN if isinstance(value, float) and math.isnan(value) else value
            self.counts[key] = self.counts.get(key, 0) + count
        if sum(k is not None and k is not _NAN for k in self.counts) > DISTINCT_LIMIT:
            self.counts = None

    def result(self) -> dict[str, Any]:
        if self.counts is not None:
            return _value_counts(self.counts, self.kind)
        if self.moments is not None:
            return self._moments()
        assert self.distinct is not None
        values = self.distinct.values
        return {"distinct": len(values) - values.null_count, "missing": self.nulls}

    def _moments(self) -> dict[str, Any]:
        assert self.moments is not None
        if self.infinities:  # pandas' sums: inf, -inf, or nan for both
            mean = next(iter(self.infinities)) if len(self.infinities) == 1 else math.nan
            return {"mean": float(mean), "std": math.nan}
        found = self.moments.result()
        if found is None:
            return {"mean": math.nan, "std": math.nan}
        return {"mean": found.mean,
                "std": math.sqrt(found.m2 / (found.n - 1)) if found.n > 1 else math.nan}


def _value_counts(counts: dict[Any, int], kind: pa.DataType) -> dict[str, int]:
    """``counts`` as pandas' ``value_counts(dropna=False).sort_index()`` of the whole column
    gives them: the values made pandas values as the whole column's would be (a null among
    them if it had one), merged and printed as value_counts merges and prints them."""
    keys = [math.nan if k is _NAN else k for k in counts]
    series = pa.array(keys, kind).to_pandas()
    index = series.value_counts(dropna=False, sort=False).index
    codes, uniques = pd.factorize(series, use_na_sentinel=False)
    assert len(uniques) == len(index)  # the same merging, in the same (first-seen) order
    summed = np.bincount(codes, weights=list(counts.values()), minlength=len(index))
    ordered = pd.Series(summed.astype(np.int64), index=index).sort_index()
    return {str(k): int(v) for k, v in ordered.items()}


def label_distribution(batches: Callable[[], Iterable[pa.RecordBatch | pa.Table]],
                       schema: pa.Schema, labels: list[str]) -> dict[str, Any]:
    """The distribution of each of ``labels`` over the rows ``batches()`` yields (one pass; see
    the module docstring)."""
    folds = {label: _Label(schema.field(label).type) for label in labels}
    for batch in batches():
        for label, fold in folds.items():
            fold.update(batch.column(label))
    return {label: fold.result() for label, fold in folds.items()}


def table_label_distribution(table: pa.Table, labels: list[str]) -> dict[str, Any]:
    """:func:`label_distribution` of a split held in memory."""
    return label_distribution(lambda: [table.select(labels)], table.schema, labels)


def file_label_distribution(path: Path, labels: list[str]) -> dict[str, Any]:
    """:func:`label_distribution` of a written split file (Parquet), read a batch at a time."""
    schema = open_parquet(path).schema_arrow
    return label_distribution(
        lambda: open_parquet(path).iter_batches(batch_size=BATCH_ROWS, columns=labels),
        schema, labels)
