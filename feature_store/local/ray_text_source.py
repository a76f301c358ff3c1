"""A Ray Data datasource over the row-aligned pieces of a csv or jsonl split file.

Imported only when a caller asks a text version for ``dataframe_type="ray"`` (it imports Ray).
Each read task parses a contiguous run of pieces (:mod:`feature_store.local.text_pieces`), one
block per piece, in Ray's workers, by the rules of the in-memory read; each piece read checks
that the file is still the verified one. ``ray.data.read_csv``/``read_json`` are not used: they
read a file in one task, with parsers of their own (``read_json`` infers types per block rather
than parsing as the in-memory read does), and could not check the file piece by piece.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from feature_store.local.text_pieces import TextIndex, read_piece


def _read(index: TextIndex, pieces: list[int], columns: list[str]) -> Iterator[Any]:
    if not pieces:  # a file without rows still has its columns
        yield index.schema.empty_table().select(columns)
    for piece in pieces:
        yield read_piece(index, piece, columns)


class TextPiecesDatasource(Datasource):
    """The rows of one indexed csv or jsonl split file, ``columns`` only."""

    def __init__(self, index: TextIndex, columns: list[str]) -> None:
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
