"""Reading csv and jsonl split files of materialized training-dataset versions back.

Verification and streamed reads parse the text a block of rows at a time with the same
conversion rules as the in-memory read, so the content hash of the parsed rows equals the one
recorded at creation (the text is written by
:mod:`feature_store.local.training_data.text_split_writer`).
"""

from __future__ import annotations

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

#: Bytes of text parsed per block on reads (one thread: no blocks read ahead).
READ_BLOCK_BYTES = 1 << 20


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
