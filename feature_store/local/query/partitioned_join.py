"""Grace-hash partitioned execution of a point-in-time query, for out-of-core creation.

A query whose joins are all point-in-time joins of the root group on the same key columns
(:attr:`~feature_store.local.query.pit.CompiledQuery.partition_keys`) is run in ``K`` parts instead of
one statement that DuckDB would have to spill:

1. every group's pinned rows (the root's filtered by its root-only conditions) are written
   once into ``K`` buckets by a hash of their join-key values (:func:`bucket_numbers` in numpy
   for the kernel, DuckDB's ``hash`` for string keys and the statement; equal keys, stored with
   the same type, land in the same bucket): Parquet files written by DuckDB for the statement,
   or Arrow IPC files of only the columns the numpy kernel reads;
2. each bucket in turn — the bucket's root rows with the same bucket of every joined group,
   small enough to join in memory — is joined, and its result, ordered by the root key like the
   whole query's, is written to one file per bucket: an Arrow IPC file by the numpy kernel of
   :mod:`~feature_store.local.query.bucket_join` where it covers the query's shape, else a Parquet
   file by the query's own statement run on the bucket;
3. the ``K`` ordered results are merged by the root key (:func:`merge_ordered`), in windows of
   rows, into the order the single statement produces.

Each root row meets every row it can match in its bucket, and the statement's filters, lookback,
tie-breaking and ordering are unchanged, so the merged rows equal the single statement's rows in
value and order, whatever ``K`` is: ``K`` follows from the memory limit and the groups' sizes
(:func:`bucket_count`) and never changes a version, nor does which of the two joins a bucket.
"""

from __future__ import annotations

import dataclasses
import math
import mmap
import re
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.local.query import bucket_join
from feature_store.local.query.bucket_join import KNOWN_US, RESULT_ROW_GROUP
from feature_store.local.query.late_counts import Figures, add_figures

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import numpy as np
    import pyarrow as pa

    from feature_store.local.query.bucket_join import BucketPlan
    from feature_store.local.query.pit import CompiledQuery

BUCKET = "__fstrain_bucket"
#: prefix of the columns holding DuckDB's hash of a string key while partitioning
HASH = "__fstrain_hash"
#: odd 64-bit multiplier of :func:`bucket_numbers` (2^64 / golden ratio)
_MULTIPLIER = 0x9E3779B97F4A7C15
#: a bucket's estimated rows x value bytes may use this share of the memory limit: the ASOF
#: joins' sorts and hash tables take several times the data they join (30M labels + 3 x 30M rows
#: under 4 GB: 4 buckets (share 0.25) took 346 s, 10 (0.1) 98 s, 20 (0.05) 131 s)
BUCKET_SHARE = 0.1
MAX_BUCKETS = 512
#: the numpy kernel's CPU per row grows with the bucket (its sorts and gathers leave the
#: caches): 10M labels + 3 x 10M rows took 11.2 CPU-s in 4 buckets, 8.9 in 10, 8.0 in 20;
#: but the merge's grows with the buckets (1.5 CPU-s in 4 and 10, 2.3 in 20, 3.9 in 40, 14
#: in 100): buckets are added for the kernel only up to KERNEL_MAX_BUCKETS
KERNEL_BUCKET_ROWS = 1_000_000
KERNEL_MAX_BUCKETS = 16
#: rows per batch the numpy kernel's partitioning splits, at most: a batch and its reordered
#: copy, for each of the JOIN_THREADS groups split at once, beside DuckDB's own buffers, must
#: stay a small part of the memory limit, so a batch's values may take PARTITION_SHARE of it
#: (1M rows of 17 doubles twice over in two groups took 0.5 GB under a 256 MB limit)
PARTITION_BATCH = 1 << 20
PARTITION_MIN_BATCH = 1 << 14
PARTITION_SHARE = 1 / 32
#: the merge reads one batch of each of the K result files at a time: batches of
#: its batch rows / K rows (at most RESULT_ROW_GROUP, at least MERGE_MIN_READ) keep the K
#: batches it holds at about its batch rows in all, whatever K (with batches of 122,880
#: rows, the 50 buckets of a 10M-row create under 256 MB held 6M rows, 0.7 GB)
MERGE_READ_ROWS = 1 << 20
MERGE_MIN_READ = 1024
#: buckets the numpy kernel joins at the same time (each holds its bucket's data and result)
JOIN_THREADS = 2
#: the buckets and their results are read once: compressing them costs more CPU than it saves
SCRATCH_COMPRESSION = "COMPRESSION uncompressed"
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


