"""Fetch a joined group's columns by row id, after a point-in-time join has matched the rows.

An ASOF join's cost is its sorts, and DuckDB sorts each side with every column it carries: a
group joined with eight feature columns cost 1.7× the same join on keys alone. So the compiler
(:mod:`feature_store.local.query.pit`) lets a point-in-time-joined group carry only its keys, event
time and :data:`~feature_store.local.storage.engine.ROW_ID` (file index and row number) through the
join, and this module reads the group's selected columns from the same pinned files, in the same
order, and takes the matched rows. Values come out exactly as the single statement would give
them: each column is cast to the type DuckDB's scan yields, and a column that an older file
lacks (added by schema evolution) reads as nulls there, as in the scan. A null row id (no
match, or a match older than the lookback) gives nulls.

The files are read with pyarrow rather than through DuckDB: it decodes Parquet straight into
Arrow, which costs about half the CPU of DuckDB's scan plus its conversion to Arrow.

Gathering is chosen per group by :class:`GatherPolicy`: only where it pays (files large enough,
enough columns) and while the gathered columns fit a share of memory (DuckDB could spill the
single statement to disk; Arrow columns stay in memory).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from feature_store.local.storage import engine

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future
    from types import TracebackType

    from feature_store.local.storage.delta_table import DeltaFeatureTable
    from feature_store.local.query.query_plan import Gather

_ROW_MASK = (1 << engine.ROW_ID_FILE_SHIFT) - 1

#: A group is gathered only when its files hold this many rows on average: reading a file
#: costs ~0.5 ms on its own, and sorting a row's columns is what gathering saves (a group of
#: 300 files of 1,000 rows read twice as slowly gathered as in one statement).
MIN_ROWS_PER_FILE = 20_000

#: ... and only when the join brings this many columns: joined at 1M × 1M rows, one gathered
#: double column cost 1.14× the single statement, two 1.03×, three 0.96×, eight 0.78×.
MIN_COLUMNS = 3

#: Gathered columns are held in memory while DuckDB could spill the same join to disk, so the
#: groups of one query are gathered only while their estimated size stays under this share of
#: the machine's (or the container's) memory; the rest stay in the statement.
MEMORY_SHARE = 0.25

_VARIABLE_WIDTH_BYTES = 32  # estimate per value of a string or binary column


class GatherPolicy:
    """Decides, group by group within one query, whether gathering pays and fits in memory."""

    def __init__(self) -> None:
        self.budget = int(memory_bytes() * MEMORY_SHARE)

    def admit(self, table: DeltaFeatureTable, version: int, columns: list[str]) -> bool:
        """Whether to gather ``columns`` of ``table`` at ``version`` (and reserve its memory)."""
        if len(columns) < max(1, MIN_COLUMNS):
            return False
        files = len(table.files(version))
        if files == 0:
            return True
        rows = table.row_count(version)
        if rows < MIN_ROWS_PER_FILE * files:
            return False
        schema = table.schema(version)
        size = rows * sum(_value_bytes(schema.field(name).type) for name in columns)
        if size > self.budget:
            return False
        self.budget -= size
        return True


def _value_bytes(kind: pa.DataType) -> int:
    try:
        return max(1, kind.bit_width // 8)
    except ValueError:  # variable width
        return _VARIABLE_WIDTH_BYTES


def memory_bytes() -> int:
    """This process's memory: the cgroup limit where one is set, else the physical memory."""
    for path, unlimited in (("/sys/fs/cgroup/memory.max", "max"),
                            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", None)):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text != unlimited and text.isdigit() and int(text) < 1 << 60:
            return int(text)
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass
class Source:
    """A group's gathered columns over all files of one version, and each file's row count;
    or, for an as-known-joined group, its row versions' columns (``file_rows`` None: a row is
    found by its version id, see :func:`version_source`)."""

    table: pa.Table
    file_rows: np.ndarray | None

    def rows(self, wanted: pa.ChunkedArray | pa.Array) -> Rows:
        """Where each wanted row id (a row version id for row versions) sits in :attr:`table`."""
        if self.file_rows is None:
            return version_positions(self.table.num_rows, wanted)
        return positions(self.file_rows, wanted)


class GatherReads:
    """Reads each gathered group's columns in the background.

    Enter before running the join; :meth:`take` then waits for the reads and takes the matched
    rows, every column of every group in one thread pool. ``versions``: node alias -> the
    :func:`version_source` of each as-known-joined gather (already in memory).
    """

    def __init__(self, gathers: list[Gather], versions: dict[str, Source] | None = None) -> None:
        self._gathers = gathers
        self._versions = versions or {}
        self._pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1))
        self._reads: list[Future[Source]] = []

    def __enter__(self) -> GatherReads:
        self._reads = [self._pool.submit(self._read, g) for g in self._gathers]
        return self

    def _read(self, gather: Gather) -> Source:
        if gather.versions:
            return self._versions[gather.node.alias]
        return read_source(gather)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for read in self._reads:
            read.cancel()
        self._pool.shutdown(wait=True)

    def take(self, row_ids: dict[str, pa.ChunkedArray]) -> dict[str, pa.Array]:
        """Output name → column, for every gathered group, given each group's matched row ids."""

        def locate(gather: Gather, read: Future[Source]) -> tuple[Source, Rows]:
            source = read.result()
            return source, source.rows(row_ids[gather.row_column])

        pairs = list(zip(self._gathers, self._reads, strict=True))
        located = [self._pool.submit(locate, gather, read) for gather, read in pairs]
        jobs = []
        for gather, done in zip(self._gathers, located, strict=True):
            source, rows = done.result()
            for src, name in gather.columns:
                jobs.append((name, self._pool.submit(rows.take, source.table[src])))
        return {name: job.result() for name, job in jobs}


