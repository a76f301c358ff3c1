"""Fetch a joined group's columns by row id, after a point-in-time join has matched the rows.

An ASOF join's cost is its sorts, and DuckDB sorts each side with every column it carries: a
group joined with eight feature columns cost 1.7× the same join on keys alone. So the compiler
(:mod:`feature_store.local.pit`) lets a point-in-time-joined group carry only its keys, event
time and :data:`~feature_store.local.engine.ROW_ID` through the join, and this module reads the
group's selected columns from the same pinned files, through the same scan (same types, the same
typed NULLs for columns that older files lack), and takes the matched rows. A row id that is
null (no match, or a match older than the lookback) gives nulls.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from feature_store.local import engine
from feature_store.local.engine import quote_ident as q

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future
    from types import TracebackType

    import duckdb

    from feature_store.local.pit import Gather

_ROW_MASK = (1 << engine.ROW_ID_FILE_SHIFT) - 1


class GatherReads:
    """Reads each gathered group's columns on its own cursor, in the background.

    Enter before running the join; :meth:`take` then waits for the reads and takes the matched
    rows, every column of every group in one thread pool.
    """

    def __init__(self, gathers: list[Gather]) -> None:
        self._gathers = gathers
        self._pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1))
        self._reads: list[Future[pa.Table]] = []

    def __enter__(self) -> GatherReads:
        self._reads = [self._pool.submit(_read, g) for g in self._gathers]
        return self

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
        def locate(gather: Gather, read: Future[pa.Table]) -> tuple[pa.Table, Rows]:
            source = read.result()
            return source, positions(source[engine.ROW_ID], row_ids[gather.row_column])

        pairs = list(zip(self._gathers, self._reads, strict=True))
        located = [self._pool.submit(locate, gather, read) for gather, read in pairs]
        jobs = []
        for gather, done in zip(self._gathers, located, strict=True):
            source, rows = done.result()
            for src, name in gather.columns:
                jobs.append((name, self._pool.submit(rows.take, source[src])))
        return {name: job.result() for name, job in jobs}


def _read(gather: Gather) -> pa.Table:
    con = engine.connect()
    try:
        node = gather.node
        scan = engine.scan(con, node.fg._table, node.commit, row_id=True)
        return read_with_row_ids(con, scan, [src for src, _ in gather.columns]).combine_chunks()
    finally:
        con.close()


def read_with_row_ids(
    con: duckdb.DuckDBPyConnection, scan_sql: str, columns: list[str]
) -> pa.Table:
    """``columns`` of a scan made with ``row_id=True``, plus its row ids, in file order."""
    select = ", ".join([q(engine.ROW_ID)] + [q(c) for c in columns])
    return con.sql(f"SELECT {select} FROM {scan_sql}").to_arrow_table()


def positions(source_ids: pa.ChunkedArray, wanted: pa.ChunkedArray | pa.Array) -> Rows:
    """Where each ``wanted`` row id sits in ``source_ids`` (null: no row).

    A full scan yields its row ids in file order, file by file from row 0, which makes a row's
    position the count of rows in earlier files plus its row number: that layout is checked
    (and the general search used when it does not hold), and so is every wanted id.
    """
    src = _int64(source_ids)
    want = wanted.combine_chunks() if isinstance(wanted, pa.ChunkedArray) else wanted
    missing = want.is_null().to_numpy(zero_copy_only=False) if want.null_count else None
    ids = (want.fill_null(0) if missing is not None else want).to_numpy(zero_copy_only=False)
    ids = ids.astype(np.int64, copy=False)
    if len(src) == 0:
        if missing is None or not missing.all():
            raise AssertionError("matched a row id in a scan that yielded no rows")
        return Rows(None, missing)
    layout = _file_layout(src)
    if layout is not None:
        offsets, counts = layout
        files = ids >> engine.ROW_ID_FILE_SHIFT
        rows = ids & _ROW_MASK
        valid = (files >= 0) & (files < len(counts))
        valid &= rows < counts[np.where(valid, files, 0)]
        if missing is not None:
            valid |= missing
        if not valid.all():
            raise AssertionError("a matched row id is not in the scan it was matched from")
        found = offsets[np.where(files < len(counts), files, 0)] + rows
    else:
        order = np.argsort(src, kind="stable")
        found = order[np.minimum(np.searchsorted(src, ids, sorter=order), len(src) - 1)]
        hit = src[found] == ids
        if missing is not None:
            hit |= missing
        if not hit.all():
            raise AssertionError("a matched row id is not in the scan it was matched from")
    if missing is not None:
        found[missing] = 0
    return Rows(pa.array(found, type=pa.int64()), missing)


class Rows:
    """Positions to take (any valid position where there is no row) and which rows are none."""

    def __init__(self, at: pa.Array | None, missing: np.ndarray | None) -> None:
        self.at = at
        self.missing = missing

    def take(self, column: pa.ChunkedArray) -> pa.Array:
        """``column`` at these positions, null where there is no row."""
        if self.at is None:
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
        if pa.types.is_primitive(kind) and not pa.types.is_boolean(kind) and taken.offset == 0:
            validity = pa.py_buffer(np.packbits(keep, bitorder="little"))
            return pa.Array.from_buffers(kind, len(taken), [validity, taken.buffers()[1]])
        import pyarrow.compute as pc

        return pc.if_else(pa.array(keep), taken, pa.scalar(None, kind))


def _int64(column: pa.ChunkedArray) -> np.ndarray:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _file_layout(src: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Rows before each file and rows in it, if ``src`` runs file by file from row 0 without
    gaps; else None."""
    files = src >> engine.ROW_ID_FILE_SHIFT
    if files[0] < 0 or not np.all(src[1:] > src[:-1]):
        return None
    counts = np.bincount(files)
    offsets = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=offsets[1:])
    present = counts > 0
    first = src[offsets[present]] & _ROW_MASK
    last = src[offsets[present] + counts[present] - 1] & _ROW_MASK
    if np.any(first != 0) or np.any(last != counts[present] - 1):
        return None
    return offsets, counts
