"""Out-of-core creation of materialized training-dataset versions.

The point-in-time query runs in a DuckDB database of its own, with a memory limit and a spill
folder inside the version's staging folder, and its result is consumed as Arrow record batches:

1. the batches are written, in query order, to one scratch Parquet file;
2. the split assignment reads the columns the split strategy reads (event time, label, group or
   stratification column) back from it batch by batch, and gives the same codes (one byte per
   row) as an in-memory create (:func:`feature_store.core.splits.assign_split_codes`), so the
   splits are bit-identical for the same seed; the codes and the assignment's other arrays as
   long as the rows are mapped from files (:class:`ScratchArrays`), not held in memory;
3. the scratch file is read back batch by batch, each batch's rows go to their split's Parquet
   writer (on a thread of its own, the file's sha256 taken from the bytes as they are written),
   and each split's content hash (:class:`~feature_store.core.content_hash.StreamingTableHash`)
   and statistics (:class:`~feature_store.local.storage.statistics.StreamingStatistics`) are fed on
   another thread while the next batch is made.

An unsplit version skips the scratch file. Only one batch (and the assignment's O(distinct
values): classes, groups) is in Python memory at a time; DuckDB spills joins and sorts that
exceed its limit. A partitioned query (:mod:`partitioned_join`) needs no
scratch file of rows: its results are merged as often as the assignment reads its columns, then
once more for the rows (a random split reads no column).
Label distributions are read back from the written files (the label columns alone); the
statistics of strings, booleans and decimals are DuckDB's over the file's columns.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from feature_store.local.query.partitioned_join import bucket_count
from feature_store.local.storage.options import SYNCHRONOUS, check_options
from fstrain.kernel.errors import IntegrityError, InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from feature_store.local.storage.statistics import StreamingStatistics

#: Rows per record batch read from DuckDB and written per Parquet write.
DEFAULT_BATCH_ROWS = 1_000_000
#: Share of physical memory the streaming DuckDB database may use before it spills.
MEMORY_SHARE = 0.25
ROWS_FILE = ".rows.parquet"
SPILL_DIR = ".spill"
PARTS_DIR = ".partitions"
#: the split assignment's arrays (codes and scratch), mapped from files
SCRATCH_DIR = ".split-scratch"


@dataclass(frozen=True)
class StreamOptions:
    """How a materialized version is streamed (``write_options`` keys of the same names)."""

    batch_rows: int = DEFAULT_BATCH_ROWS
    memory_limit: str | None = None
    #: hash partitions of a partitionable query (see ``partitioned_join``); None: from the
    #: memory limit and the groups' sizes; 1: one statement
    partitions: int | None = None

    @classmethod
    def from_write_options(cls, options: dict[str, Any] | None,
                           owner: str = "training dataset") -> StreamOptions:
        """Read ``batch_rows``, ``memory_limit`` and ``partitions`` from ``write_options``; bad
        values and keys
        the local backend has no meaning for are refused, never ignored (``wait_for_job`` is
        honoured by construction)."""
        understood = {**SYNCHRONOUS, "batch_rows": "rows per streamed batch",
                      "memory_limit": "DuckDB's memory limit while streaming",
                      "partitions": "hash partitions the point-in-time joins run in"}
        options = check_options(owner, "write_options", options, understood)
        batch = options.get("batch_rows", DEFAULT_BATCH_ROWS)
        partitions = options.get("partitions")
        for key, value in (("batch_rows", batch), ("partitions", partitions)):
            if value is None and key == "partitions":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(
                    f"write_options[{key!r}] must be a positive integer. Got {value!r} instead."
                )
        limit = options.get("memory_limit")
        if limit is not None and (not isinstance(limit, str) or not limit.strip()
                                  or not limit.strip()[0].isdigit()):
            raise InvalidArgumentError(
                "write_options['memory_limit'] must be a DuckDB size such as '4GB'. Got "
                f"{limit!r} instead."
            )
        return cls(batch_rows=batch, memory_limit=limit, partitions=partitions)

    def buckets(self, compiled: Any) -> int:
        """How many hash partitions ``compiled`` (a ``CompiledQuery``) runs in: 1 when its shape
        cannot be partitioned (it runs as one statement, DuckDB spilling)."""
        if compiled.partition_keys is None:
            return 1
        if self.partitions is not None:
            return self.partitions
        return bucket_count(compiled, self.memory_limit or default_memory_limit())


@dataclass(frozen=True)
class SplitFile:
    """One written split: its file, row count, content hash (``table_sha256`` of its rows), the
    statistics accumulated while it was written (finished by ``StreamingStatistics.result``) and
    the sha256 of the bytes written to the file."""

    path: Path
    rows: int
    sha256: str
    statistics: StreamingStatistics | None = None
    file_sha256: str | None = None


def default_memory_limit() -> str:
    """A quarter of physical memory (at least 1 GB), as a DuckDB size."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        total = 8 << 30
    return f"{max(1 << 10, int(total * MEMORY_SHARE) >> 20)}MB"