def size_bytes(text: str) -> int:
    """A DuckDB size (``'4GB'``, ``'512 MiB'``) in bytes."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match.group(1)) * _UNITS[unit])


def estimated_bytes(compiled: CompiledQuery) -> int:
    """Rows x value bytes of every scanned group at its pinned commit (the data the joins hold)."""
    from feature_store.local.query.row_gather import _value_bytes

    total = 0
    for node in compiled.scans.values():
        table = node.group.delta_table
        schema = table.schema(node.commit)
        total += table.row_count(node.commit) * sum(_value_bytes(f.type) for f in schema)
    return total


def bucket_count(compiled: CompiledQuery, memory_limit: str) -> int:
    """How many buckets keep one bucket's data within :data:`BUCKET_SHARE` of ``memory_limit``
    (1: the whole query fits, run it as one statement); when there are several and the numpy
    kernel joins them, at least one per :data:`KERNEL_BUCKET_ROWS` root rows, up to
    :data:`KERNEL_MAX_BUCKETS`."""
    budget = max(1, int(size_bytes(memory_limit) * BUCKET_SHARE))
    count = max(1, min(MAX_BUCKETS, math.ceil(estimated_bytes(compiled) / budget)))
    if count > 1 and compiled.shape is not None and bucket_join.plan(compiled) is not None:
        root = compiled.shape.plan.root
        rows = root.group.delta_table.row_count(root.commit)
        count = max(count, min(KERNEL_MAX_BUCKETS, math.ceil(rows / KERNEL_BUCKET_ROWS)))
    return count


def partition_batch_rows(row_bytes: int, memory_limit_bytes: int) -> int:
    """Rows per partition batch for rows of ``row_bytes`` value bytes under a memory limit:
    :data:`PARTITION_SHARE` of the limit, between :data:`PARTITION_MIN_BATCH` and
    :data:`PARTITION_BATCH` rows."""
    rows = int(memory_limit_bytes * PARTITION_SHARE) // max(1, row_bytes)
    return max(PARTITION_MIN_BATCH, min(PARTITION_BATCH, rows))


def _numpy_hashable(kind: pa.DataType) -> bool:
    """Whether :func:`bucket_numbers` takes a key of this type as its int64 values."""
    import pyarrow as pa

    return bool(pa.types.is_integer(kind) or pa.types.is_boolean(kind)
                or pa.types.is_date(kind) or pa.types.is_timestamp(kind))


def _key_bits(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A key column's values as uint64 bits: integers, bools, dates (days) and timestamps
    (microseconds) as their int64 value, a uint64 hash as it is; null as 0."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_timestamp(kind):
        if kind.unit != "us":
            column = column.cast(pa.timestamp("us", kind.tz))
        column = column.view(pa.int64())
    elif pa.types.is_date32(kind):
        column = column.view(pa.int32())
    elif pa.types.is_date64(kind):
        column = column.view(pa.int64())
    if column.type != pa.uint64():
        column = column.cast(pa.int64())
    if column.null_count:
        column = pc.fill_null(column, 0)
    return np.asarray(column.to_numpy(zero_copy_only=False)).view(np.uint64)


def bucket_numbers(columns: list[pa.Array | pa.ChunkedArray], buckets: int) -> np.ndarray:
    """The bucket (``0 <= b < buckets``, uint16) of each row from its join-key ``columns``:
    each column's bits (:func:`_key_bits`) folded in and multiplied by an odd constant, the
    high 32 bits scaled to ``buckets``. Equal key values of the same types get the same bucket
    in every group (a group's keys are stored with the root's types)."""
    import numpy as np

    if buckets > 1 << 16:  # pragma: no cover - MAX_BUCKETS is far below
        raise ValueError(f"{buckets} buckets do not fit 16 bits")
    mixed = None
    for column in columns:
        bits = _key_bits(column)
        folded = bits ^ (bits >> np.uint64(32))
        mixed = folded if mixed is None else np.bitwise_xor(mixed, folded, out=mixed)
        mixed *= np.uint64(_MULTIPLIER)
    if mixed is None:
        raise ValueError("a partitioned query hashes at least one key")
    mixed >>= np.uint64(32)
    mixed *= np.uint64(buckets)
    mixed >>= np.uint64(32)
    return mixed.astype(np.uint16)


def result_batch_rows(buckets: int, merge_rows: int = MERGE_READ_ROWS) -> int:
    """Rows per batch (or row group) of a bucket's result file when there are ``buckets`` and
    the merge reads ``merge_rows`` rows at a time: those rows shared by the buckets, between
    :data:`MERGE_MIN_READ` and ``RESULT_ROW_GROUP``; it never changes the merged rows."""
    return max(MERGE_MIN_READ, min(RESULT_ROW_GROUP, merge_rows // max(1, buckets)))


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


class PartitionedQuery:
    """One compiled query run bucket by bucket under ``folder`` (see the module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, compiled: CompiledQuery, buckets: int,
                 folder: Path, merge_rows: int = MERGE_READ_ROWS, *,
                 known: dict[str, str] | None = None) -> None:

        if compiled.partition_keys is None or buckets < 1:
            raise ValueError("the query cannot be partitioned")
        self.con, self.compiled, self.buckets, self.folder = con, compiled, buckets, folder
        self.keys = compiled.partition_keys
        self.scans = {ph: compiled.source(con, ph) for ph in compiled.scans}
        self.results: list[Path] = []
        #: rows the merge of the results reads at a time (sizes the results' batches)
        self.merge_rows = merge_rows
        #: the numpy kernel's plan, or None: each bucket runs the statement
        self.kernel = bucket_join.plan(compiled)
        self._schema: pa.Schema | None = None
        #: placeholder -> the SQL of when a row became known (epoch µs, over a scan with its
        #: row id), for the groups whose late-data figures the kernel counts while it joins
        #: (given as ``known``; see :meth:`late_counts`)
        self.known: dict[str, str] = self._counted_groups(known or {})
        self._counts: list[dict[int, Figures]] = []

    def _counted_groups(self, wanted: dict[str, str]) -> dict[str, str]:
        """The kernel's steps made to count their late matches, for the groups of ``wanted``
        (:func:`~feature_store.local.query.late_data.known_columns`), where the result has
        one row per root row (no inner join)."""
        kernel = self.kernel
        if not wanted or kernel is None or any(step.inner for step in kernel.steps):
            return {}
        known, steps = {}, []
        for step in kernel.steps:
            expr = wanted.get(step.placeholder)
            if expr is not None:
                known[step.placeholder] = expr
                self.scans[step.placeholder] = self.compiled.source(self.con, step.placeholder,
                                                                    row_id=True)
            steps.append(dataclasses.replace(step, known=expr is not None))
        self.kernel = dataclasses.replace(kernel, steps=tuple(steps))
        return known

    def late_counts(self) -> dict[str, Figures]:
        """Join alias -> the late-data figures the kernel counted over every bucket (after
        :meth:`run`)."""
        if self.kernel is None:
            return {}
        aliases = {ph: node.alias for ph, node in self.compiled.scans.items()}
        return {aliases[step.placeholder]: add_figures([c[i] for c in self._counts if i in c])
                for i, step in enumerate(self.kernel.steps) if step.known}

    def schema(self) -> pa.Schema:
        """The result's schema: the statement run on empty inputs."""
        if self._schema is None:
            sql = self.compiled.bind_sources(self._empty_sources(), single_statement=True)
            self._schema = self.con.sql(sql, params=self.compiled.params or None
                                        ).to_arrow_table().schema
        return self._schema

    def _empty_sources(self) -> dict[str, str]:
        return {ph: f"(SELECT * FROM {scan} LIMIT 0)" for ph, scan in self.scans.items()}

    def run(self) -> list[Path]:
        """Partition every group, then join bucket by bucket; returns the ordered result files
        (one per bucket with root rows), in bucket order."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.partition()
        root = next(iter(self.compiled.scans))  # the root's placeholder comes first
        # a bucket without root rows has no result rows
        buckets = [b for b in range(self.buckets) if self._bucket_dir(root, b).exists()]
        if self.kernel is not None:
            self.results = self._join_concurrently(self.kernel, buckets)
        else:
            self.results = [self._run_statement(bucket) for bucket in buckets]
        return self.results

    def partition(self) -> None:
        """Write every group's rows into its buckets (the root's filtered by the root-only
        conditions): Parquet files written by DuckDB for the statement, or Arrow IPC files of
        the columns the numpy kernel reads, :data:`JOIN_THREADS` groups at a time (DuckDB
        hands over batches one by one: one group alone keeps about one core busy)."""

        if self.kernel is None:
            for ph in self.scans:
                self._copy_group(ph)
            return
        zone, limit = self.con.execute(
            "SELECT current_setting('TimeZone'), current_setting('memory_limit')").fetchall()[0]
        with ThreadPoolExecutor(JOIN_THREADS) as pool:
            jobs = [pool.submit(self._split_group, ph, zone, size_bytes(limit))
                    for ph in self.scans]
            for job in jobs:
                job.result()

    def _selection(self, placeholder: str) -> tuple[str, list[Any] | None]:
        """``FROM`` the group's scan ``WHERE`` the root-only conditions (for the root), with
        the bucket number as :data:`BUCKET`: the SQL tail and its parameters."""
        from feature_store.local.storage.engine import quote_ident as q

        hashed = ", ".join(q(k) for k in self.keys[placeholder])
        source, params = self._source(placeholder)
        return f"hash({hashed}) % {self.buckets} AS {BUCKET} {source}", params

    def _source(self, placeholder: str) -> tuple[str, list[Any] | None]:
        """``FROM`` the group's scan ``WHERE`` the root-only conditions (for the root): the
        SQL and its parameters."""
        shape = self.compiled.shape
        sql = f"FROM {self.scans[placeholder]}"
        root = next(iter(self.compiled.scans))  # the root's placeholder comes first
        if placeholder == root and shape is not None and shape.root_filter:
            return f"{sql} WHERE {shape.root_filter}", shape.root_params or None
        return sql, None

    def _sql_hashed(self) -> list[bool]:
        """Per key position, whether DuckDB hashes the key for :func:`bucket_numbers` (strings)
        instead of numpy (integers, bools, dates, timestamps): decided on the root's stored
        types, which every group's keys share (see ``pit._partition_keys``)."""
        root = next(iter(self.compiled.scans))
        node = self.compiled.scans[root]
        fields = node.group.delta_table.schema(node.commit)
        return [not _numpy_hashable(fields.field(k).type) for k in self.keys[root]]

    def _copy_group(self, placeholder: str) -> None:
        """A group's buckets as Parquet files written by DuckDB (for the statement)."""
        tail, params = self._selection(placeholder)
        self.con.execute(
            f"COPY (SELECT *, {tail}) TO {_quoted(self._group_dir(placeholder))} "
            f"(FORMAT parquet, PARTITION_BY ({BUCKET}), {SCRATCH_COMPRESSION}, "
            "OVERWRITE_OR_IGNORE)", params)

    def _split_group(self, placeholder: str, zone: str, memory_limit: int) -> None:
        """A group's buckets as Arrow IPC files of the kernel's columns, read through a
        connection of its own (a cursor) in the caller's time zone, in batches sized to the
        memory limit (:func:`partition_batch_rows`), numbered by :func:`bucket_numbers` (DuckDB
        hashes only string keys: its hash and its export cost more CPU than numpy's hash)."""
        from feature_store.local.query.row_gather import _value_bytes
        from feature_store.local.storage.engine import quote_ident as q

        node = self.compiled.scans[placeholder]
        if not node.group.delta_table.files(node.commit):
            return  # no rows (and its scan is a table registered on self.con alone)
        reads = self._kernel_reads()[placeholder]
        by_sql = dict(zip(self.keys[placeholder], self._sql_hashed(), strict=True))
        hashes = {k: f"{HASH}{i}" for i, k in enumerate(by_sql) if by_sql[k]}
        select = [*(q(c) if c != KNOWN_US else f"{self.known[placeholder]} AS {q(c)}"
                    for c in reads), *(f"hash({q(k)}) AS {h}" for k, h in hashes.items())]
        source, params = self._source(placeholder)
        fields = {f.name: f.type for f in node.group.delta_table.schema(node.commit)}
        row_bytes = 8 + sum(_value_bytes(fields[c]) if c in fields else 8 for c in reads)  # + bucket
        keys = [hashes.get(k, k) for k in by_sql]  # in the root's key order

        def numbers(batch: pa.RecordBatch) -> np.ndarray:
            return bucket_numbers([batch.column(k) for k in keys], self.buckets)

        cursor = self.con.cursor()
        try:
            cursor.execute("SET TimeZone = ?", [zone])
            batches = cursor.sql(f"SELECT {', '.join(select)} {source}", params=params
                                 ).to_arrow_reader(partition_batch_rows(row_bytes, memory_limit))
            bucket_join.write_buckets(batches, numbers, list(hashes.values()),
                                      self._group_dir(placeholder),
                                      lambda b: f"{BUCKET}={b}/data.arrow")
        finally:
            cursor.close()

    def _run_statement(self, bucket: int) -> Path:
        """The query's statement on one bucket; returns its result file."""
        sources = {ph: self._bucket_source(ph, bucket) for ph in self.scans}
        sql = self.compiled.bind_sources(sources, single_statement=True)
        out = self.folder / f"result_{bucket}.parquet"
        # row groups the merge reads one at a time, as the kernel's batches
        groups = f"ROW_GROUP_SIZE {result_batch_rows(self.buckets, self.merge_rows)}"
        self.con.execute(f"COPY ({sql}) TO {_quoted(out)} "
                         f"(FORMAT parquet, {SCRATCH_COMPRESSION}, {groups})",
                         self.compiled.params or None)
        self._spent(bucket)
        return out

    def _join_concurrently(self, kernel: BucketPlan, buckets: list[int]) -> list[Path]:
        """The buckets joined by the numpy kernel, :data:`JOIN_THREADS` at a time (numpy and
        pyarrow release the GIL); returns the result files in bucket order. A joined bucket's
        inputs are removed by a thread of their own, off the joins' path (the removals are done
        when this returns)."""
        import pyarrow as pa

        schemas = {ph: self.con.sql(f"SELECT * FROM {scan} LIMIT 0").to_arrow_table().schema
                   for ph, scan in self.scans.items()}  # DuckDB is asked here, never in a thread
        for ph in self.known:
            schemas[ph] = schemas[ph].append(pa.field(KNOWN_US, pa.int64()))
        schema = self.schema()
        with ThreadPoolExecutor(1) as remover, ThreadPoolExecutor(JOIN_THREADS) as pool:
            def join(bucket: int) -> Path:
                out = self._join_bucket(kernel, bucket, schemas, schema)
                remover.submit(self._spent, bucket)
                return out

            return list(pool.map(join, buckets))

    def _kernel_reads(self) -> dict[str, list[str]]:
        """Per placeholder, the columns the numpy kernel reads (empty: no kernel)."""
        kernel = self.kernel
        if kernel is None:
            return {}
        return {kernel.root: kernel.root_reads(),
                **{step.placeholder: step.reads() for step in kernel.steps}}

    def _join_bucket(self, kernel: BucketPlan, bucket: int, schemas: dict[str, pa.Schema],
                     schema: pa.Schema) -> Path:
        """One bucket joined by the numpy kernel; returns its result file (its inputs are
        left for the caller to remove)."""
        tables = {}
        for ph, columns in self._kernel_reads().items():
            folder = self._bucket_dir(ph, bucket)
            files = sorted(folder.glob("*.arrow")) if folder.exists() else []
            tables[ph] = bucket_join.read_bucket(files, columns, schemas[ph])
        out = self.folder / f"result_{bucket}.arrow"
        counts: dict[int, Figures] | None = {} if self.known else None
        bucket_join.write_result(bucket_join.join_bucket(kernel, tables, schema, counts), out,
                                 result_batch_rows(self.buckets, self.merge_rows))
        if counts:
            self._counts.append(counts)  # list.append is atomic: buckets join in threads
        return out

    def _spent(self, bucket: int) -> None:
        """Remove a joined bucket's inputs."""
        for ph in self.scans:
            _remove_tree(self._bucket_dir(ph, bucket))

    def _group_dir(self, placeholder: str) -> Path:
        return self.folder / placeholder.strip("_").lower()

    def _bucket_dir(self, placeholder: str, bucket: int) -> Path:
        return self._group_dir(placeholder) / f"{BUCKET}={bucket}"

    def _bucket_source(self, placeholder: str, bucket: int) -> str:
        folder = self._bucket_dir(placeholder, bucket)
        if not folder.exists():  # no row of this group hashes here
            return f"(SELECT * FROM {self.scans[placeholder]} LIMIT 0)"
        return f"read_parquet({_quoted(folder / '*.parquet')}, hive_partitioning=false)"


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def merge_ordered(files: list[Path], order: list[str], columns: list[str] | None,
                  batch_rows: int) -> Iterator[pa.Table]:
    """The rows of ``files`` — each ordered by the ``order`` columns, their keys distinct across
    files — merged into one order, as tables of about ``batch_rows`` rows (see
    :func:`merge_windows`). ``columns`` (default: all) are the columns yielded."""
    for window, indices in merge_windows(files, order, columns, batch_rows):
        yield gather(window if columns is None else window.select(columns), indices)


