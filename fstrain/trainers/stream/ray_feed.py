"""Ray Data input of the Ray Train workers (``--workers N``): each rank's shard of the train
split is read, preprocessed and batched by Ray Data, not shipped as a frame.

Per rank, one Ray Dataset: its pieces (:func:`fstrain.trainers.stream.pieces.rank_pieces`, dealt
once per run from the seed) → ``map_batches`` reading each piece's rows from the split's Parquet
file (or, for a csv or jsonl version, its row-aligned pieces of text) and applying the train-fitted preprocessing (:class:`~fstrain.trainers.stream.prep.StreamPrep`,
fitted once on the driver), run by the :class:`ShardFeeder` actor → in the worker, the rank's
blocks (whole pieces, numpy) → a shuffle window seeded by ``(seed, epoch, rank)`` and batches,
as in one process.

Why per-rank datasets rather than ``read_parquet`` + ``streaming_split``: Ray's equal split
(which DDP needs: every rank must take as many steps) drops the ``n mod world_size`` remainder
rows of every epoch (``OutputSplitter`` in Ray 2.60), and which rows reach which rank depends on
timing. Dealing pieces of row groups by row count covers every row exactly once, the same way
each run, and lets every rank take ``ceil(ceil(n / world) / batch_size)`` steps.

Why a feeder actor rather than Ray Train's ``datasets=`` / ``DataConfig``: with those, each rank's
streaming executor starts in its Train worker when the worker first iterates, beside the loop's
setup, and the read tasks wait for fresh worker processes; the first epoch waited 35–44% of its
train time for them (bench/RESULTS.md). :func:`start_feeder` creates one :class:`ShardFeeder`
actor in the driver before the worker group exists and starts epoch 0 of every rank there, so
the first pieces are read while Ray Train starts its workers; each worker pulls its rank's
blocks (object refs, no copy) through a :class:`RankFeed` handed over in the loop config.

Mid-epoch resume (``torch.checkpoint_every_steps``): a rank's epoch is deterministic — its
pieces in dealt order (``preserve_order``), re-cut into whole pieces, shuffled by the seeded
window — so a resumed rank asks the feeder for its epoch after the rows its batches before the
checkpoint used: whole pieces are skipped by count and the piece the cut falls in is sliced;
with shuffling, the window the cut falls in is read again and its used rows dropped
(:meth:`RayShardStream.epoch_batches`).
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.trainers.stream.pieces import (
    batch_sizes,
    drop_rows,
    exact_batches,
    rebatch,
    regroup,
    resume_rows,
    seek_pieces,
    window_shuffle,
)
from fstrain.trainers.stream.source import Piece
from fstrain.trainers.stream.split import SplitStream

#: CPUs a Ray Data read task asks for (the train workers leave this much of their share free)
READ_TASK_CPUS = 0.25
#: blocks (pieces) of each rank the feeder holds ready ahead of the worker
FEED_AHEAD = 4


def dataset_name(rank: int) -> str:
    """The name of rank ``rank``'s train dataset (handed to Ray Train by distributed boosting)."""
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
    """Ray Train's ``DataConfig`` for per-rank datasets handed to a trainer (distributed
    boosting): they are not split again, and Ray Data keeps the pieces' order (so a seed gives
    the same batches)."""
    from ray.train import DataConfig

    options = DataConfig.default_ingest_options()
    options.preserve_order = True
    return DataConfig(datasets_to_split=[], execution_options=options)



class _Pump:
    """One rank's passes over its dataset in a thread of the feeder: block refs (with the rows
    of the block they cover) into a queue of at most :data:`FEED_AHEAD`, ``None`` after each
    epoch's last, epochs ``first``..``epochs - 1`` one after another. The first pass reads
    ``head`` (the rank's pieces after the ``seek`` rows a resumed epoch skips), the later ones
    ``dataset``."""

    def __init__(self, head: Any, dataset: Any, first: int, epochs: int, seek: int) -> None:
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=FEED_AHEAD)
        # the epoch whose items the queue hands out next, and the rows it skips
        self.expect, self.seek = first, seek
        self._stop = threading.Event()
        threading.Thread(target=self._run, args=(head, dataset, first, epochs),
                         name=f"feed-{dataset.name}", daemon=True).start()

    def _run(self, head: Any, dataset: Any, first: int, epochs: int) -> None:
        try:
            for epoch in range(first, epochs):
                # Ray Data's streaming executor runs in this thread's process; a full queue
                # stops it reading further ahead (backpressure), so memory stays bounded
                passing = head if epoch == first else dataset
                for bundle in passing.iter_internal_ref_bundles():
                    for entry, part in zip(bundle.blocks, bundle.slices, strict=True):
                        rows = (part.start_offset, part.end_offset) if part else None
                        if not self._put((entry.ref, rows)):
                            return
                if not self._put(None):
                    return
        except BaseException as exc:  # handed to the worker that asks next
            self._put(exc)

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self.queue.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def stop(self) -> None:
        """Stop after the block being read (the executor shuts down when its iterator goes)."""
        self._stop.set()


