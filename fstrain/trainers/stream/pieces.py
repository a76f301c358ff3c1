"""Who reads which rows of a split, in which order, in batches of which sizes — pure functions
over a :class:`~fstrain.trainers.stream.source.StreamSource`'s unit sizes.

**Pieces and shards.** A split file's units (row groups, or pieces of text) are put in an order
drawn from ``seed`` (file order without shuffling) and the concatenated rows are cut into
``world_size`` contiguous ranges of equal size (sizes differ by at most one row): a rank reads
exactly its pieces, so every row is read by exactly one rank per epoch — no padding, no dropped
remainder. Every rank takes the same number of optimizer steps
(``ceil(ceil(n / world) / batch_size)``): a rank one row short splits its last full batch in two
(:func:`exact_batches`).

**Shuffling.** Per epoch, a rank's pieces are visited in an order drawn from
``(seed, epoch, rank)`` and rows are shuffled within windows of ``shuffle_buffer`` rows by a
generator seeded the same way (:func:`window_shuffle`): the same seed, epoch and world size give
the same batches.

**Resuming mid-epoch.** The rows before a batch are known from the piece sizes alone, so a
resumed epoch skips whole pieces (and, without shuffling, part of one) unread and reads again
only the shuffle window the cut falls in (:func:`skip_windows`, :func:`seek_pieces`,
:func:`resume_rows`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any
import queue
import threading

import numpy as np

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.trainers.stream.source import Piece


def rank_pieces(group_rows: tuple[int, ...], rank: int, world_size: int,
                seed: int | None = None) -> list[Piece]:
    """Rank ``rank``'s contiguous share of the rows, as pieces of row groups (row groups in an
    order drawn from ``seed``; file order when ``seed`` is None)."""
    order = np.arange(len(group_rows))
    if seed is not None:
        order = np.random.default_rng(seed).permutation(order)
    sizes = np.asarray(group_rows, dtype=np.int64)[order]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    n = int(starts[-1])
    lo, hi = rank * n // world_size, (rank + 1) * n // world_size
    pieces = []
    for group, start, size in zip(order, starts[:-1], sizes, strict=True):
        s, e = max(lo, int(start)), min(hi, int(start + size))
        if s < e:
            pieces.append((int(group), s - int(start), e - s))
    return pieces


def batch_sizes(rows: int, batch_size: int, steps: int) -> list[int]:
    """The row counts of the ``steps`` batches :func:`exact_batches` cuts ``rows`` rows into."""
    full = [batch_size] * (steps - 1)
    if rows > (steps - 1) * batch_size:
        return [*full, rows - (steps - 1) * batch_size]
    last = rows - (steps - 2) * batch_size  # one batch short: the last full one is halved
    return [*full[:-1], last // 2, last - last // 2]


def skip_windows(pieces: list[Piece], rows: int, window: int,
                 rng: np.random.Generator | None) -> tuple[list[Piece], int]:
    """The pieces left after skipping the first ``rows`` rows of the stream, and how many rows
    of what they yield (after :func:`window_shuffle`) still precede the resume point.

    A shuffle window ends after the piece that brings it to ``window`` rows; a window wholly
    inside the skipped rows is not read, but its permutation is drawn, so ``rng`` is where an
    uninterrupted pass would have left it. Without shuffling (``rng`` None) whole pieces are
    skipped."""
    begin, have, first = 0, 0, 0  # rows before the open window, rows in it, its first piece
    for index, piece in enumerate(pieces):
        if rng is None:
            if begin + piece[2] > rows:
                return pieces[index:], rows - begin
            begin += piece[2]
            continue
        have += piece[2]
        if have >= window:
            if begin + have > rows:
                return pieces[first:], rows - begin
            rng.permutation(have)  # the generator as the skipped window left it
            begin, have, first = begin + have, 0, index + 1
    return pieces[first:] if rng is not None else [], rows - begin


def seek_pieces(pieces: list[Piece], rows: int) -> list[Piece]:
    """``pieces`` without their first ``rows`` rows: whole pieces dropped by count, the piece
    the cut falls in sliced (its row group is then read from the cut on), nothing read."""
    for index, (group, offset, length) in enumerate(pieces):
        if rows < length:
            return [(group, offset + rows, length - rows), *pieces[index + 1:]]
        rows -= length
    return []


def resume_rows(pieces: list[Piece], rows: int, window: int,
                rng: np.random.Generator | None) -> tuple[int, int]:
    """Where an epoch over ``pieces`` (in this order) whose first ``rows`` rows were trained
    on picks up: ``(rows not read at all, rows read but dropped after the shuffle)``.

    Without shuffling (``rng`` None) every used row is skipped (:func:`seek_pieces` slices the
    piece the cut falls in). With shuffling, the shuffle window the cut falls in is read whole
    (its permutation draws over all its rows) and its rows before the cut are dropped; windows
    wholly before the cut are skipped and ``rng`` is advanced past them (:func:`skip_windows`).
    Whole pieces are assumed to be the chunks :func:`window_shuffle` gets (:func:`regroup`)."""
    if rng is None:
        return rows, 0
    _, drop = skip_windows(pieces, rows, window, rng)
    return rows - drop, drop


def regroup(chunks: Iterable[tuple[np.ndarray, np.ndarray]],
            sizes: Iterable[int]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``chunks`` re-cut into chunks of ``sizes`` rows (the pieces': a shuffle window's rows
    then do not depend on how a reader blocked them); chunks already of those sizes pass as
    they are. A stream of other total rows is refused."""
    want = iter(sizes)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    have = 0
    need = next(want, None)
    for x, y in chunks:
        xs.append(x)
        ys.append(y)
        have += len(y)
        while need is not None and have >= need:
            X, Y = (np.concatenate(xs), np.concatenate(ys)) if len(xs) > 1 else (xs[0], ys[0])
            yield X[:need], Y[:need]
            xs, ys, have = [X[need:]], [Y[need:]], have - need
            need = next(want, None)
        if need is None and have:
            break
    if need is not None or have:
        raise InvalidArgumentError(
            f"a streamed shard's blocks do not add up to its pieces: {have} row(s) "
            f"{'left over' if need is None else f'short of a {need}-row piece'}.")


