"""Row-aligned pieces of a csv or jsonl split file: the unit of work of its torch and Ray streams.

A Parquet split file has row groups, each readable on its own; a text file has none. So one
pass over a text split file's bytes finds where rows end about every :data:`PIECE_BYTES`
bytes, and takes the file's sha256 on the way (the caller checks it against the recorded one,
so an index exists only for verified bytes):

- jsonl: every newline ends a row (``json.dumps`` escapes newlines inside values);
- csv: a newline ends a row when an even number of ``"`` precede it in the file (the writer
  quotes every string and doubles the quotes inside one, so a newline inside a quoted value
  always has an odd number before it); the first such newline ends the header line.

Piece ``i`` is the bytes ``[bounds[i], bounds[i + 1])``: whole rows, at least
:data:`PIECE_BYTES` long except the last (a row longer than that makes a longer piece). A piece
is read by offset and parsed on its own (csv: behind the file's header line) by the same rules
as the in-memory read (:func:`~feature_store.local.readers.text_split_reader.parse_text`), so the pieces
in order hold the file's rows, values and types. Every piece read first and last checks that the
file is still the one indexed (inode, size, modification and change times, as the verified-file
cache does; not the device, which differs between the nodes mounting shared storage): a file
replaced or written after it was verified is refused while its rows are handed out.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from feature_store.local.readers.split_files import settled
from feature_store.local.readers.text_split_reader import parse_text
from feature_store.local.storage.storage_errors import changed_split, unreadable_split
from fstrain.kernel.errors import IntegrityError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: Bytes of text per piece (the shuffle and sharding unit of a text version's torch dataset, and
#: one Ray block): about as much as ``arrow_batches`` parses at a time.
PIECE_BYTES = 1 << 20
_READ_BYTES = 8 << 20  # bytes read at a time while indexing


@dataclass(frozen=True)
class TextIndex:
    """Where the rows of one csv or jsonl split file can be cut (picklable: shipped to Ray
    workers and DataLoader workers, which read pieces without indexing again)."""

    path: Path
    data_format: str
    schema: pa.Schema
    identity: tuple[int, ...]
    header: bytes
    bounds: tuple[int, ...]
    owner: str
    split: str

    @property
    def pieces(self) -> int:
        """How many pieces the file has (0: no rows)."""
        return max(len(self.bounds) - 1, 0)

    def piece_bytes(self, piece: int) -> int:
        """The length of piece ``piece`` in bytes."""
        return self.bounds[piece + 1] - self.bounds[piece]

    def read(self, piece: int, columns: list[str] | None = None) -> pa.Table:
        """Piece ``piece`` as a table (see :func:`read_piece`)."""
        return read_piece(self, piece, columns)

    def piece_rows(self) -> tuple[int, ...]:
        """The rows of every piece (see :func:`piece_rows`)."""
        return piece_rows(self)


class _RowEnds:
    """Finds the piece bounds of a file fed to it block by block, in order."""

    def __init__(self, csv: bool, piece_bytes: int) -> None:
        self.csv, self.piece_bytes = csv, piece_bytes
        self.offset = 0  # file offset of the block being fed
        self.quotes = 0  # '"' counted so far (csv)
        self.header_end: int | None = None if csv else 0
        self.bounds: list[int] = [] if csv else [0]
        self.target = 0 if csv else piece_bytes  # the next bound: the first row end from here

    def feed(self, block: bytes) -> None:
        counted = 0  # quotes of block[:counted] are in self.quotes
        while (look := max(self.target - self.offset, 0)) < len(block):
            at = block.find(b"\n", look)
            if at < 0:
                break
            if self.csv:
                self.quotes += block.count(b'"', counted, at)
                counted = at
                if self.quotes % 2:  # inside a quoted value: try the next newline
                    self.target = self.offset + at + 1
                    continue
            end = self.offset + at + 1
            if self.header_end is None:
                self.header_end = end
            self.bounds.append(end)
            self.target = end + self.piece_bytes
        if self.csv:
            self.quotes += block.count(b'"', counted)
        self.offset += len(block)

    def finish(self) -> tuple[int, list[int]]:
        """``(header_end, bounds)`` once the whole file was fed."""
        if self.header_end is None:  # no complete header line: no rows
            return self.offset, [self.offset]
        bounds = self.bounds
        if bounds[-1] < self.offset:  # the last row has no newline
            bounds.append(self.offset)
        return self.header_end, bounds


def identity(st: os.stat_result) -> tuple[int, ...]:
    """What changes whenever a file's bytes can have changed (as the verified-file cache)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _same_file(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return a[1:] == b[1:]  # not the device: another node's mount of the same file has another


