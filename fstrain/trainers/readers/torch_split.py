"""A torch ``IterableDataset`` over one split file of a materialized training-dataset version.

Imported only when a caller asks for ``dataframe_type="torch"`` (it imports torch).

The file is read a unit at a time: a row group of a Parquet file, a row-aligned piece of about
1 MiB of a csv or jsonl file (the pieces the feature store hands out, each read checking the
file is still the verified one). Units are dealt
round-robin to ``world_size`` ranks times the DataLoader's workers (after a seeded shuffle of
their order when shuffling), so every row is read by exactly one shard per epoch. With fewer
units than shards, every unit is cut into one contiguous slice per shard instead. Rows pass
through a shuffle buffer of ``shuffle_buffer`` rows drawn from
``numpy.random.default_rng((seed, epoch, shard))``, so the same seed, epoch and sharding give
the same order; ``set_epoch`` changes it between epochs. The same rows stored as Parquet and as
text are cut into different units, so the same seed orders them differently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch

from fstrain.kernel.errors import InvalidArgumentError, SchemaMismatchError


class SplitDataset(torch.utils.data.IterableDataset):
    """``(x, y)`` float32 feature rows and labels of one split, streamed a unit at a time
    (subclasses say what a unit is and how to read it).

    Args:
        source: the split file, or what locates its units (verified when the version handed it
            out).
        shaper: the view's selection and train-fitted transformations (``columns()`` and
            ``shape(table) -> (X, y)``).
        shuffle_buffer: rows held for shuffling (0: file order).
        seed: shuffle seed.
        rank, world_size: this process's shard among data-parallel processes.
    """

    def __init__(self, source: Any, shaper: Any, *, shuffle_buffer: int = 0,
                 seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        super().__init__()
        if shuffle_buffer < 0 or world_size < 1 or not 0 <= rank < world_size:
            raise InvalidArgumentError(
                f"{type(self).__name__} needs shuffle_buffer >= 0 and 0 <= rank < world_size. "
                f"Got shuffle_buffer={shuffle_buffer}, rank={rank}, world_size={world_size} "
                "instead."
            )
        self.source, self.shaper = source, shaper
        self.shuffle_buffer, self.seed = shuffle_buffer, seed
        self.rank, self.world_size, self.epoch = rank, world_size, 0

    def shuffled(self, buffer: int, seed: int) -> Self:
        """A copy that shuffles units and rows (through ``buffer`` rows) with ``seed``."""
        return type(self)(self.source, self.shaper, shuffle_buffer=buffer, seed=seed,
                          rank=self.rank, world_size=self.world_size)

    def shard(self, rank: int, world_size: int) -> Self:
        """A copy that reads only shard ``rank`` of ``world_size`` (data-parallel training)."""
        return type(self)(self.source, self.shaper, shuffle_buffer=self.shuffle_buffer,
                          seed=self.seed, rank=rank, world_size=world_size)

    def set_epoch(self, epoch: int) -> None:
        """Use another (seeded) order for the next pass."""
        self.epoch = int(epoch)

    def _shard(self) -> tuple[int, int]:
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        return self.rank * workers + worker, self.world_size * workers

    def _units(self) -> tuple[int, Callable[[int, list[str]], Any]]:
        """How many units the file has, and a function reading one unit's columns as Arrow."""
        raise NotImplementedError

    def _pieces(self, shard: int, shards: int) -> Iterator[Any]:
        """This shard's units (or slices of every unit), as Arrow tables."""
        count, read = self._units()
        units = np.arange(count)
        if self.shuffle_buffer:
            units = np.random.default_rng((self.seed, self.epoch)).permutation(units)
        columns = self.shaper.columns()
        if len(units) >= shards:
            for u in units[shard::shards]:
                yield read(int(u), columns)
            return
        for u in units:
            table = read(int(u), columns)
            bounds = np.linspace(0, table.num_rows, shards + 1).astype(int)
            yield table.slice(bounds[shard], bounds[shard + 1] - bounds[shard])

    def _rows(self, shard: int, shards: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for table in self._pieces(shard, shards):
            X, y = self.shaper.shape(table)
            x = _numeric(X, "feature").astype(np.float32, copy=False)
            labels = np.zeros((len(X), 0), np.float32) if y is None else _numeric(y, "label")
            for i in range(len(x)):
                target = labels[i, 0] if labels.shape[1] == 1 else labels[i]
                yield torch.from_numpy(x[i]), torch.as_tensor(target)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        shard, shards = self._shard()
        rows = self._rows(shard, shards)
        if not self.shuffle_buffer:
            yield from rows
            return
        rng = np.random.default_rng((self.seed, self.epoch, shard, shards))
        buffer: list[tuple[torch.Tensor, torch.Tensor]] = []
        for row in rows:
            if len(buffer) < self.shuffle_buffer:
                buffer.append(row)
                continue
            k = int(rng.integers(len(buffer)))
            yield buffer[k]
            buffer[k] = row
        for k in rng.permutation(len(buffer)):
            yield buffer[int(k)]


class ParquetSplitDataset(SplitDataset):
    """A :class:`SplitDataset` of a Parquet split file (``source``: its path): a unit is a row
    group."""

    @property
    def path(self) -> Path:
        """The split file."""
        return Path(self.source)

    def _units(self) -> tuple[int, Callable[[int, list[str]], Any]]:
        import pyarrow.parquet as pq

        source = pq.ParquetFile(self.path)
        return source.num_row_groups, lambda g, columns: source.read_row_group(g, columns=columns)


class TextSplitDataset(SplitDataset):
    """A :class:`SplitDataset` of a csv or jsonl split file (``source``: the index of its
    row-aligned pieces, with ``pieces``, ``path`` and ``read(piece, columns)``): a unit is a
    piece of about 1 MiB of text, checked against the verified file as it is read."""

    @property
    def path(self) -> Path:
        """The split file."""
        return Path(self.source.path)

    def _units(self) -> tuple[int, Callable[[int, list[str]], Any]]:
        return self.source.pieces, lambda p, columns: self.source.read(p, columns)


def _numeric(frame: Any, what: str) -> np.ndarray:
    bad = [str(c) for c, t in frame.dtypes.items() if not (t.kind in "biuf")]
    if bad:
        raise SchemaMismatchError(
            f"a torch dataset needs numeric {what} columns. Got {', '.join(bad)} of types "
            f"{', '.join(str(frame[c].dtype) for c in bad)} instead: add an encoder "
            "(label_encoder / one_hot_encoder) to the feature view or drop them."
        )
    return frame.to_numpy()