def read_source(gather: Gather) -> Source:
    """Read a gathered group's columns from its pinned files, typed as DuckDB's scan types them."""

    node = gather.node
    table = node.group.delta_table
    names = [src for src, _ in gather.columns]
    con = engine.connect()
    try:
        schema = engine.scan_schema(con, table, node.commit)
    finally:
        con.close()
    wanted = pa.schema([schema.field(name) for name in names])
    parts, rows = [], []
    for path in table.files(node.commit):
        file = pq.ParquetFile(path)
        present = [name for name in names if name in file.schema_arrow.names]
        part = file.read(columns=present) if present else None
        count = file.metadata.num_rows
        columns = [
            part[name].cast(field.type) if part is not None and name in present
            else pa.nulls(count, field.type)
            for name, field in zip(names, wanted, strict=True)
        ]
        parts.append(pa.Table.from_arrays(columns, schema=wanted))
        rows.append(count)
    if not parts:
        return Source(wanted.empty_table(), np.zeros(0, dtype=np.int64))
    combined = pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]
    return Source(combined, np.asarray(rows, dtype=np.int64))


def version_source(versions: pa.Table, columns: list[str], types: pa.Schema) -> Source:
    """An as-known-joined group's gathered ``columns`` of its row versions (the table the
    statement was bound to, whose :data:`~feature_store.local.storage.row_history.VID` is the
    row's position plus one), typed as ``types`` (DuckDB's reading of that table) gives them."""
    taken = versions.select(columns)
    wanted = pa.schema([types.field(name) for name in columns])
    return Source(taken if taken.schema == wanted else taken.cast(wanted), None)


def version_positions(rows: int, wanted: pa.ChunkedArray | pa.Array) -> Rows:
    """Where each wanted row version id sits in a row-version table of ``rows`` rows (ids are
    positions plus one; null: no match)."""
    want = wanted.combine_chunks() if isinstance(wanted, pa.ChunkedArray) else wanted
    missing = want.is_null().to_numpy(zero_copy_only=False) if want.null_count else None
    ids = (want.fill_null(1) if missing is not None else want).to_numpy(zero_copy_only=False)
    at = ids.astype(np.int64, copy=False) - 1
    if rows == 0:
        if missing is None or not missing.all():
            raise AssertionError("matched a row version in a group without any")
        return Rows(None, missing)
    if len(at) and (at.min() < 0 or at.max() >= rows):
        raise AssertionError("a matched row version id is not in the row versions it was matched from")
    return Rows(pa.array(at, type=pa.int64()), missing)


def positions(file_rows: np.ndarray, wanted: pa.ChunkedArray | pa.Array) -> Rows:
    """Where each wanted row id (file index, row number) sits in the files read one after the
    other, ``file_rows`` giving each file's row count (null: no row)."""
    want = wanted.combine_chunks() if isinstance(wanted, pa.ChunkedArray) else wanted
    missing = want.is_null().to_numpy(zero_copy_only=False) if want.null_count else None
    ids = (want.fill_null(0) if missing is not None else want).to_numpy(zero_copy_only=False)
    ids = ids.astype(np.int64, copy=False)
    if len(file_rows) == 0 or file_rows.sum() == 0:
        if missing is None or not missing.all():
            raise AssertionError("matched a row id in a version whose files hold no rows")
        return Rows(None, missing)
    files = ids >> engine.ROW_ID_FILE_SHIFT
    rows = ids & _ROW_MASK
    known = (files >= 0) & (files < len(file_rows))
    files = np.where(known, files, 0)
    known &= rows < file_rows[files]
    if missing is not None:
        known |= missing
    if not known.all():
        raise AssertionError("a matched row id is not in the files it was matched from")
    offsets = np.zeros(len(file_rows), dtype=np.int64)
    np.cumsum(file_rows[:-1], out=offsets[1:])
    found = offsets[files] + rows
    if missing is not None:
        found[missing] = 0
    return Rows(pa.array(found, type=pa.int64()), missing)


class Rows:
    """Positions to take (any valid position where there is no row) and which rows are none."""

    def __init__(self, at: pa.Array | None, missing: np.ndarray | None) -> None:
        self.at = at
        self.missing = missing

    def take(self, column: pa.ChunkedArray | pa.Array) -> pa.Array:
        """``column`` at these positions, null where there is no row."""
        if self.at is None:  # no row matched: every position is missing
            assert self.missing is not None
            return pa.nulls(len(self.missing), column.type)
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        # taking with null positions costs Arrow 4-5x a plain take: take, then null the misses
        taken = array.take(self.at)
        if self.missing is None:
            return taken
        keep = ~self.missing
        if taken.null_count:
            keep &= taken.is_valid().to_numpy(zero_copy_only=False)
        kind = taken.type
        data = taken.buffers()[1]
        lanes = _LANES.get(kind.bit_width) if _numeric_like(kind) else None
        if lanes is not None and taken.offset == 0 and data.is_mutable:
            # the take's fresh buffer is ours alone: zero the missing rows' slots, so the bytes
            # do not depend on which row stood in for them (and hashing needs no copy)
            np.frombuffer(data, dtype=lanes)[: len(taken)][self.missing] = 0
            validity = pa.py_buffer(np.packbits(keep, bitorder="little"))
            return pa.Array.from_buffers(kind, len(taken), [validity, data])

        return pc.if_else(pa.array(keep), taken, pa.scalar(None, kind))


_LANES = {8: "u1", 16: "<u2", 32: "<u4", 64: "<u8"}


def _numeric_like(kind: pa.DataType) -> bool:
    """Fixed-width types stored as one little-endian word per value (not bit-packed)."""
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_timestamp(kind)
            or pa.types.is_date(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind))
