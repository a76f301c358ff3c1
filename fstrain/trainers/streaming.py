"""The streamed input of the torch MLP loop: Parquet row groups (or row-aligned pieces of a csv
or jsonl file) → train-fitted preprocessing → batches, never the whole split in memory.

One path serves both consumers:

- the single-process loop (``torch.streaming: true``, data larger than memory) iterates a
  :class:`SplitStream` in this process;
- every Ray Train worker of ``--workers N`` reads its shard through Ray Data
  (:mod:`fstrain.trainers.ray_input`): the same pieces, read and preprocessed by the same
  :meth:`SplitStream.piece_arrays` inside Ray Data tasks.

**Pieces and shards.** A split file's row groups are put in an order drawn from ``seed`` (file
order without shuffling) and the concatenated rows are cut into ``world_size`` contiguous ranges
of equal size (sizes differ by at most one row). A piece is ``(row_group, offset, length)``
(a text version's pieces of text take the row groups' place, their rows counted first); a
rank reads exactly its pieces, so every row is read by exactly one rank per epoch — no padding,
no dropped remainder. Every rank takes the same number of optimizer steps
(``ceil(ceil(n / world) / batch_size)``): a rank one row short splits its last full batch in two.

**Shuffling.** Per epoch, the rank's pieces are visited in an order drawn from
``(seed, epoch, rank)`` and rows are shuffled within windows of ``shuffle_buffer`` rows by a
generator seeded the same way: the same seed, epoch and world size give the same batches. In one
process, a thread reads and preprocesses pieces up to two ahead of the loop (:func:`read_ahead`).

**Preprocessing.** :class:`StreamPrep` holds the ``ColumnTransformer`` fitted on the train split
(in memory from frames, or by a streamed pass: :mod:`fstrain.trainers.stream_fit`) and applies
it per piece, exactly as the in-memory path applies it to the whole split.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import IntegrityError, InvalidArgumentError
from fstrain.trainers.data import FeatureSchema, LabelInfo

DEFAULT_SHUFFLE_BUFFER = 16_384
#: row-group size of the Parquet files written for frames handed to the Ray path
ROW_GROUP_ROWS = 16_384

Piece = tuple[int, int, int]  # (row group, offset in it, rows)


@dataclass(frozen=True)
class StreamSource:
    """The split files of one training run (picklable: Ray tasks read them too).

    ``shaper`` is the feature view's shaper (selection and model-dependent transformations
    with train-fitted statistics) handed out with a streamed read of a version; without one,
    a file's columns are ``features`` and the ``label`` column.

    A unit of a split (``group_rows[split][i]`` rows) is a row group of its Parquet file, or,
    for a split in ``texts`` (a csv or jsonl version), a row-aligned piece of the file's text
    (the index the view hands out with a streamed read: its bytes checked against the recorded
    sha256, every piece read checking that the file is still the one indexed).
    """

    files: dict[str, str]
    group_rows: dict[str, tuple[int, ...]]
    shaper: Any = None
    features: tuple[str, ...] = ()
    label: str = ""
    texts: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_files(cls, files: Mapping[str, str | Path], *, shaper: Any = None,
                   features: tuple[str, ...] = (), label: str = "") -> StreamSource:
        """A source over ``{split: path}``; row-group sizes come from the files' footers."""
        import pyarrow.parquet as pq

        groups = {}
        for split, path in files.items():
            meta = pq.ParquetFile(path).metadata
            groups[split] = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
        return cls({s: str(p) for s, p in files.items()}, groups, shaper, tuple(features), label)

    @classmethod
    def from_text_pieces(cls, indexes: Mapping[str, Any], *, shaper: Any) -> StreamSource:
        """A source over ``{split: index}`` of a csv or jsonl version's row-aligned pieces
        (``text_pieces.TextIndex``es, as a streamed ``"torch"`` read hands them out); the rows
        of every piece are counted from its bytes first."""
        return cls({s: str(i.path) for s, i in indexes.items()},
                   {s: tuple(i.piece_rows()) for s, i in indexes.items()}, shaper,
                   texts=dict(indexes))

    @classmethod
    def from_frames(cls, directory: Path, splits: dict[str, tuple[pd.DataFrame, pd.DataFrame]],
                    ) -> StreamSource:
        """Write in-memory ``{split: (X, y)}`` frames once as Parquet under ``directory`` (the
        Ray path then reads files, not a pickled frame per worker)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from fstrain.trainers.data import label_series

        directory.mkdir(parents=True, exist_ok=True)
        files: dict[str, Path] = {}
        features: tuple[str, ...] = ()
        label = ""
        for split, (X, y) in splits.items():
            series = label_series(y, split=split)
            label, features = str(series.name), tuple(str(c) for c in X.columns)
            frame = X.reset_index(drop=True).assign(**{label: series.to_numpy()})
            path = directory / f"{split}.parquet"
            pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                           row_group_size=ROW_GROUP_ROWS)
            files[split] = path
        return cls.from_files(files, features=features, label=label)

    def rows(self, split: str) -> int:
        """Rows of ``split``."""
        return int(sum(self.group_rows[split]))

    def read(self, split: str, piece: Piece) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``(X, y)`` frames of one piece."""
        import pyarrow.parquet as pq

        group, offset, length = piece
        columns = (self.shaper.columns() if self.shaper is not None
                   else [*self.features, self.label])
        if split in self.texts:
            table = self.texts[split].read(group, columns)
            if table.num_rows != self.group_rows[split][group]:
                raise IntegrityError(
                    f"piece {group} of {self.files[split]} ({split} split) parsed to "
                    f"{table.num_rows} rows where its bytes hold {self.group_rows[split][group]}"
                    ": the file does not read as it was written; recreate the version.")
        else:
            table = pq.ParquetFile(self.files[split]).read_row_group(group, columns=columns)
        table = table.slice(offset, length)
        if self.shaper is not None:
            X, y = self.shaper.shape(table)
            if y is None:
                raise InvalidArgumentError("the feature view has no labels; a model needs one.")
            return X, y
        frame = table.to_pandas()
        return frame[list(self.features)], frame[[self.label]]


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


@dataclass(frozen=True)
class StreamPrep:
    """The train-fitted preprocessing applied to every piece (picklable)."""

    schema: FeatureSchema
    preprocessor: Any
    labels: LabelInfo

    def arrays(self, X: pd.DataFrame, y: pd.DataFrame, split: str) -> tuple[np.ndarray, np.ndarray]:
        """Float32 feature matrix and encoded labels of one piece."""
        from fstrain.trainers.preprocessing import transform

        return transform(self.preprocessor, self.schema, X), self.labels.encode(y, split=split)


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
        import hashlib
        import json

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
        import hashlib
        import json

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
    import queue
    import threading

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
