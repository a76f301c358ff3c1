"""Ray Data input of the Ray Train workers (``--workers N``): each rank's shard of the train
split is read, preprocessed and batched by Ray Data, not shipped as a frame.

Per rank, one Ray Dataset: its pieces (:func:`pipelines.trainers.streaming.rank_pieces`, dealt
once per run from the seed) → ``map_batches`` reading each piece's rows from the split's Parquet
file and applying the train-fitted preprocessing (:class:`~pipelines.trainers.streaming.StreamPrep`,
fitted once on the driver) → in the worker, ``ray.train.get_dataset_shard("train_rank<r>")``
→ ``iter_batches`` (whole pieces, numpy) → a shuffle window seeded by ``(seed, epoch, rank)``
and batches, as in one process.

Why per-rank datasets rather than ``read_parquet`` + ``streaming_split``: Ray's equal split
(which DDP needs: every rank must take as many steps) drops the ``n mod world_size`` remainder
rows of every epoch (``OutputSplitter`` in Ray 2.60), and which rows reach which rank depends on
timing. Dealing pieces of row groups by row count covers every row exactly once, the same way
each run, and lets every rank take ``ceil(ceil(n / world) / batch_size)`` steps.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from pipelines.trainers.streaming import Piece, SplitStream, exact_batches

#: CPUs a Ray Data read task asks for (the train workers leave this much of their share free)
READ_TASK_CPUS = 0.25


def dataset_name(rank: int) -> str:
    """The name of rank ``rank``'s train dataset handed to Ray Train."""
    return f"train_rank{rank}"


def _read_pieces(batch: dict[str, np.ndarray], stream: SplitStream) -> dict[str, np.ndarray]:
    """``map_batches`` function: a batch of piece descriptors → their preprocessed rows (a plain
    function, so Ray runs it as tasks in its pooled worker processes; a callable class would
    start an actor pool, new processes importing everything, for every epoch)."""
    xs, ys = [], []
    for group, offset, rows in zip(batch["group"], batch["offset"], batch["rows"], strict=True):
        x, y = stream.piece_arrays((int(group), int(offset), int(rows)))
        xs.append(x)
        ys.append(y)
    return {"x": np.concatenate(xs), "y": np.concatenate(ys)}


def pieces_dataset(stream: SplitStream, pieces: list[Piece]) -> Any:
    """A lazy Ray Dataset of ``pieces`` of ``stream``'s split, each read and preprocessed in a
    Ray Data task (columns ``x`` and ``y``; call with Ray initialised)."""
    import ray.data

    items = [{"group": g, "offset": o, "rows": n} for g, o, n in pieces]
    ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
    return ds.map_batches(functools.partial(_read_pieces, stream=stream), batch_size=1,
                          batch_format="numpy", num_cpus=READ_TASK_CPUS)


def rank_datasets(stream: SplitStream, world_size: int) -> dict[str, Any]:
    """One lazy Ray Dataset per rank over its pieces (call with Ray initialised)."""
    return {dataset_name(rank): pieces_dataset(stream, stream.pieces(rank, world_size))
            for rank in range(world_size)}


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

    def __init__(self, shard: Any, stream: SplitStream, epochs: int = 1, *,
                 start_now: bool = False) -> None:
        self.shard, self.stream, self.epochs = shard, stream, epochs
        self._ahead: tuple[int, queue.Queue[Any]] | None = None
        if start_now:  # a fresh run begins at epoch 0: Ray's read workers start during setup
            self._start(0)

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
        """This rank's rows for ``epoch``: exactly :meth:`steps` batches.

        Ray Data hands over whole preprocessed pieces (``iter_batches`` with
        ``batch_size=None``, numpy); they are shuffled through the same seeded window and cut into
        batches as in one process (Ray's own local shuffle buffer re-slices Arrow blocks per
        batch, which cost several times the training step here)."""
        from pipelines.trainers.streaming import rebatch, window_shuffle

        chunks: Iterator[tuple[np.ndarray, np.ndarray]] = self._blocks(epoch)
        if self.stream.shuffle_buffer:
            chunks = window_shuffle(chunks, self.stream.shuffle_buffer,
                                    self.stream.epoch_rng(epoch, rank))
        return exact_batches(rebatch(chunks, batch_size), self.steps(world_size, batch_size),
                             what=f"rank {rank} of {world_size}")

    def _start(self, epoch: int) -> None:
        """Start reading ``epoch``'s pieces in a thread (Ray Data's executor takes a moment to
        start: the next epoch's start overlaps this epoch's validation)."""
        pieces: queue.Queue[Any] = queue.Queue(maxsize=2)

        def pump() -> None:
            try:
                # numpy blocks: the loop shuffles and batches arrays (iter_torch_batches
                # converted every block to tensors only for them to be turned back)
                for b in self.shard.iter_batches(batch_size=None, batch_format="numpy",
                                                 prefetch_batches=2):
                    pieces.put((b["x"], b["y"]))
                pieces.put(None)
            except BaseException as exc:  # handed to the loop's thread
                pieces.put(exc)

        threading.Thread(target=pump, name=f"ray-data-epoch-{epoch}", daemon=True).start()
        self._ahead = (epoch, pieces)

    def _blocks(self, epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if self._ahead is None or self._ahead[0] != epoch:
            self._start(epoch)
        assert self._ahead is not None
        pieces, self._ahead = self._ahead[1], None
        while (item := pieces.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
        if epoch + 1 < self.epochs:
            self._start(epoch + 1)