def merge_windows(files: list[Path], order: list[str], columns: list[str] | None,
                  batch_rows: int) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """:func:`merge_ordered` before its gather: each window's rows (``order`` and ``columns``;
    chunks of the files' batches, not copied) and the indices that put them in order, so a
    caller that deals rows out gathers once (:func:`gather`).

    Each round tops every unfinished file's buffer up to ``batch_rows / K`` rows, takes from
    every file the rows up to the smallest of the unfinished files' last buffered keys (every
    row at or below it is then buffered) and sorts that window; only the buffers (at most
    ``2 * batch_rows`` rows in all) are in memory. (Refilling only the emptied buffers made
    windows of ``batch_rows / K`` rows, each costing O(K): quadratic in K.)
    """
    import pyarrow as pa

    wanted = None if columns is None else list(dict.fromkeys([*order, *columns]))
    per_file = max(MERGE_MIN_READ, batch_rows // max(1, len(files)))
    opened = [_ordered_batches(f, wanted, per_file) for f in files]
    # DuckDB marks a column "not null" in a file that happens to hold no nulls: drop the marks
    fields = opened[0][1] if opened else pa.schema([])
    common = pa.schema([fields.field(n).with_nullable(True) for n in wanted or fields.names])
    runs = [_Run(reader, common, order[0]) for reader, _ in opened]
    while True:
        for run in runs:  # top every buffer up: windows of ~batch_rows rows
            if not run.spent and run.rows < per_file:
                run.top_up(per_file)
        held = [run for run in runs if run.rows]
        if not held:
            return
        open_ = [run.table for run in held if not run.spent]
        bound = _smallest_last(open_, order) if open_ else None
        taken = [run.take(None if bound is None else run.count_at_most(order, bound))
                 for run in held]
        if not any(t.num_rows for t, _ in taken):  # pragma: no cover - our files are ordered
            raise RuntimeError(f"merge of {files}: a file is not ordered by {order}")
        window = pa.concat_tables([t for t, _ in taken])
        keys = [k for _, k in taken]
        first = None if any(k is None for k in keys) else _concatenate(keys)
        yield window, _sort_indices(window, order, first)


class _Run:
    """One result file's rows while merging: its unread batches (``reader``, each cast to
    ``schema``) and its buffered rows (``table``, chunks of the batches, never copied), with
    the buffered values of the first ``order`` column as numpy (``keys``; None where numpy's
    order is not the key's, see :func:`_numpy_keys`)."""

    def __init__(self, reader: Iterator[pa.RecordBatch], schema: pa.Schema, key: str) -> None:
        import pyarrow as pa

        self.reader, self.schema, self.key = reader, schema, key
        self.table = schema.empty_table()
        self.keys: np.ndarray | None = _numpy_keys(pa.array([], schema.field(key).type))
        self.spent = False

    @property
    def rows(self) -> int:
        return self.table.num_rows

    def top_up(self, rows: int) -> None:
        """Append the reader's next batches until ``rows`` rows are buffered (or it is spent)."""
        import pyarrow as pa

        tables, keys = [self.table], [self.keys]
        held = self.rows
        while held < rows and not self.spent:
            batch = next(self.reader, None)
            self.spent = batch is None
            if batch is not None and batch.num_rows:
                table = pa.Table.from_batches([batch]).cast(self.schema)
                tables.append(table)
                keys.append(_numpy_keys(table.column(self.key)))
                held += batch.num_rows
        self.table = pa.concat_tables(tables)
        self.keys = None if any(k is None for k in keys) else _concatenate(keys)

    def count_at_most(self, order: list[str], bound: dict[str, Any]) -> int:
        """How many leading buffered rows have keys ≤ ``bound``."""
        return _count_at_most(self.table, order, bound, self.keys)

    def take(self, rows: int | None) -> tuple[pa.Table, np.ndarray | None]:
        """Remove the first ``rows`` (None: all) buffered rows; returns them and their keys."""
        rows = self.rows if rows is None else rows
        taken = (self.table.slice(0, rows), None if self.keys is None else self.keys[:rows])
        self.table = self.table.slice(rows)
        self.keys = None if self.keys is None else self.keys[rows:]
        return taken


def _concatenate(arrays: list[Any]) -> Any:
    import numpy as np

    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def gather(table: pa.Table, indices: np.ndarray) -> pa.Table:
    """``table.take(indices)``, each column gathered into one chunk: fixed-width columns by
    numpy from their chunks' buffers (several times faster than Arrow's take on a chunked
    column, which resolves every index's chunk, and than its take of nullable columns), the
    others by Arrow from the column's chunks joined."""
    import pyarrow as pa

    return pa.Table.from_arrays([_gather_column(c, indices) for c in table.columns],
                                schema=table.schema)


def _gather_column(column: pa.ChunkedArray, indices: np.ndarray) -> pa.Array:
    import numpy as np
    import pyarrow as pa

    from feature_store.core import arrow_bits

    kind = column.type
    lanes = arrow_bits.lanes(kind)
    chunks = [c for c in column.chunks if len(c)]
    if lanes is None or not chunks:
        return column.combine_chunks().take(pa.array(indices))
    values = _concatenate([arrow_bits.raw_values(c, lanes) for c in chunks]).take(indices)
    if not column.null_count:
        return pa.Array.from_buffers(kind, len(indices), [None, pa.py_buffer(values)], 0)
    valid = _concatenate([arrow_bits.validity(c) for c in chunks]).take(indices)
    bitmap = np.packbits(valid, bitorder="little")
    nulls = len(indices) - int(np.count_nonzero(valid))
    return pa.Array.from_buffers(kind, len(indices), [pa.py_buffer(bitmap), pa.py_buffer(values)],
                                 nulls)


def _ordered_batches(path: Path, columns: list[str] | None, rows: int
                     ) -> tuple[Iterator[pa.RecordBatch], pa.Schema]:
    """A result file's ``columns`` (None: all) as batches of at most ``rows`` rows, and the
    file's schema: an Arrow IPC file (the kernel's) memory-mapped and read batch by batch,
    those columns selected, without decoding or copying (:class:`_Mapping` hands the pages of the
    batches read before the last two back, so the mapping's resident pages stay few), or a
    Parquet file (the statement's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.suffix != ".arrow":
        source = pq.ParquetFile(path, pre_buffer=False)  # see open_parquet
        return source.iter_batches(batch_size=rows, columns=columns), source.schema_arrow
    mapping = _Mapping(path)
    # every column, then the ones wanted: a read of all is zero-copy (the batch's buffers are
    # the mapping's, so the pages merged can be handed back), one of some copies them out
    options = pa.ipc.IpcReadOptions(use_threads=False)
    reader = pa.ipc.open_file(pa.BufferReader(mapping.buffer), options=options)

    def batches() -> Iterator[pa.RecordBatch]:
        starts: list[int | None] = []
        for index in range(reader.num_record_batches):
            batch = reader.get_batch(index)
            starts.append(mapping.start(batch))
            merged = starts[index - 1] if index >= 2 else None  # all before the last two
            if merged is not None:
                mapping.release(merged)
            if columns is not None:
                batch = batch.select(columns)
            for start in range(0, batch.num_rows, rows):
                yield batch.slice(start, rows)

    return batches(), reader.schema


class _Mapping:
    """A file mapped read-only, as an Arrow buffer; :meth:`release` hands resident pages back to
    the kernel (safe whatever still points there: a released page of a file mapping is read
    from the file again when touched)."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa

        with open(path, "rb") as fh:
            self.map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.buffer = pa.py_buffer(self.map)
        self.released = 0

    def start(self, batch: pa.RecordBatch) -> int | None:
        """The offset in the file of the first of the batch's buffers that lie in the mapping;
        None when none does (a read of some of the columns may copy them out of it: where the
        copies lie says nothing of the file's pages)."""
        low, high = self.buffer.address, self.buffer.address + self.buffer.size
        inside = [b.address - low for c in batch.columns for b in c.buffers()
                  if b is not None and low <= b.address < high]
        return min(inside, default=None)

    def release(self, end: int) -> None:
        """Hand back the whole pages before ``end`` not yet handed back."""

        end -= end % mmap.PAGESIZE
        if end > self.released:
            self.map.madvise(mmap.MADV_DONTNEED, self.released, end - self.released)
            self.released = end


def file_rows(path: Path) -> int:
    """How many rows a result file holds (from its footer or its batches' headers)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.suffix == ".arrow":  # mapped: the batches' headers are read, not their bodies
        return int(pa.ipc.open_file(pa.memory_map(str(path))).count_rows())
    return int(pq.ParquetFile(path).metadata.num_rows)


def _numpy_keys(column: Any) -> Any:
    """A key column as a numpy array when its order is numpy's (integers, dates, timestamps,
    no nulls), else None."""
    import numpy as np
    import pyarrow as pa

    kind = column.type
    if column.null_count or not (pa.types.is_integer(kind) or pa.types.is_timestamp(kind)
                                 or pa.types.is_date(kind)):
        return None
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return np.asarray(column.to_numpy(zero_copy_only=False))


def _sort_indices(table: pa.Table, order: list[str], first: Any = None) -> Any:
    """Indices (numpy) that order ``table`` as DuckDB's ``ORDER BY`` (ascending, NULLS LAST)
    does: a stable numpy sort of the first key (:func:`_stable_argsort`), unless that key has
    ties and there are more keys. ``first``: the first key as numpy when the caller has it
    (else taken from the table)."""
    import pyarrow.compute as pc

    if first is None:
        first = _numpy_keys(table.column(order[0]))
    if first is not None:
        indices, ties = _stable_argsort(first, len(order) > 1)
        if not ties:
            return indices
    return pc.sort_indices(table, sort_keys=[(c, "ascending", "at_end") for c in order]
                           ).to_numpy()


def _stable_argsort(keys: np.ndarray, find_ties: bool) -> tuple[np.ndarray, bool]:
    """``argsort(keys, kind="stable")`` and, when ``find_ties``, whether two keys are equal.
    Where each key's distance from the smallest leaves room for a row number in an int64,
    the keys are sorted with their row numbers in the low bits by numpy's (vectorized,
    unstable) sort of distinct values, ~2.5x faster than its stable argsort (a merge sort of
    indices); same result."""
    import numpy as np

    if not len(keys):
        return np.zeros(0, np.int64), False
    values = keys.view(np.int64) if keys.dtype.kind == "M" else keys
    low, high = values.min(), values.max()
    bits = max(1, (len(keys) - 1).bit_length())
    if values.dtype.kind not in "iu" or int(high) - int(low) >= 1 << (63 - bits):
        indices = np.argsort(keys, kind="stable")
        ordered = keys[indices]
        return indices, find_ties and bool(np.any(ordered[1:] == ordered[:-1]))
    packed = (values - low).astype(np.int64, copy=False)
    packed <<= bits
    packed |= np.arange(len(keys), dtype=np.int64)
    packed.sort()
    ties = False
    if find_ties:
        distances = packed >> bits
        ties = bool(np.any(distances[1:] == distances[:-1]))
    packed &= (1 << bits) - 1
    return packed, ties


def _smallest_last(buffers: list[pa.Table], order: list[str]) -> dict[str, Any]:
    """The smallest of the buffers' last keys, as scalars by column."""
    import pyarrow as pa

    lasts = pa.concat_tables([b.select(order).slice(b.num_rows - 1) for b in buffers])
    first = int(_sort_indices(lasts, order)[0])
    return {c: lasts.column(c)[first] for c in order}


