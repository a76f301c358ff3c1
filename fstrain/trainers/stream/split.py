"""One split of a :class:`~fstrain.trainers.stream.source.StreamSource` as the torch loop's
streamed dataset in this process (``torch.streaming: true``, data larger than memory): this rank's
pieces, read and preprocessed a thread ahead of the loop (:func:`~.pieces.read_ahead`), shuffled
through a seeded window and cut into exactly as many batches as every rank takes
(:mod:`~fstrain.trainers.stream.pieces`). The Ray Train workers of ``--workers N`` read the same
pieces through Ray Data instead (:mod:`~fstrain.trainers.stream.ray_feed`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any
import hashlib
import json

import numpy as np

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.trainers.stream.pieces import (
    batch_sizes,
    drop_rows,
    exact_batches,
    rank_pieces,
    read_ahead,
    rebatch,
    skip_windows,
    window_shuffle,
)
from fstrain.trainers.stream.prep import StreamPrep
from fstrain.trainers.stream.source import Piece, StreamSource

DEFAULT_SHUFFLE_BUFFER = 16_384


class SplitStream:
    """One split of a :class:`StreamSource` as the loop's streamed dataset (see the module
    docstring for sharding, step counts and shuffling)."""

    streamed = True
    #: :meth:`epoch_batches` starts an epoch at any batch (a mid-epoch checkpoint's resume)
    resumes_mid_epoch = True

    def __init__(self, source: StreamSource, split: str, prep: StreamPrep, *,
                 shuffle_buffer: int = 0, seed: int = 0) -> None:
        self.source, self.split, self.prep = source, split, prep
        self.shuffle_buffer, self.seed = shuffle_buffer, seed

    def __len__(self) -> int:
        return self.source.rows(self.split)

    def layout(self) -> dict[str, Any]:
        """What the batches depend on besides the seed and options: the split's rows and its
        units' sizes, row groups or (csv, jsonl) text pieces (a checkpoint records it; another
        layout refuses the resume)."""
        sizes = self.source.group_rows[self.split]
        digest = hashlib.sha256(json.dumps(list(sizes)).encode()).hexdigest()[:16]
        text = self.source.texts.get(self.split)
        if text is None:
            return {"rows": len(self), "row_groups": len(sizes),
                    "row_group_sizes_sha256": digest}
        return {"rows": len(self), "text_format": text.data_format, "text_pieces": len(sizes),
                "text_piece_rows_sha256": digest}

    def shards(self, world_size: int) -> dict[str, Any]:
        """What a mid-epoch resume on ``world_size`` ranks needs to find each rank's place: the
        :meth:`layout` and a hash of every rank's pieces (a checkpoint records it; a resume
        dealing other pieces is refused)."""
        dealt = json.dumps([self.pieces(rank, world_size) for rank in range(world_size)])
        return {**self.layout(), "world_size": world_size, "shuffle_buffer": self.shuffle_buffer,
                "pieces_sha256": hashlib.sha256(dealt.encode()).hexdigest()[:16]}

    def pieces(self, rank: int, world_size: int) -> list[Piece]:
        """This rank's pieces (dealt once per run from ``seed`` when shuffling)."""
        seed = self.seed if self.shuffle_buffer else None
        return rank_pieces(self.source.group_rows[self.split], rank, world_size, seed)

    def steps(self, world_size: int, batch_size: int) -> int:
        """Batches every rank takes per epoch."""
        return max(1, math.ceil(math.ceil(len(self) / world_size) / batch_size))

    def piece_arrays(self, piece: Piece) -> tuple[np.ndarray, np.ndarray]:
        """Read and preprocess one piece."""
        X, y = self.source.read(self.split, piece)
        return self.prep.arrays(X, y, self.split)

    def epoch_rng(self, epoch: int, rank: int) -> np.random.Generator:
        """The generator of one rank's epoch order."""
        return np.random.default_rng((self.seed, epoch, rank))

    def epoch_batches(self, epoch: int, rank: int, world_size: int, batch_size: int,
                      start: int = 0) -> Iterator[tuple[Any, Any]]:
        """Batches ``start, start + 1, …`` of this rank's :meth:`steps` batches of ``epoch``, in
        the epoch's seeded order.

        ``start > 0`` (a run resumed from a mid-epoch checkpoint) gives exactly the batches an
        uninterrupted epoch would go on with, without reading the rows already trained on:
        shuffle windows wholly before batch ``start`` only advance the generator (a
        permutation of their row count, computed from the row-group sizes), the rest is read
        and the window's rows before the batch dropped."""
        steps = self.steps(world_size, batch_size)
        if not 0 <= start < steps:
            raise InvalidArgumentError(f"batch {start} of an epoch of {steps} batches "
                                       f"(rank {rank} of {world_size}) does not exist.")
        pieces = self.pieces(rank, world_size)
        rng = self.epoch_rng(epoch, rank) if self.shuffle_buffer else None
        if rng is not None:
            pieces = [pieces[int(i)] for i in rng.permutation(len(pieces))]
        skip = sum(batch_sizes(sum(p[2] for p in pieces), batch_size, steps)[:start])
        pieces, drop = skip_windows(pieces, skip, self.shuffle_buffer, rng)
        chunks: Iterable[tuple[np.ndarray, np.ndarray]] = read_ahead(
            map(self.piece_arrays, pieces))
        if rng is not None:
            chunks = window_shuffle(chunks, self.shuffle_buffer, rng)
        return exact_batches(rebatch(drop_rows(chunks, drop), batch_size), steps - start,
                             what=f"rank {rank} of {world_size}")

    def batches(self, rank: int, world_size: int, batch_size: int) -> Iterator[tuple[Any, Any]]:
        """This rank's rows in file order (validation)."""
        pieces = rank_pieces(self.source.group_rows[self.split], rank, world_size)
        return rebatch(map(self.piece_arrays, pieces), batch_size)

    def sample(self, cap: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """At most ``cap`` rows drawn with ``seed`` (row groups in a seeded order, read until
        ``cap`` rows are in hand): the train rows the loop scores after every epoch."""
        xs, ys, have = [], [], 0
        for piece in rank_pieces(self.source.group_rows[self.split], 0, 1, seed):
            x, y = self.piece_arrays(piece)
            xs.append(x)
            ys.append(y)
            have += len(y)
            if have >= cap:
                break
        x, y = np.concatenate(xs), np.concatenate(ys)
        rows = np.sort(np.random.default_rng(seed).permutation(len(y))[:cap])
        return x[rows], y[rows]

    def labels_and_rows(self) -> tuple[np.ndarray, int]:
        """Every label of the split in file order (validation: for calibration)."""
        ys = [y for _, y in (self.piece_arrays(p) for p in rank_pieces(
            self.source.group_rows[self.split], 0, 1))]
        y = np.concatenate(ys) if ys else np.zeros(0, np.int64)
        return y, len(y)
