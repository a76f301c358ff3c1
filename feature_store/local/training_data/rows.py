"""The rows of a view's query on their way into a training-dataset version: the extra filter
as values and as stored, missing labels filled (also batch by batch, the query's reader closed
once drained), and the key columns cut into small pandas frames for a streamed split assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from feature_store.local.query.query_spec import (
    Condition,
    Conjunction,
    FilterSpec,
    filter_to_dict,
    freeze_filter,
)

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa


def filter_spec(extra_filter: Any) -> FilterSpec | None:
    """An extra filter as values (a filter built from features, or one already frozen)."""
    if extra_filter is None or isinstance(extra_filter, Condition | Conjunction):
        return extra_filter
    return freeze_filter(extra_filter)


def filter_as_stored(extra_filter: FilterSpec | None) -> dict[str, Any] | None:
    return None if extra_filter is None else filter_to_dict(extra_filter)


def drained(reader: pa.RecordBatchReader, con: Any, fill: Mapping[str, Any],
             schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The statement's batches, labels filled; once the last is read (or the reading stops),
    the reader and its connection are closed: DuckDB's buffers (the ASOF join's and the ORDER
    BY's, up to its memory limit) are handed back before the split is assigned and dealt,
    instead of staying resident until the split files are written."""
    try:
        for batch in reader:
            yield fill_labels_batch(batch, fill, schema)
    finally:
        reader.close()
        con.close()


def fill_labels_batch(batch: pa.RecordBatch, fill_values: Mapping[str, Any],
                      schema: pa.Schema) -> pa.RecordBatch:
    """:func:`fill_labels` of one record batch (``schema``: the filled schema)."""
    if not fill_values:
        return batch
    import pyarrow as pa

    filled = fill_labels(pa.Table.from_batches([batch]), fill_values)
    return pa.RecordBatch.from_arrays([c.combine_chunks() for c in filled.columns], schema=schema)


def fill_labels(table: pa.Table, fill_values: Mapping[str, Any]) -> pa.Table:
    """Fill missing labels (LEFT JOIN on a positives-only label group), keeping the column type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for column, value in fill_values.items():
        index = table.column_names.index(column)
        current = table.column(column)
        target = pa.int64() if pa.types.is_null(current.type) else current.type
        filled = pc.fill_null(current.cast(target), pa.scalar(value).cast(target))
        table = table.set_column(index, column, filled)
    return table


#: rows of a key column converted to pandas at a time by a streamed split assignment: its
#: per-batch arrays (values, class codes, indices: tens of bytes per row) stay a few MiB
#: whatever ``batch_rows`` (the codes do not depend on the batching; tested)
KEY_PIECE_ROWS = 1 << 16


def key_frames(read: Callable[[], Iterator[pa.RecordBatch]]) -> Iterator[Any]:
    """The key columns' batches of ``read()`` as pandas frames of at most
    :data:`KEY_PIECE_ROWS` rows."""
    for batch in read():
        for start in range(0, batch.num_rows, KEY_PIECE_ROWS):
            yield batch.slice(start, KEY_PIECE_ROWS).to_pandas()


def streamable_time(kind: pa.DataType) -> bool:
    """Whether a time split reads an event time of this type batch by batch: timestamps, epoch
    milliseconds (integers; and floats, as a bigint batch holding a null reaches pandas) and
    dates, which ``_event_times`` converts value by value, so the batches' conversions equal the
    whole column's (tested). Not strings, whose format ``pd.to_datetime`` infers from the first
    value (a batch's, or the column's); a feature group refuses them as an event time anyway."""
    import pyarrow as pa

    return (pa.types.is_timestamp(kind) or pa.types.is_integer(kind)
            or pa.types.is_floating(kind) or pa.types.is_date(kind))
