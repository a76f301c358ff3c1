"""A torch ``IterableDataset`` over one split file of a materialized training-dataset version.

Imported only when a caller asks for ``dataframe_type="torch"`` (it imports torch).

The file's row groups are the unit of work: they are dealt round-robin to ``world_size`` ranks
times the DataLoader's workers (after a seeded shuffle of their order when shuffling), so every
row is read by exactly one shard per epoch. With fewer row groups than shards, every row group is
cut into one contiguous slice per shard instead. Rows pass through a shuffle buffer of
``shuffle_buffer`` rows drawn from ``numpy.random.default_rng((seed, epoch, shard))``, so the
same seed, epoch and sharding give the same order; ``set_epoch`` changes it between epochs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from feature_store.local.split_stream import SplitShaper
from fstrain.kernel.errors import InvalidArgumentError, SchemaMismatchError


class ParquetSplitDataset(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """``(x, y)`` float32 feature rows and labels of one split, streamed from its Parquet file.

    Args:
        path: the split file (verified when the version handed it out).
        shaper: the view's selection and train-fitted transformations.
        shuffle_buffer: rows held for shuffling (0: file order).
        seed: shuffle seed.
        rank, world_size: this process's shard among data-parallel processes.
    """

    def __init__(self, path: Path, shaper: SplitShaper, *, shuffle_buffer: int = 0, seed: int = 0,
                 rank: int = 0, world_size: int = 1) -> None:
        super().__init__()
        if shuffle_buffer < 0 or world_size < 1 or not 0 <= rank < world_size:
            raise InvalidArgumentError(
                f"ParquetSplitDataset needs shuffle_buffer >= 0 and 0 <= rank < world_size. Got "
                f"shuffle_buffer={shuffle_buffer}, rank={rank}, world_size={world_size} instead."
            )
        self.path, self.shaper = Path(path), shaper
        self.shuffle_buffer, self.seed = shuffle_buffer, seed
        self.rank, self.world_size, self.epoch = rank, world_size, 0

    def shuffled(self, buffer: int, seed: int) -> ParquetSplitDataset:
        """A copy that shuffles row groups and rows (through ``buffer`` rows) with ``seed``."""
        return ParquetSplitDataset(self.path, self.shaper, shuffle_buffer=buffer, seed=seed,
                                   rank=self.rank, world_size=self.world_size)

    def shard(self, rank: int, world_size: int) -> ParquetSplitDataset:
        """A copy that reads only shard ``rank`` of ``world_size`` (data-parallel training)."""
        return ParquetSplitDataset(self.path, self.shaper, shuffle_buffer=self.shuffle_buffer,
                                   seed=self.seed, rank=rank, world_size=world_size)

    def set_epoch(self, epoch: int) -> None:
        """Use another (seeded) order for the next pass."""
        self.epoch = int(epoch)

    def _shard(self) -> tuple[int, int]:
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        return self.rank * workers + worker, self.world_size * workers

    def _pieces(self, shard: int, shards: int) -> Iterator[Any]:
        """This shard's row groups (or slices of every row group), as Arrow tables."""
        import pyarrow.parquet as pq

        source = pq.ParquetFile(self.path)
        groups = np.arange(source.num_row_groups)
        if self.shuffle_buffer:
            groups = np.random.default_rng((self.seed, self.epoch)).permutation(groups)
        columns = self.shaper.columns()
        if len(groups) >= shards:
            for g in groups[shard::shards]:
                yield source.read_row_group(int(g), columns=columns)
            return
        for g in groups:
            table = source.read_row_group(int(g), columns=columns)
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


def _numeric(frame: Any, what: str) -> np.ndarray:
    bad = [str(c) for c, t in frame.dtypes.items() if not (t.kind in "biuf")]
    if bad:
        raise SchemaMismatchError(
            f"a torch dataset needs numeric {what} columns. Got {', '.join(bad)} of types "
            f"{', '.join(str(frame[c].dtype) for c in bad)} instead: add an encoder "
            "(label_encoder / one_hot_encoder) to the feature view or drop them."
        )
    return frame.to_numpy()