def _count_at_most(table: pa.Table, order: list[str], bound: dict[str, Any],
                   values: Any = None) -> int:
    """How many leading rows of ``table`` (ordered by ``order``) have keys ≤ ``bound``
    (``values``: the first key as numpy when the caller has it)."""
    import numpy as np
    import pyarrow as pa

    if values is None:
        values = _numpy_keys(table.column(order[0]))
    limit = bound[order[0]]
    if values is None or not limit.is_valid:
        return _count_at_most_arrow(table, order, bound)
    target = np.asarray(pa.array([limit.as_py()], limit.type).to_numpy(zero_copy_only=False))[0]
    low = int(np.searchsorted(values, target, side="left"))
    high = int(np.searchsorted(values, target, side="right"))
    if len(order) == 1 or low == high:
        return high
    return low + _count_at_most(table.slice(low, high - low), order[1:], bound)


def _count_at_most_arrow(table: pa.Table, order: list[str], bound: dict[str, Any]) -> int:
    import pyarrow.compute as pc

    at_most = None
    for column in reversed(order):
        values, limit = table.column(column), bound[column]
        if limit.is_valid:  # NULLS LAST: a null key is above every value
            less = pc.fill_null(pc.less(values, limit), False)
            equal = pc.fill_null(pc.equal(values, limit), False)
        else:
            less = pc.is_valid(values)
            equal = pc.is_null(values)
        at_most = pc.or_(less, equal) if at_most is None else pc.or_(less, pc.and_(equal, at_most))
    return int(pc.sum(at_most).as_py() or 0)