def connect(memory_limit: str | None, spill: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB database of its own for one streamed query: offline, UTC, ASOF never as a nested
    loop (as :func:`feature_store.local.storage.engine.connect`), bounded memory, spilling to ``spill``."""
    import duckdb

    spill.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(config={
        "autoinstall_known_extensions": False, "autoload_known_extensions": False,
        "memory_limit": memory_limit or default_memory_limit(), "temp_directory": str(spill),
        "preserve_insertion_order": True,
    })
    con.execute("SET TimeZone='UTC'")
    con.execute("SET asof_loop_join_threshold=0")
    con.execute("SET enable_progress_bar=false")  # never draw on the caller's stdout
    return con


def record_batches(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any],
                   batch_rows: int) -> pa.RecordBatchReader:
    """The result of ``sql`` as a stream of record batches of at most ``batch_rows`` rows."""
    return con.sql(sql, params=params or None).to_arrow_reader(batch_rows)


#: ``alloc(n, dtype)``: an array of ``n`` values for the split assignment (the codes and every
#: array as long as the rows), mapped from a scratch file (:class:`ScratchArrays`)
Alloc = Callable[[int, Any], "np.ndarray"]
#: ``assign(read, rows, alloc)``: each row's split as an ``int8`` code (its index in the split
#: names, -1 for a dropped row), from ``read()``, which yields the key columns' batches in row
#: order (as often as called), the row count and ``alloc``
Assign = Callable[[Callable[[], Iterator["pa.RecordBatch"]], int, Alloc], "np.ndarray"]


class ScratchArrays:
    """``alloc(n, dtype)`` for a split assignment: each array a ``np.memmap`` of a file of its
    own in ``folder`` (a shared file mapping: its pages are the page cache's, not the process's
    anonymous memory, so a 100M-row assignment neither holds nor counts against a data-segment
    cap); the folder is deleted on leaving the ``with`` block, also on failure."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.made = 0

    def __enter__(self) -> ScratchArrays:
        return self

    def __call__(self, n: int, dtype: Any) -> np.ndarray:
        import numpy as np

        if n <= 0:  # a file cannot map zero bytes
            return np.empty(0, dtype=dtype)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.made += 1
        return np.memmap(self.folder / f"{self.made}.bin", dtype=dtype, mode="w+", shape=(n,))

    def __exit__(self, *_: object) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def write_splits(
    batches: Iterator[pa.RecordBatch],
    schema: pa.Schema,
    staging: Path,
    *,
    split_names: tuple[str, ...],
    key_columns: list[str],
    assign: Assign | None,
    batch_rows: int,
) -> dict[str, SplitFile]:
    """Write the batches into one Parquet file per split under ``staging``.

    The rows are spooled to a scratch file first; ``assign`` (see :data:`Assign`) reads their
    ``key_columns`` back from it batch by batch, its arrays mapped from files in
    :data:`SCRATCH_DIR`; without it every row goes to the single split.
    """
    if assign is None:
        (name,) = split_names
        with _SplitWriters(staging, schema, (name,)) as writers:
            for batch in batches:
                writers.write(name, batch)
        return writers.files
    rows_file = staging / ROWS_FILE
    try:
        rows = _spool(batches, schema, rows_file)

        def read() -> Iterator[pa.RecordBatch]:
            return open_parquet(rows_file).iter_batches(batch_size=batch_rows,
                                                         columns=key_columns)

        with ScratchArrays(staging / SCRATCH_DIR) as alloc:
            codes = assign(read, rows, alloc)
            return _distribute(open_parquet(rows_file).iter_batches(batch_size=batch_rows),
                               schema, codes, staging, split_names)
    finally:
        rows_file.unlink(missing_ok=True)


class ReplayedRows(Protocol):
    """Rows that can be read again: ``source(columns)`` (None: every column) yields the same
    rows in the same order on every call; ``rows`` is their count, known without reading;
    ``deal(codes, splits)`` yields ``(split, batch)``: the rows in order, each batch holding
    rows of one split (``codes[i]``: row i's split, -1 for none)."""

    rows: int

    def __call__(self, columns: list[str] | None) -> Iterator[pa.RecordBatch]: ...

    def deal(self, codes: np.ndarray, splits: int) -> Iterator[tuple[int, pa.RecordBatch]]: ...


def write_splits_replayed(
    source: ReplayedRows,
    schema: pa.Schema,
    staging: Path,
    *,
    split_names: tuple[str, ...],
    key_columns: list[str],
    assign: Assign | None,
    group_rows: int | None = None,
) -> dict[str, SplitFile]:
    """:func:`write_splits` from a source that yields the same rows on every call: ``assign``
    reads the key columns' batches from the source (as often as it needs; not at all when the
    strategy reads no column: the row count is known) and the rows are dealt in a last pass,
    with no scratch file of rows. ``group_rows``: every row group of a split file but its last
    holds that many rows, so the files' bytes do not depend on how the source cuts its
    batches."""
    if assign is None:
        (name,) = split_names
        with _SplitWriters(staging, schema, (name,), group_rows) as writers:
            for batch in source(None):
                writers.write(name, batch)
        return writers.files
    with ScratchArrays(staging / SCRATCH_DIR) as alloc:
        codes = assign(lambda: source(key_columns), source.rows, alloc)
        with _SplitWriters(staging, schema, split_names, group_rows) as writers:
            for split, batch in source.deal(codes, len(split_names)):
                writers.write(split_names[split], batch)
        del codes
    return writers.files


def _spool(batches: Iterator[pa.RecordBatch], schema: pa.Schema, path: Path) -> int:
    """Write every batch to ``path``; return the row count."""
    import pyarrow.parquet as pq

    rows = 0
    with pq.ParquetWriter(path, schema, compression="lz4") as writer:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def _distribute(batches: Iterator[pa.RecordBatch], schema: pa.Schema, codes: np.ndarray,
                staging: Path, split_names: tuple[str, ...]) -> dict[str, SplitFile]:
    """Each batch's rows to their split's writer (``codes``: every row's split, in order)."""
    import numpy as np
    import pyarrow as pa

    offset = 0
    with _SplitWriters(staging, schema, split_names) as writers:
        for batch in batches:
            part = np.asarray(codes[offset:offset + batch.num_rows])
            offset += batch.num_rows
            for i, name in enumerate(split_names):
                mask = part == i
                if mask.any():
                    writers.write(name, batch.filter(pa.array(mask)))
    if offset != len(codes):  # pragma: no cover - the scratch files are ours
        raise RuntimeError(f"the rows came back as {offset} rows, expected {len(codes)}")
    return writers.files


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns worth dictionary-encoding in Parquet: text, binary and dictionary columns.
    Trying it on numbers (pyarrow's default) costs ~6x the write and falls back anyway once
    their distinct values overflow the dictionary page."""
    import pyarrow as pa

    wanted = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
              pa.types.is_large_binary, pa.types.is_dictionary)
    return [f.name for f in schema if any(test(f.type) for test in wanted)]


#: Batches each of the split writers' threads may have queued before the caller waits: the
#: stages (making batches, writing, hashing, statistics) overlap instead of running in lockstep.
PIPELINE_DEPTH = 3
#: Bytes the Parquet writer's output is buffered in before the hashing sink (a Python object)
#: sees them: a few large writes instead of one per page.
SINK_BUFFER = 8 << 20
#: Buffers a split file's sink may have queued for its hashing-and-writing thread.
SINK_QUEUE = 4


class _SplitWriters:
    """One Parquet writer, one streaming content hash and streaming statistics per split. The
    writes run on one background thread, hashing on another and statistics on a third (each in
    submission order) while the caller makes the next batches; up to :data:`PIPELINE_DEPTH`
    batches per thread are in flight. With ``group_rows``, a split's batches are held until
    they fill a row group of that many rows (the last row group takes the rest); without, each
    batch is a row group."""

    def __init__(self, staging: Path, schema: pa.Schema, split_names: tuple[str, ...],
                 group_rows: int | None = None) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from feature_store.core.content_hash import StreamingTableHash
        from feature_store.local.storage.statistics import StreamingStatistics

        self.paths = {n: staging / f"{n}.parquet" for n in split_names}
        self.sinks = {n: _HashedFile(p) for n, p in self.paths.items()}
        self.streams = {n: pa.BufferedOutputStream(pa.PythonFile(s, mode="w"), SINK_BUFFER)
                        for n, s in self.sinks.items()}
        dictionary = dictionary_columns(schema)
        self.writers = {n: pq.ParquetWriter(self.streams[n], schema,
                                            use_dictionary=dictionary or False)
                        for n in self.paths}
        self.hashes = {n: StreamingTableHash(schema) for n in split_names}
        self.statistics = {n: StreamingStatistics(schema) for n in split_names}
        self.rows = dict.fromkeys(split_names, 0)
        self.pools = tuple(ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"fstrain-split-{r}")
                           for r in ("write", "hash", "stats"))
        self.pending: deque[Future[None]] = deque()
        self.files: dict[str, SplitFile] = {}
        self.group_rows = group_rows
        self.held: dict[str, list[pa.RecordBatch]] = {n: [] for n in split_names}

    def __enter__(self) -> _SplitWriters:
        return self

    def write(self, name: str, batch: pa.RecordBatch) -> None:
        while len(self.pending) >= PIPELINE_DEPTH * len(self.pools):
            self.pending.popleft().result()  # the oldest work is done (or raises)
        self._submit(1, self.hashes[name].update, batch)
        self._submit(2, self.statistics[name].update, batch)
        self.rows[name] += batch.num_rows
        if self.group_rows is None:
            self._submit(0, self.writers[name].write_batch, batch)
            return
        self.held[name].append(batch)
        if sum(b.num_rows for b in self.held[name]) >= self.group_rows:
            self._write_groups(name, last=False)

    def _submit(self, pool: int, work: Callable[..., Any], *args: Any) -> None:
        self.pending.append(self.pools[pool].submit(work, *args))

    def _write_groups(self, name: str, last: bool) -> None:
        """Queue the held rows of ``name`` in full row groups (``last``: the rest too); the rows
        left over stay held."""
        import pyarrow as pa

        assert self.group_rows is not None
        held, self.held[name] = pa.Table.from_batches(self.held[name]), []
        full = held.num_rows - held.num_rows % self.group_rows
        for start in range(0, full if not last else held.num_rows, self.group_rows):
            # the bytes do not depend on the chunks (tested: any number of partitions)
            self._submit(0, self.writers[name].write_table, held.slice(start, self.group_rows),
                         self.group_rows)
        if not last and full < held.num_rows:
            self.held[name] = held.slice(full).to_batches()

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        try:
            if exc_type is None and self.group_rows is not None:
                for name in self.paths:
                    if self.held[name]:
                        self._write_groups(name, last=True)
            while self.pending and exc_type is None:
                self.pending.popleft().result()
        finally:
            for pool in self.pools:
                pool.shutdown(wait=True, cancel_futures=exc_type is not None)
            try:
                for writer in self.writers.values():
                    writer.close()
            finally:
                for stream in self.streams.values():
                    stream.close()
                for sink in self.sinks.values():
                    sink.close()
        if exc_type is None:
            self.files = {n: SplitFile(self.paths[n], self.rows[n], self.hashes[n].hexdigest(),
                                       self.statistics[n], self.sinks[n].hexdigest())
                          for n in self.paths}


class _HashedFile:
    """A file opened for writing that hashes (sha256) every byte written to it: the Parquet
    writer's sink, so the recorded file hash needs no second read of the file. The hashing and
    the writing run on a thread of their own (in order, at most :data:`SINK_QUEUE` chunks
    queued), off the thread that encodes the Parquet file."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "wb")  # noqa: SIM115 - closed by _SplitWriters.__exit__
        self.digest = hashlib.sha256()
        self.position = 0
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fstrain-split-sink")
        self.pending: deque[Future[None]] = deque()

    def write(self, data: Any) -> int:
        while len(self.pending) >= SINK_QUEUE:
            self.pending.popleft().result()
        chunk = bytes(data)  # the caller reuses its buffer once this returns
        self.pending.append(self.pool.submit(self._put, chunk))
        self.position += len(chunk)
        return len(chunk)

    def _put(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        self.file.write(chunk)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        while self.pending:
            self.pending.popleft().result()
        self.file.flush()

    def close(self) -> None:
        if self.file.closed:
            return
        try:
            self.flush()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.file.close()

    @property
    def closed(self) -> bool:
        return self.file.closed

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


def open_parquet(path: Path) -> pq.ParquetFile:
    """A Parquet file to read a piece at a time: without pyarrow's pre-buffering, which reads
    ahead whole column chunks of many row groups (memory growing with the file: 5 GB to hash a
    100M-row version's splits) and saves nothing on a local disk."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, pre_buffer=False)


def file_sha256(path: Path, chunk: int = 8 << 20) -> str:
    """sha256 of a file's bytes, read in chunks."""

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def verified_content_hash(path: Path, owner: str, split: str, recorded_file_sha256: str | None,
                          batch_rows: int = DEFAULT_BATCH_ROWS) -> str:
    """The content hash of a split file's rows, read batch by batch, with its bytes checked
    against ``recorded_file_sha256`` (when recorded; on a thread beside the parse, and a changed
    file is reported as changed before anything else); a missing, unreadable or changed file is
    an :class:`IntegrityError`."""
    if not path.exists():
        raise IntegrityError(f"{owner}: file {path} is missing.")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fstrain-file-hash") as pool:
        digest = None if recorded_file_sha256 is None else pool.submit(file_sha256, path)

        def check_bytes() -> None:
            if digest is not None and digest.result() != recorded_file_sha256:
                raise IntegrityError(
                    f"{owner}: split '{split}' no longer matches its recorded sha256 (the bytes "
                    f"of {path} changed after creation). Recreate the version; do not edit its "
                    "files.")

        try:
            content = _content_hash(path, owner, batch_rows)
        except IntegrityError:
            check_bytes()
            raise
        check_bytes()
    return content


def _content_hash(path: Path, owner: str, batch_rows: int) -> str:
    """The content hash of a Parquet file's rows, read batch by batch."""
    import pyarrow as pa

    from feature_store.core.content_hash import StreamingTableHash

    try:
        source = open_parquet(path)
        hasher = StreamingTableHash(source.schema_arrow)
        for batch in source.iter_batches(batch_size=batch_rows):
            hasher.update(batch)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise IntegrityError(
            f"{owner}: file {path} cannot be read as parquet ({type(exc).__name__}: "
            f"{str(exc)[:200]}). It was changed or damaged; recreate the version."
        ) from exc
    return hasher.hexdigest()
