"""csv and jsonl split files of materialized training-dataset versions, a batch at a time.

A csv or jsonl version is created out of core like a Parquet one: its splits are first streamed
into Parquet files by :mod:`training_data_stream` (which computes each split's content hash from
the rows as they pass, and from whose files the statistics and label distributions are taken),
then each Parquet split file is read back batch by batch and rewritten as text, the bytes hashed
as they are written, and the Parquet file removed.

The text is byte for byte what the in-memory writer (``training_data._write_split``) produces
for the whole table: csv is pyarrow's ``write_csv`` of each batch, with the header on the first
batch only (``write_csv`` itself writes a table batch by batch under one header, and quotes by
column type, never by value); jsonl is one ``json.dumps`` line per row.

Reading back (verification and streamed reads) parses the text a block of rows at a time with
the same conversion rules as the in-memory read, so the content hash of the parsed rows equals
the one recorded at creation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.local.readers.split_stream import (
    DEFAULT_BATCH_ROWS,
    SplitBatches,
    SplitShaper,
)
from feature_store.local.storage.storage_errors import unreadable_split

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

TEXT_FORMATS = ("csv", "jsonl")
#: Rows per rewritten batch: a few MiB of text each (jsonl goes through Python objects, one
#: dict per row, so its batches are smaller).
BATCH_ROWS = {"csv": 16_384, "jsonl": 4_096}
#: Bytes of text parsed per block on reads (one thread: no blocks read ahead).
READ_BLOCK_BYTES = 1 << 20


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


def csv_parse_options() -> Any:
    """How csv text is split into rows: a quoted value may hold newlines (as written)."""
    import pyarrow.csv as pacsv

    return pacsv.ParseOptions(newlines_in_values=True)


def csv_convert_options(schema: pa.Schema) -> Any:
    """How csv text is parsed back into ``schema``: an unquoted empty field is a null, a quoted
    one the empty string (as written)."""
    import pyarrow.csv as pacsv

    return pacsv.ConvertOptions(column_types=schema, strings_can_be_null=True,
                                quoted_strings_can_be_null=False)


def jsonl_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Parsed jsonl rows as a table of ``schema``: built loosely typed (timestamps travel as ISO
    strings, a column may be all null), then cast."""
    import pyarrow as pa

    if not rows:
        return schema.empty_table()
    loose = pa.Table.from_pylist(rows)
    return pa.table([loose.column(f.name).cast(f.type) for f in schema], schema=schema)


def parse_text(data: bytes, data_format: str, schema: pa.Schema) -> pa.Table:
    """Whole csv (with its header line) or jsonl text as a table of ``schema``: how the
    in-memory read parses a split file, and how streamed reads parse each piece of one."""
    import pyarrow as pa

    if data_format == "csv":
        import pyarrow.csv as pacsv

        return pacsv.read_csv(pa.BufferReader(data), parse_options=csv_parse_options(),
                              convert_options=csv_convert_options(schema))
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    return jsonl_table(rows, schema)


def iter_batches(path: Path, data_format: str, schema: pa.Schema,
                 block_bytes: int | None = None) -> Iterator[pa.Table]:
    """The rows of a csv or jsonl split file as tables of ``schema``, about ``block_bytes``
    (default :data:`READ_BLOCK_BYTES`) of text at a time (Arrow and parsing errors propagate)."""
    block_bytes = block_bytes or READ_BLOCK_BYTES
    if data_format == "csv":
        import pyarrow as pa
        import pyarrow.csv as pacsv

        reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=block_bytes,
                                                                       use_threads=False),
                                parse_options=csv_parse_options(),
                                convert_options=csv_convert_options(schema))
        for batch in reader:
            yield pa.Table.from_batches([batch])
        return
    with open(path, encoding="utf-8") as fh:
        while True:
            lines = fh.readlines(block_bytes)
            if not lines:
                return
            yield jsonl_table([json.loads(line) for line in lines if line.strip()], schema)


class TextSplitBatches(SplitBatches):
    """:class:`~feature_store.local.readers.split_stream.SplitBatches` of a csv or jsonl split file:
    the text is parsed a block at a time into ``schema`` (the version's recorded columns)."""

    def __init__(self, path: Path, shaper: SplitShaper, part: str, *, data_format: str,
                 schema: pa.Schema, batch_rows: int = DEFAULT_BATCH_ROWS) -> None:
        super().__init__(path, shaper, part, batch_rows)
        self.data_format, self.schema = data_format, schema

    def _rows(self) -> Iterator[pa.RecordBatch]:
        columns = self.shaper.columns()
        for table in iter_batches(self.path, self.data_format, self.schema):
            yield from table.select(columns).to_batches(max_chunksize=self.batch_rows)


def content_hash(path: Path, data_format: str, schema: pa.Schema, owner: str) -> str:
    """The content hash of a csv or jsonl split file's parsed rows, read a block at a time; a
    file that cannot be parsed is an :class:`IntegrityError`."""
    import pyarrow as pa

    from feature_store.core.content_hash import StreamingTableHash

    hasher: StreamingTableHash | None = None
    try:
        for table in iter_batches(path, data_format, schema):
            hasher = hasher or StreamingTableHash(table.schema)
            hasher.update(table)
    except MemoryError:
        raise
    except (pa.ArrowException, OSError, ValueError, KeyError) as exc:
        raise unreadable_split(owner, path, data_format, exc) from exc
    return (hasher or StreamingTableHash(schema)).hexdigest()