class _Indexes:
    """Indexes (and the sha256 taken with them) of files whose identity settled, per process
    (bounded, least recently used first out; thread-safe)."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.entries: OrderedDict[Any, tuple[TextIndex, str]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any) -> tuple[TextIndex, str] | None:
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
            return found

    def put(self, key: Any, value: tuple[TextIndex, str]) -> None:
        with self.lock:
            self.entries[key] = value
            while len(self.entries) > self.capacity:
                self.entries.popitem(last=False)


_INDEXES = _Indexes()


def index_file(path: Path, data_format: str, schema: pa.Schema, *, owner: str,
               split: str, piece_bytes: int | None = None) -> tuple[TextIndex, str]:
    """Index the csv or jsonl split file ``path`` into row-aligned pieces of about
    ``piece_bytes`` (default :data:`PIECE_BYTES`) in one pass, and return the index with the
    sha256 of the bytes it indexed. A missing file, or one written while indexed, is an
    :class:`IntegrityError`; a file whose identity did not change since it was indexed in this
    process is not read again (unless it was changed within the last 2 s)."""
    size = piece_bytes or PIECE_BYTES
    try:
        with open(path, "rb") as fh:
            before = identity(os.fstat(fh.fileno()))
            key = (str(path), before, data_format, size, schema, owner, split)
            cached = _INDEXES.get(key)
            if cached is not None:
                return cached
            digest, ends = hashlib.sha256(), _RowEnds(data_format == "csv", size)
            first = b""  # the header line starts there
            while block := fh.read(_READ_BYTES):
                digest.update(block)
                first = first or block
                ends.feed(block)
            after = identity(os.fstat(fh.fileno()))
    except FileNotFoundError:
        raise IntegrityError(f"{owner}: file {path} is missing.") from None
    if after != before:
        raise changed_split(owner, path, split)
    header_end, bounds = ends.finish()
    head = _header(path, first, header_end) if data_format == "csv" else b""
    index = TextIndex(Path(path), data_format, schema, before, head, tuple(bounds), owner, split)
    found = (index, digest.hexdigest())
    if settled(before):
        _INDEXES.put(key, found)
    return found


def _header(path: Path, first: bytes, header_end: int) -> bytes:
    """The csv header line (read again when it is longer than the first block)."""
    if header_end <= len(first):
        return first[:header_end]
    with open(path, "rb") as fh:
        return fh.read(header_end)


@contextlib.contextmanager
def _opened(index: TextIndex) -> Iterator[BinaryIO]:
    """The indexed file, open for reading; an :class:`IntegrityError` when it is missing, or
    when it is not the one indexed as it is opened or after it was read."""
    try:
        with open(index.path, "rb") as fh:
            if not _same_file(identity(os.fstat(fh.fileno())), index.identity):
                raise changed_split(index.owner, index.path, index.split)
            yield fh
            if not _same_file(identity(os.fstat(fh.fileno())), index.identity):
                raise changed_split(index.owner, index.path, index.split)
    except FileNotFoundError:
        raise IntegrityError(f"{index.owner}: file {index.path} is missing.") from None


def read_piece(index: TextIndex, piece: int, columns: list[str] | None = None) -> pa.Table:
    """Piece ``piece`` of the indexed file as a table of its schema (only ``columns`` when
    given). The file must still be the one indexed: a changed or replaced file is an
    :class:`IntegrityError`, as is one that no longer parses."""
    import pyarrow as pa

    with _opened(index) as fh:
        fh.seek(index.bounds[piece])
        data = fh.read(index.piece_bytes(piece))
    try:
        table = parse_text(index.header + data, index.data_format, index.schema)
    except MemoryError:  # Arrow's too: out of memory says nothing about the file
        raise
    except (pa.ArrowException, ValueError, KeyError) as exc:
        raise unreadable_split(index.owner, index.path, index.data_format, exc) from exc
    return table.select(columns) if columns is not None else table


def piece_rows(index: TextIndex) -> tuple[int, ...]:
    """How many rows each piece of the indexed file holds, counted from its bytes by the rules
    that cut it (jsonl: newlines; csv: newlines after an even number of ``"`` in the piece,
    which starts at a row), plus an unterminated last row. One more pass over the bytes, without
    parsing (a trainer needs the counts before it reads: its step counts and shards come from
    them); the file must still be the one indexed. A reader that parses a piece to another
    count must refuse it."""
    import numpy as np

    counts = []
    with _opened(index) as fh:
        for piece in range(index.pieces):
            fh.seek(index.bounds[piece])
            data = fh.read(index.piece_bytes(piece))
            rows = data.count(b"\n")
            if index.data_format == "csv" and b'"' in data:
                raw = np.frombuffer(data, dtype=np.uint8)
                outside = (np.cumsum(raw == ord('"'), dtype=np.uint8) & 1) == 0  # parity kept
                rows = int(np.count_nonzero((raw == ord("\n")) & outside))
            counts.append(rows + (1 if data and not data.endswith(b"\n") else 0))
    return tuple(counts)
