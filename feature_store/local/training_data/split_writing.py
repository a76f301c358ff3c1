"""Writing a training-dataset version's split files: one split table in its format, streamed
Parquet splits rewritten as csv or jsonl, and the statistics of a split (of a table in memory,
or of a written file in bounded memory).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from feature_store.local.storage import engine
from feature_store.local.storage.statistics import compute_statistics
from feature_store.local.training_data import training_data_stream as ts
from feature_store.local.training_data.text_split_writer import (
    encode,
    rewrite_from_parquet,
)

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from feature_store.local.training_data.training_data_stream import (
        SplitFile,
        StreamOptions,
    )


def split_statistics(table: pa.Table) -> dict[str, Any]:
    con = engine.connect()
    try:
        con.register("split_rows", table)
        return compute_statistics(con, "split_rows", table.schema)
    finally:
        con.close()


def statistics_enabled(statistics_config: Any) -> bool:
    return statistics_config is not False and not (
        isinstance(statistics_config, dict) and statistics_config.get("enabled") is False
    )


def file_statistics(split: SplitFile, schema: pa.Schema, options: StreamOptions,
                     staging: Path) -> dict[str, Any]:
    """:func:`split_statistics` of a written split: those accumulated while it was written,
    finished (or, without them, computed) by DuckDB over the file, in bounded memory, spilling
    under ``staging``."""
    con = ts.connect(options.memory_limit, staging / ts.SPILL_DIR)
    try:
        source = "read_parquet('" + str(split.path).replace("'", "''") + "')"
        if split.statistics is not None:
            return split.statistics.result(con, source)
        return compute_statistics(con, source, schema)
    finally:
        con.close()
        shutil.rmtree(staging / ts.SPILL_DIR, ignore_errors=True)


def write_split(table: pa.Table, path: Path, data_format: str) -> None:
    if data_format == "parquet":
        pq.write_table(table, path)
    else:  # csv, jsonl: the same text as a streamed create writes batch by batch
        with open(path, "wb") as out:
            out.write(encode(table, data_format, header=True))


def rewrite_as_text(files: dict[str, SplitFile], data_format: str) -> dict[str, str]:
    """Rewrite streamed Parquet split files as csv or jsonl beside them (batch by batch, see
    :mod:`text_split_writer`); returns each split's file sha256."""
    return {name: rewrite_from_parquet(f.path, f.path.with_suffix(f".{data_format}"), data_format)
            for name, f in files.items()}