class ShardFeeder:
    """Ray actor (see :func:`start_feeder`) running every rank's Ray Data pipeline and handing
    its blocks to the rank's worker in order, one epoch (a full pass over the rank's pieces)
    after another; the next epoch starts as soon as this one's last block is queued, so it
    overlaps the worker's last batches and validation, as the worker's own read-ahead did."""

    def __init__(self, stream: SplitStream, world_size: int, epochs: int) -> None:
        from ray.data import DataContext, ExecutionResources

        options = DataContext.get_current().execution_options
        # the pieces' order, so a seed gives the same batches (as DataConfig's option did)
        options.preserve_order = True
        # one read task per rank at a time, as when the train workers held the rest of the
        # CPUs: started before them, Ray Data would fill the idle CPUs with read tasks whose
        # new worker processes delay the train workers' start
        options.resource_limits = ExecutionResources(cpu=READ_TASK_CPUS)
        self._stream = stream
        self._pieces = [stream.pieces(rank, world_size) for rank in range(world_size)]
        self._datasets = [pieces_dataset(stream, pieces) for pieces in self._pieces]
        for rank, ds in enumerate(self._datasets):
            ds.set_name(dataset_name(rank))
        self._epochs = epochs
        self._lock = threading.Lock()
        self._pumps: dict[int, _Pump] = {}

    def start(self, epoch: int) -> None:
        """Start reading ``epoch`` for every rank (a fresh run: epoch 0, before any worker)."""
        for rank in range(len(self._datasets)):
            self._pump(rank, epoch)

    def next(self, rank: int, epoch: int,
             seek: int = 0) -> tuple[Any, tuple[int, int] | None] | None:
        """The next block of ``rank``'s ``epoch`` as (object ref, its rows or None for all),
        or None after the epoch's last; asking for another epoch than the one under way
        restarts the rank's reads at that epoch.

        ``seek`` > 0 (a run resumed mid-epoch) starts the epoch after its first ``seek`` rows:
        the rank's pieces before them are not read, the piece the cut falls in is read from
        the cut (:func:`~fstrain.trainers.stream.pieces.seek_pieces`)."""
        if not 0 <= rank < len(self._datasets) or not 0 <= epoch < self._epochs:
            raise ValueError(f"no epoch {epoch} of rank {rank}: the feeder serves ranks "
                             f"0..{len(self._datasets) - 1}, epochs 0..{self._epochs - 1}")
        rows = sum(p[2] for p in self._pieces[rank])
        if not 0 <= seek < rows:
            raise ValueError(f"no row {seek} in epoch {epoch} of rank {rank}: the rank reads "
                             f"{rows} rows per epoch")
        pump = self._pump(rank, epoch, seek)
        item = pump.queue.get()
        if item is None:
            pump.expect, pump.seek = epoch + 1, 0
        elif isinstance(item, BaseException):
            raise item
        return item

    def queued(self) -> list[int]:
        """Blocks (and end-of-epoch marks) each rank has ready, read ahead of its worker."""
        with self._lock:
            return [self._pumps[r].queue.qsize() if r in self._pumps else 0
                    for r in range(len(self._datasets))]

    def _pump(self, rank: int, epoch: int, seek: int = 0) -> _Pump:
        with self._lock:
            pump = self._pumps.get(rank)
            if pump is None or (pump.expect, pump.seek) != (epoch, seek):
                if pump is not None:
                    pump.stop()
                head = self._datasets[rank]
                if seek:
                    head = pieces_dataset(self._stream, seek_pieces(self._pieces[rank], seek))
                    head.set_name(f"{dataset_name(rank)}_from_row{seek}")
                pump = self._pumps[rank] = _Pump(head, self._datasets[rank], epoch,
                                                 self._epochs, seek)
            return pump


