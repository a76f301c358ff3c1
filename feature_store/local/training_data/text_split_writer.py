"""csv and jsonl split files of materialized training-dataset versions, a batch at a time.

A csv or jsonl version is created out of core like a Parquet one: its splits are first streamed
into Parquet files by :mod:`training_data_stream` (which computes each split's content hash from
the rows as they pass, and from whose files the statistics and label distributions are taken),
then each Parquet split file is read back batch by batch and rewritten as text, the bytes hashed
as they are written, and the Parquet file removed.

The text is byte for byte what the in-memory writer (``training_data.store.write_split``) produces
for the whole table: csv is pyarrow's ``write_csv`` of each batch, with the header on the first
batch only (``write_csv`` itself writes a table batch by batch under one header, and quotes by
column type, never by value); jsonl is one ``json.dumps`` line per row.

Reading back (verification and streamed reads) is
:mod:`feature_store.local.readers.text_split_reader`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

TEXT_FORMATS = ("csv", "jsonl")
#: Rows per rewritten batch: a few MiB of text each (jsonl goes through Python objects, one
#: dict per row, so its batches are smaller).
BATCH_ROWS = {"csv": 16_384, "jsonl": 4_096}


def json_default(value: Any) -> Any:
    """How jsonl stores what ``json`` cannot: dates and timestamps as ISO strings."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"cannot store {type(value).__name__} in jsonl")


def encode(batch: pa.RecordBatch | pa.Table, data_format: str, *, header: bool) -> bytes | pa.Buffer:
    """The text of ``batch`` (csv: with the header line when ``header``), as bytes or an Arrow
    buffer (no copy of csv text)."""
    if data_format == "csv":
        import pyarrow as pa
        import pyarrow.csv as pacsv

        sink = pa.BufferOutputStream()
        pacsv.write_csv(batch, sink, pacsv.WriteOptions(include_header=header))
        return sink.getvalue()
    return "".join(json.dumps(row, default=json_default, allow_nan=True) + "\n"
                   for row in batch.to_pylist()).encode("utf-8")


def rewrite_from_parquet(source: Path, target: Path, data_format: str,
                         batch_rows: int | None = None) -> str:
    """Write the rows of the Parquet file ``source`` to ``target`` as ``data_format`` text, a
    batch at a time, remove ``source``, and return the sha256 of the bytes written."""
    import pyarrow.parquet as pq

    digest = hashlib.sha256()
    rows = batch_rows or BATCH_ROWS[data_format]
    parquet = pq.ParquetFile(source, pre_buffer=False)  # pre-buffering reads ahead unboundedly
    with open(target, "wb") as out:
        first = True
        for batch in parquet.iter_batches(batch_size=rows, use_threads=False):
            data = encode(batch, data_format, header=first)
            digest.update(data)
            out.write(data)
            first = False
        if first:  # no rows: the in-memory writer still writes a csv header
            data = encode(parquet.schema_arrow.empty_table(), data_format, header=True)
            digest.update(data)
            out.write(data)
    parquet.close()
    source.unlink()
    return digest.hexdigest()
