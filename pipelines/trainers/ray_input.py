"""Ray Data input of the Ray Train workers (``--workers N``): each rank's shard of the train
split is read, preprocessed and batched by Ray Data, not shipped as a frame.

Per rank, one Ray Dataset: its pieces (:func:`pipelines.trainers.streaming.rank_pieces`, dealt
once per run from the seed) → ``map_batches`` reading each piece's rows from the split's Parquet
file and applying the train-fitted preprocessing (:class:`~pipelines.trainers.streaming.StreamPrep`,
fitted once on the driver) → in the worker, ``ray.train.get_dataset_shard("train_rank<r>")``
→ ``iter_torch_batches`` with a local shuffle buffer seeded by ``(seed, epoch, rank)``.

Why per-rank datasets rather than ``read_parquet`` + ``streaming_split``: Ray's equal split
(which DDP needs: every rank must take as many steps) drops the ``n mod world_size`` remainder
rows of every epoch (``OutputSplitter`` in Ray 2.60), and which rows reach which rank depends on
timing. Dealing pieces of row groups by row count covers every row exactly once, the same way
each run, and lets every rank take ``ceil(ceil(n / world) / batch_size)`` steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from pipelines.trainers.streaming import SplitStream, exact_batches

#: CPUs a Ray Data read task asks for (the train workers leave this much of their share free)
READ_TASK_CPUS = 0.25


def dataset_name(rank: int) -> str:
    """The name of rank ``rank``'s train dataset handed to Ray Train."""
    return f"train_rank{rank}"


class _ReadPieces:
    """``map_batches`` function: a batch of piece descriptors → their preprocessed rows."""

    def __init__(self, stream: SplitStream) -> None:
        self.stream = stream

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xs, ys = [], []
        for group, offset, rows in zip(batch["group"], batch["offset"], batch["rows"],
                                       strict=True):
            x, y = self.stream.piece_arrays((int(group), int(offset), int(rows)))
            xs.append(x)
            ys.append(y)
        return {"x": np.concatenate(xs), "y": np.concatenate(ys)}


def rank_datasets(stream: SplitStream, world_size: int) -> dict[str, Any]:
    """One lazy Ray Dataset per rank (call with Ray initialised)."""
    import ray.data

    out = {}
    for rank in range(world_size):
        pieces = stream.pieces(rank, world_size)
        items = [{"group": g, "offset": o, "rows": n} for g, o, n in pieces]
        ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        out[dataset_name(rank)] = ds.map_batches(_ReadPieces(stream), batch_size=1,
                                                 batch_format="numpy", num_cpus=READ_TASK_CPUS)
    return out


def data_config() -> Any:
    """Ray Train's ``DataConfig``: the per-rank datasets are not split again, and Ray Data keeps
    the pieces' order (so a seed gives the same batches)."""
    from ray.train import DataConfig

    options = DataConfig.default_ingest_options()
    options.preserve_order = True
    return DataConfig(datasets_to_split=[], execution_options=options)


class RayShardStream:
    """The loop's streamed train set inside a Ray Train worker: this rank's Ray Data shard.

    Row counts, step counts and the train-eval sample come from the :class:`SplitStream` the
    driver built (the sample is read directly: a few thousand rows)."""

    streamed = True

    def __init__(self, shard: Any, stream: SplitStream) -> None:
        self.shard, self.stream = shard, stream

    def __len__(self) -> int:
        return len(self.stream)

    def steps(self, world_size: int, batch_size: int) -> int:
        """Batches every rank takes per epoch."""
        return self.stream.steps(world_size, batch_size)

    def sample(self, cap: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """The train rows scored after each epoch."""
        return self.stream.sample(cap, seed)

    def epoch_batches(self, epoch: int, rank: int, world_size: int,
                      batch_size: int) -> Iterator[tuple[Any, Any]]:
        """This rank's rows for ``epoch``: exactly :meth:`steps` batches."""
        buffer = self.stream.shuffle_buffer
        seed = int(self.stream.epoch_rng(epoch, rank).integers(2**31)) if buffer else None
        batches = self.shard.iter_torch_batches(
            batch_size=batch_size, device="cpu", drop_last=False, prefetch_batches=4,
            local_shuffle_buffer_size=max(buffer, batch_size) if buffer else None,
            local_shuffle_seed=seed)
        return exact_batches(((b["x"], b["y"]) for b in batches),
                             self.steps(world_size, batch_size),
                             what=f"rank {rank} of {world_size}")