def start_feeder(stream: SplitStream, world_size: int, epochs: int, *,
                 start_epoch: int | None = 0) -> Any:
    """Create the :class:`ShardFeeder` actor on this (the driver's) node and, unless
    ``start_epoch`` is None (a resumed run: the workers ask for their epoch), start reading
    that epoch for every rank now (call with Ray initialised; kill the actor after the run)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    feeder: Any = ray.remote(ShardFeeder).options(
        num_cpus=0, max_concurrency=world_size + 2,  # one blocking next() per rank, + start()
        scheduling_strategy=NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False),
    ).remote(stream, world_size, epochs)
    if start_epoch is not None:
        feeder.start.remote(start_epoch)
    return feeder


@dataclass(frozen=True)
class RankFeed:
    """What a Ray Train worker gets to read its rank's blocks from the feeder (picklable)."""

    feeder: Any
    rank: int

    def blocks(self, epoch: int, seek: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """This rank's preprocessed pieces of ``epoch`` after its first ``seek`` rows as (x, y)
        arrays, in order; the next block is asked for while this one is converted."""
        import ray
        from ray.data.block import BlockAccessor

        pending = self.feeder.next.remote(self.rank, epoch, seek)
        while (item := ray.get(pending)) is not None:
            pending = self.feeder.next.remote(self.rank, epoch, seek)
            ref, rows = item
            batch = BlockAccessor.for_block(ray.get(ref)).to_batch_format("numpy")
            x, y = batch["x"], batch["y"]
            if rows is not None:
                x, y = x[rows[0]:rows[1]], y[rows[0]:rows[1]]
            yield x, y


class RayShardStream:
    """The loop's streamed train set inside a Ray Train worker: this rank's blocks from the
    :class:`ShardFeeder` (a :class:`RankFeed`).

    Row counts, step counts and the train-eval sample come from the :class:`SplitStream` the
    driver built (the sample is read directly: a few thousand rows).

    An epoch starts at any batch (a mid-epoch checkpoint's resume): a rank's epoch is its
    pieces in their dealt order (Ray Data keeps it: ``preserve_order``), re-cut into whole
    pieces whatever blocks Ray made of them, shuffled through windows seeded by
    ``(seed, epoch, rank)`` — so the rows before a batch are known from the piece sizes alone,
    and the feeder skips them unread (:meth:`epoch_batches`)."""

    streamed = True
    #: :meth:`epoch_batches` starts an epoch at any batch (a mid-epoch checkpoint's resume)
    resumes_mid_epoch = True

    def __init__(self, feed: RankFeed | None, stream: SplitStream, epochs: int = 1, *,
                 start_now: bool = False) -> None:
        self.feed, self.stream, self.epochs = feed, stream, epochs
        self._ahead: tuple[tuple[int, int], queue.Queue[Any]] | None = None
        if start_now:  # a fresh run begins at epoch 0: its first blocks come during setup
            self._start(0)

    def __len__(self) -> int:
        return len(self.stream)

    def layout(self) -> dict[str, Any]:
        """The train split's layout (:meth:`SplitStream.layout`)."""
        return self.stream.layout()

    def shards(self, world_size: int) -> dict[str, Any]:
        """Every rank's pieces, hashed (:meth:`SplitStream.shards`)."""
        return self.stream.shards(world_size)

    def steps(self, world_size: int, batch_size: int) -> int:
        """Batches every rank takes per epoch."""
        return self.stream.steps(world_size, batch_size)

    def sample(self, cap: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """The train rows scored after each epoch."""
        return self.stream.sample(cap, seed)

    def epoch_batches(self, epoch: int, rank: int, world_size: int, batch_size: int,
                      start: int = 0) -> Iterator[tuple[Any, Any]]:
        """Batches ``start, start + 1, …`` of this rank's :meth:`steps` batches of ``epoch``.

        The feeder hands over whole preprocessed pieces; they are shuffled through the same
        seeded window and cut into batches as in one process (Ray's own local shuffle buffer
        re-slices Arrow blocks per batch, which cost several times the training step here).
        ``start > 0`` gives exactly the batches an uninterrupted epoch goes on with: the rows
        of the batches before it are not read where whole pieces or (without shuffling) part of
        a piece cover them; only the shuffle window the cut falls in is read again
        (:func:`~fstrain.trainers.stream.pieces.resume_rows`)."""
        steps, buffer = self.steps(world_size, batch_size), self.stream.shuffle_buffer
        if not 0 <= start < steps:
            raise InvalidArgumentError(f"batch {start} of an epoch of {steps} batches "
                                       f"(rank {rank} of {world_size}) does not exist.")
        pieces = self.stream.pieces(rank, world_size)
        rng = self.stream.epoch_rng(epoch, rank) if buffer else None
        used = sum(batch_sizes(sum(p[2] for p in pieces), batch_size, steps)[:start])
        seek, drop = resume_rows(pieces, used, buffer, rng) if start else (0, 0)
        chunks: Iterator[tuple[np.ndarray, np.ndarray]] = regroup(
            self._blocks(epoch, seek), [p[2] for p in seek_pieces(pieces, seek)])
        if rng is not None:
            chunks = window_shuffle(chunks, buffer, rng)
        return exact_batches(rebatch(drop_rows(chunks, drop), batch_size), steps - start,
                             what=f"rank {rank} of {world_size}")

    def _start(self, epoch: int, seek: int = 0) -> None:
        """Fetch ``epoch``'s blocks (after its first ``seek`` rows) in a thread, two ahead of
        the loop (the next epoch's fetch starts when this one's data ends, overlapping its
        validation)."""
        assert self.feed is not None, "RayShardStream without a feed has no rows to read"
        feed, pieces = self.feed, queue.Queue[Any](maxsize=2)

        def pump() -> None:
            try:
                for chunk in feed.blocks(epoch, seek):
                    pieces.put(chunk)
                pieces.put(None)
            except BaseException as exc:  # handed to the loop's thread
                pieces.put(exc)

        threading.Thread(target=pump, name=f"ray-data-epoch-{epoch}", daemon=True).start()
        self._ahead = ((epoch, seek), pieces)

    def _blocks(self, epoch: int, seek: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if self._ahead is None or self._ahead[0] != (epoch, seek):
            self._start(epoch, seek)
        assert self._ahead is not None
        pieces, self._ahead = self._ahead[1], None
        while (item := pieces.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
        if epoch + 1 < self.epochs:
            self._start(epoch + 1)
