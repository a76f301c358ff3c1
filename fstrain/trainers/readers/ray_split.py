"""Ray Data over one split file of a materialized training-dataset version.

Imported only when a caller asks for ``dataframe_type="ray"`` (it imports Ray). A Parquet file
is read with ``ray.data.read_parquet``; a csv or jsonl file through :class:`TextPiecesDatasource`,
whose read tasks parse contiguous runs of its row-aligned pieces, one block per piece, in Ray's
workers, by the rules of the in-memory read; each piece read checks that the file is still the
verified one. ``ray.data.read_csv``/``read_json`` are not used: they read a file in one task,
with parsers of their own (``read_json`` infers types per block rather than parsing as the
in-memory read does), and could not check the file piece by piece. Either way the blocks are
shaped in ``map_batches`` by the view's shaper (its ``part_of(batch, "X" | "y")``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import ray.data
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask


def parquet_dataset(path: Path, shaper: Any, part: str) -> Any:
    """A Ray Dataset of one Parquet split's ``X`` or ``y`` (lazy: Ray reads and shapes in its
    workers)."""
    dataset = ray.data.read_parquet([str(path)], columns=shaper.columns())
    return dataset.map_batches(functools.partial(shaper.part_of, part=part),
                               batch_format="pyarrow")


def text_dataset(index: Any, shaper: Any, part: str) -> Any:
    """A Ray Dataset of one csv or jsonl split's ``X`` or ``y`` (``index``: its row-aligned
    pieces), read a piece per block in Ray's workers and shaped there."""
    dataset = ray.data.read_datasource(TextPiecesDatasource(index, shaper.columns()))
    return dataset.map_batches(functools.partial(shaper.part_of, part=part),
                               batch_format="pyarrow")


def _read(index: Any, pieces: list[int], columns: list[str]) -> Iterator[Any]:
    if not pieces:  # a file without rows still has its columns
        yield index.schema.empty_table().select(columns)
    for piece in pieces:
        yield index.read(piece, columns)


class TextPiecesDatasource(Datasource):
    """The rows of one indexed csv or jsonl split file, ``columns`` only (``index``: its
    row-aligned pieces, with ``path``, ``schema``, ``bounds``, ``pieces``, ``piece_bytes(p)``
    and ``read(piece, columns)``)."""

    def __init__(self, index: Any, columns: list[str]) -> None:
        super().__init__()
        self.index, self.columns = index, list(columns)

    def get_name(self) -> str:
        """How Ray's progress bars and stats name this read."""
        return f"TextSplit({self.index.path.name})"

    def estimate_inmemory_data_size(self) -> int | None:
        """The bytes of text (a rough guide to the parsed size)."""
        return self.index.bounds[-1] - self.index.bounds[0] if self.index.bounds else 0

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        """At most ``parallelism`` tasks, each reading a contiguous run of pieces in order."""
        count = self.index.pieces
        runs = np.array_split(np.arange(count), max(1, min(parallelism, count)))
        schema = self.index.schema.empty_table().select(self.columns).schema
        tasks = []
        for run in runs:
            pieces = [int(p) for p in run]
            size = sum(self.index.piece_bytes(p) for p in pieces)
            meta = BlockMetadata(num_rows=None, size_bytes=size, exec_stats=None,
                                 input_files=(str(self.index.path),))
            tasks.append(ReadTask(functools.partial(_read, self.index, pieces, self.columns),
                                  meta, schema=schema, per_task_row_limit=per_task_row_limit))
        return tasks