def drop_rows(chunks: Iterable[tuple[np.ndarray, np.ndarray]],
              rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``chunks`` without their first ``rows`` rows."""
    for x, y in chunks:
        if rows >= len(y):
            rows -= len(y)
            continue
        if rows:
            x, y, rows = x[rows:], y[rows:], 0
        yield x, y


def read_ahead(items: Iterable[Any], depth: int = 2) -> Iterator[Any]:
    """``items`` produced by a thread up to ``depth`` ahead of the consumer (Parquet decoding
    and the preprocessing overlap the training step; memory stays bounded)."""
    ready: queue.Queue[Any] = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                ready.put(item)
            ready.put(done)
        except BaseException as exc:  # handed to the consumer
            ready.put(exc)

    thread = threading.Thread(target=produce, name="stream-read-ahead", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:  # an abandoned epoch (early stop, error) lets the producer finish
        stop.set()
        while thread.is_alive():
            try:
                ready.get(timeout=0.1)
            except queue.Empty:
                pass


class Reiterable:
    """Calls ``make()`` for every pass (a loader the loop iterates once per epoch)."""

    def __init__(self, make: Any) -> None:
        self.make = make

    def __iter__(self) -> Iterator[Any]:
        return iter(self.make())


def window_shuffle(chunks: Iterable[tuple[np.ndarray, np.ndarray]], window: int,
                   rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Rows shuffled within consecutive windows of at least ``window`` rows."""
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    have = 0
    for x, y in chunks:
        xs.append(x)
        ys.append(y)
        have += len(y)
        if have >= window:
            order = rng.permutation(have)
            yield np.concatenate(xs)[order], np.concatenate(ys)[order]
            xs, ys, have = [], [], 0
    if have:
        order = rng.permutation(have)
        yield np.concatenate(xs)[order], np.concatenate(ys)[order]


def rebatch(chunks: Iterable[tuple[np.ndarray, np.ndarray]],
            batch_size: int) -> Iterator[tuple[Any, Any]]:
    """Torch batches of ``batch_size`` rows (the last one shorter) from array chunks."""
    import torch

    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    have = 0
    for x, y in chunks:
        xs.append(x)
        ys.append(y)
        have += len(y)
        if have < batch_size:
            continue
        X, Y = (np.concatenate(xs), np.concatenate(ys)) if len(xs) > 1 else (xs[0], ys[0])
        cut = have - have % batch_size
        for start in range(0, cut, batch_size):
            yield (torch.from_numpy(np.ascontiguousarray(X[start:start + batch_size])),
                   torch.from_numpy(np.ascontiguousarray(Y[start:start + batch_size])))
        xs, ys, have = [X[cut:]], [Y[cut:]], have - cut
    if have:
        yield torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))


def exact_batches(batches: Iterable[tuple[Any, Any]], steps: int, *,
                  what: str) -> Iterator[tuple[Any, Any]]:
    """Exactly ``steps`` batches: a stream one batch short splits its last batch in two (a rank
    with one row fewer than the others), so every data-parallel rank steps as often."""
    prev, count = None, 0
    for batch in batches:
        if prev is not None:
            yield prev
            count += 1
        prev = batch
    if prev is not None and count + 1 == steps:
        yield prev
        return
    if prev is not None and count + 2 == steps and len(prev[1]) >= 2:
        half = len(prev[1]) // 2
        yield prev[0][:half], prev[1][:half]
        yield prev[0][half:], prev[1][half:]
        return
    rows = count if prev is None else count + 1
    raise InvalidArgumentError(
        f"streamed input of {what} yielded {rows} batch(es) where every rank needs {steps}: "
        "the train split has too few rows for this many workers and this batch size. Use "
        "fewer workers or a larger split."
    )
