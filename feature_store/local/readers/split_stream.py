"""Streaming reads of a materialized training-dataset version (data larger than memory).

``fv.get_train_test_split(v, dataframe_type=...)`` with a streaming type returns, instead of
frames, objects that read the version's pinned files (verified against their recorded sha256
when handed out) a piece at a time:

- ``"arrow_batches"``: per split, a re-iterable :class:`SplitBatches` of ``pyarrow.RecordBatch``
  (``X`` and ``y`` separately, same row order, as the frames would be); csv and jsonl versions
  parsed a block at a time (``text_split_writer.TextSplitBatches``);
- ``"ray"`` and ``"torch"``: the readers here hand out only plain things — the verified Parquet
  file, or the row-aligned pieces of a csv or jsonl file (``text_pieces``) — with the view's
  :class:`SplitShaper`; the trainers' adapters (``fstrain.trainers.readers``, wired in by the
  composition root) make a ``ray.data.Dataset`` per split (``X`` and ``y`` separately) or one
  torch ``IterableDataset`` of ``(x, y)`` per split from them. This package knows none of its
  consumers.

A csv or jsonl file is indexed into pieces by one pass over its bytes that also takes its sha256
(checked against the recorded one before any row is handed out), and every piece read checks the
file is still the one indexed.

Every form applies the view's model-dependent transformations with the statistics fitted on the
version's train split, exactly as the in-memory read does (the same :class:`SplitShaper`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fstrain.kernel.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa

STREAMING_TYPES = ("arrow_batches", "ray", "torch")
DEFAULT_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class SplitShaper:
    """Selects, transforms and splits off the labels of a version's rows (picklable, so Ray
    workers and DataLoader workers shape exactly as the in-memory read does)."""

    keep: tuple[str, ...]
    labels: tuple[str, ...]
    transformations: tuple[Any, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)
    label_names: tuple[str, ...] = ()

    def columns(self) -> list[str]:
        """The file columns a read needs."""
        return list(dict.fromkeys([*self.keep, *self.labels]))

    def shape(self, table: pa.Table) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """``(X, y)`` frames of ``table``'s rows (``y`` is ``None`` without labels)."""
        keep = list(self.keep)
        if not self.transformations:  # select in Arrow: no pandas copies
            X = table.select(keep).to_pandas()
            return X, (table.select(list(self.labels)).to_pandas() if self.labels else None)
        from feature_store.core.transformations import apply_transformations

        keep += [c for c in self.labels if c not in keep]
        frame = table.select(keep).to_pandas()
        present = [tf for tf in self.transformations if all(c in frame.columns for c in tf.inputs)]
        out = apply_transformations(present, frame, self.stats) if present else frame
        if not self.labels:
            return out, None
        labels = list(self.label_names)
        return out.drop(columns=labels), out[labels]

    def shape_arrow(self, table: pa.Table) -> tuple[pa.Table, pa.Table | None]:
        """:meth:`shape` as Arrow tables."""
        import pyarrow as pa

        if not self.transformations:
            return table.select(list(self.keep)), (table.select(list(self.labels))
                                                    if self.labels else None)
        X, y = self.shape(table)
        return (pa.Table.from_pandas(X, preserve_index=False),
                None if y is None else pa.Table.from_pandas(y, preserve_index=False))

    def part_of(self, batch: pa.RecordBatch | pa.Table, part: str) -> pa.Table:
        """The ``X`` or the ``y`` part of ``batch``, shaped."""
        import pyarrow as pa

        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        X, y = self.shape_arrow(table)
        if part == "X":
            return X
        if y is None:
            raise InvalidArgumentError(
                "the feature view has no labels, so there is no y to stream.")
        return y


class SplitBatches:
    """The ``X`` or ``y`` part of one split as record batches, re-iterable (each iteration reads
    the file again, a batch at a time)."""

    def __init__(self, path: Path, shaper: SplitShaper, part: str,
                 batch_rows: int = DEFAULT_BATCH_ROWS) -> None:
        self.path, self.shaper, self.part, self.batch_rows = path, shaper, part, batch_rows

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for batch in self._rows():
            yield from self.shaper.part_of(batch, self.part).to_batches()

    def _rows(self) -> Iterator[pa.RecordBatch]:
        """The file's batches, only the columns the shaper reads."""
        import pyarrow.parquet as pq

        source = pq.ParquetFile(self.path, pre_buffer=False)  # memory: one batch, not the file
        yield from source.iter_batches(batch_size=self.batch_rows, columns=self.shaper.columns())

    def read_all(self) -> pa.Table:
        """All batches as one table (for small data and tests)."""
        import pyarrow as pa

        return pa.Table.from_batches(list(self))

    def __repr__(self) -> str:
        return f"SplitBatches({self.path.name}, {self.part})"