class ReplaySource:
    """``source(columns)``: the merged rows' ``columns`` (None: all), as batches made by
    ``prepare``; every call merges the files again, in the same order. ``rows``: how many rows
    the files hold (from their footers, without reading their values)."""

    def __init__(self, files: list[Path], order: list[str], batch_rows: int,
                 prepare: Callable[[pa.Table], pa.RecordBatch]) -> None:
        self.files, self.order, self.batch_rows, self.prepare = files, order, batch_rows, prepare
        self.rows = sum(file_rows(f) for f in files)

    def __call__(self, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        for table in merge_ordered(self.files, self.order, columns, self.batch_rows):
            yield self.prepare(table)

    def deal(self, codes: np.ndarray, splits: int) -> Iterator[tuple[int, pa.RecordBatch]]:
        """The merged rows dealt to their splits (``codes``: every row's split, in merged order;
        -1: none), window by window: ``(split, its rows of the window, in order)`` — the
        merged window filtered by split, gathered once."""
        offset = 0
        for window, indices in merge_windows(self.files, self.order, None, self.batch_rows):
            part = codes[offset:offset + len(indices)]
            offset += len(indices)
            for split in range(splits):
                picked = indices[part == split]
                if len(picked):
                    yield split, self.prepare(gather(window, picked))
        if offset != len(codes):  # pragma: no cover - the files are ours
            raise RuntimeError(f"the merge gave {offset} rows, the split codes {len(codes)}")


def replay_source(files: list[Path], order: list[str], batch_rows: int,
                  prepare: Callable[[pa.Table], pa.RecordBatch]) -> ReplaySource:
    """A :class:`ReplaySource` over the ordered result ``files``."""
    return ReplaySource(files, order, batch_rows, prepare)
