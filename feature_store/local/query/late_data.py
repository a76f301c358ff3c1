"""Late-data exposure of a training dataset: per point-in-time-joined group, how many of the rows
its join matched were committed after their label's time, and the largest such delay.

A point-in-time join keeps the future out by event time only: a matched row with an event time
before the label's but written after it (a backfill, a late batch, a correction) is joined
although no model serving at the label's time could have seen it. The figures say how much of
that a version holds (recorded with every version at creation, see
:mod:`feature_store.local.training_data.store`); an as-known join
(:mod:`feature_store.local.query.pit`) matches none such by construction, and its record says
how many the plain join would have let in (``kept_out``).

When a matched row became known is its ``ingestion_time`` where the group declares one, else
the time of the commit that wrote its current version. Where the query yields exactly one row
per label (every join a point-in-time left join of the root, no post-join filter), a new
version's query also returns each group's matched row id (``compile_query(probes=True)``) and the
figures are counted from those in memory (:func:`_probed_figures`), and a partitioned
(out-of-core) create counts them in its join kernel, each bucket's right rows carrying their known
time (:func:`known_columns`, :mod:`~feature_store.local.query.late_counts`), and a streamed
single statement (the default create) batch by batch (:class:`StreamCounter`); otherwise, and for a group
whose known times need its row versions, from one narrow ASOF join per group (its keys, event
time and known time; :func:`~feature_store.local.query.pit.exposure_sql`). The two give the same
figures (a differential test checks them). The known time is read cheaply where it can be:

- a group with an ``ingestion_time``: that column of the pinned files;
- a group whose files up to the pinned commit were only ever added (appends, merges that
  matched no row): the time of the commit that added each row's file;
- otherwise (corrections or deletions rewrote files): the current row versions of the group's
  history (:mod:`feature_store.local.storage.row_history`, kept per commit, shared with
  as-known joins).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from feature_store.local.query import row_gather
from feature_store.local.query.late_counts import Figures, add_figures, late_figures
from feature_store.local.query.pit import LABEL_PROBE, exposure_sql
from feature_store.local.query.query_plan import Gather, JoinPlan, event_time_of
from feature_store.local.storage import engine, row_history
from feature_store.local.storage.engine import quote_ident as q
from feature_store.local.storage.row_history import GONE, KNOWN
from fstrain.kernel.errors import HistoryRemovedError

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

    from feature_store.local.query.pit import CompiledQuery
    from feature_store.local.query.query_plan import Node, Plan

def exposure(compiled: CompiledQuery, con: duckdb.DuckDBPyConnection | None = None, *,
             probed: pa.Table | None = None,
             counted: dict[str, Figures] | None = None,
             labels: Sequence[str] = ()) -> dict[str, Any]:
    """``{"groups": [...]}``: one record per point-in-time join of the root (see
    :func:`_record`); plain joins and nested sub-queries' joins have no label time to compare
    with and are left out. Runs on ``con`` where given (an out-of-core create passes its own,
    whose memory limit and spill folder then bound these joins too), else on a connection of
    its own.

    ``probed`` is the query's result fetched with its hidden columns
    (``compiled.fetch(con, hidden=True)``): a group it probes whose known time is cheap to read
    (an ``ingestion_time``, or files only ever added) is counted from the matched row ids
    there, without a join of its own (:func:`_probed_figures`); the figures equal the join's.
    ``counted``: join alias -> figures a partitioned run counted while it joined (see
    :func:`~feature_store.local.query.late_counts.late_figures`). ``labels``: the view's label
    columns; a join that brings only labels is marked ``labels_only`` (a label known after its
    row's time is the label's delay, not leakage into the features)."""
    p = compiled.plan
    if p is None or not any(jp.point_in_time and jp.left is p.root for jp in p.joins):
        return {"groups": []}
    if con is not None:
        return {"groups": _groups(compiled, p, con, probed, counted or {}, set(labels))}
    own = engine.connect()
    try:
        return {"groups": _groups(compiled, p, own, probed, counted or {}, set(labels))}
    finally:
        own.close()


def _groups(compiled: CompiledQuery, p: Plan, con: duckdb.DuckDBPyConnection,
            probed: pa.Table | None, counted: dict[str, Figures], labels: set[str]
            ) -> list[dict[str, Any]]:
    root_ph = f"__SCAN_{p.root.alias}__"
    root_sql: str | None = None
    groups = []
    for jp in p.joins:
        if not jp.point_in_time or jp.left is not p.root:
            continue
        column = compiled.probes.get(jp.right.alias) if probed is not None else None
        figures = counted.get(jp.right.alias)
        if figures is None and column is not None and probed is not None:
            figures = _probed_figures(con, jp.right, probed[column], probed[LABEL_PROBE])
        if figures is None:
            if root_sql is None:
                root_sql = compiled.root_sql.replace(root_ph, compiled.source(con, root_ph))
            try:
                right = _known_source(con, jp.right)
            except HistoryRemovedError as exc:  # no known times to count: said, not guessed
                groups.append({"group": jp.right.group.key, "as_known": bool(jp.join.as_known),
                               "not_counted": str(exc)})
                continue
            sql = exposure_sql(jp, root_sql, right, q(KNOWN))
            figures = tuple(engine.fetch_arrow(con, sql, compiled.root_params).to_pylist()[0].values())
        rows, matched, late, delay_ms = figures
        record = _record(jp, int(rows), int(matched), int(late), delay_ms)
        brought = {c.name for c in p.columns if c.node is jp.right}
        if brought and brought <= labels:
            record["labels_only"] = True
        groups.append(record)
    return groups


def _probed_figures(con: duckdb.DuckDBPyConnection, node: Node, row_ids: pa.ChunkedArray,
                    label_us: pa.ChunkedArray) -> Figures | None:
    """``(rows, matched, late, max delay ms)`` of a group from its matched row ids and the
    label times (epoch µs), or None when its known times need the row versions. Late: known
    strictly after the label time; the delay is ``epoch_ms(known) - epoch_ms(label)`` as
    DuckDB computes it (:func:`~feature_store.local.query.late_counts.late_figures`)."""
    known_us = _known_by_row(con, node, row_ids)
    if known_us is None:
        return None
    labels = label_us.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    known, present = known_us
    return late_figures(labels, known, present, int(row_ids.length() - row_ids.null_count))


class StreamCounter:
    """Counts the late-data figures of a streamed single statement (``compiled.bind(con,
    single_statement=True, probed=True)``) batch by batch, for the probed groups whose known
    time is cheap (an ``ingestion_time``, carried by the statement; files only ever added:
    each file's commit time); :meth:`batches` hands the batches on without the hidden columns."""

    def __init__(self, compiled: CompiledQuery, con: duckdb.DuckDBPyConnection) -> None:
        self.compiled = compiled
        nodes = {jp.right.alias: jp.right for jp in (compiled.plan.joins if compiled.plan else [])}
        self.file_ms: dict[str, np.ndarray | None] = {}  # alias -> per-file ms; None: ingested
        for alias in compiled.probes:
            cheap = _cheap_known(con, nodes[alias])
            if cheap is not None:
                self.file_ms[alias] = None if isinstance(cheap, str) else cheap
        self.parts: dict[str, list[Figures]] = {alias: [] for alias in self.file_ms}

    def batches(self, reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
        """``reader``'s batches without the hidden columns, counted on the way (the reader is
        closed when the iteration ends or stops)."""
        hidden = self.compiled.streamed_hidden
        keep = [i for i, name in enumerate(reader.schema.names) if name not in hidden]
        try:
            for batch in reader:
                self._count(batch)
                yield batch.select(keep)
        finally:
            reader.close()

    def _count(self, batch: pa.RecordBatch) -> None:
        labels = batch.column(LABEL_PROBE).to_numpy(zero_copy_only=False).astype(np.int64)
        for alias, ms in self.file_ms.items():
            ids = batch.column(self.compiled.probes[alias])
            valid = ids.is_valid().to_numpy(zero_copy_only=False)
            if ms is None:
                known = batch.column(self.compiled.probe_known[alias])
                present = valid & known.is_valid().to_numpy(zero_copy_only=False)
                values = known.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            else:
                files = ids.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
                values, present = ms[files >> engine.ROW_ID_FILE_SHIFT] * 1000, valid
            self.parts[alias].append(late_figures(labels, values, present, int(valid.sum())))

    def counted(self) -> dict[str, Figures]:
        """Join alias -> the figures over every batch read (after :meth:`batches`)."""
        return {alias: add_figures(parts) for alias, parts in self.parts.items()}


def known_columns(compiled: CompiledQuery, con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Scan placeholder -> :func:`known_us_sql` over the scan with its row id, for each plain
    point-in-time join of the root whose known time is cheap to read: what a partitioned
    run counts while it joins."""
    p = compiled.plan
    if p is None:
        return {}
    by_alias = {node.alias: ph for ph, node in compiled.scans.items()}
    known = {}
    for jp in p.joins:
        if jp.point_in_time and jp.left is p.root and not jp.join.as_known:
            expr = known_us_sql(con, jp.right, engine.ROW_ID)
            if expr is not None:
                known[by_alias[jp.right.alias]] = expr
    return known


def known_us_sql(con: duckdb.DuckDBPyConnection, node: Node, row_id: str) -> str | None:
    """A SQL expression over the group's scan (with its row id column ``row_id``) of when each
    row became known, in epoch µs, where that is cheap (an ``ingestion_time``, or files only
    ever added: the adding commit's time by file index); None where it needs the row
    versions."""
    cheap = _cheap_known(con, node)
    if cheap is None:
        return None
    if isinstance(cheap, str):
        return f"epoch_us(CAST({q(cheap)} AS TIMESTAMPTZ))"
    ms = ", ".join(str(int(v)) for v in cheap)
    return f"([{ms}]::BIGINT[])[({q(row_id)} >> {engine.ROW_ID_FILE_SHIFT}) + 1] * 1000"


def _cheap_known(con: duckdb.DuckDBPyConnection, node: Node) -> str | np.ndarray | None:
    """How the group's known times are read without its row versions, as
    :func:`_known_source` reads them: the name of its ``ingestion_time`` column, or each
    pinned file's adding commit time (epoch ms, by file index); None where they need the row
    versions (files were rewritten), or the group has no files."""
    group, table, commit = node.group, node.group.delta_table, int(node.commit)
    files = table.files(commit)
    if not files:
        return None
    cols = list(dict.fromkeys([*group.upsert_key, event_time_of(group)]))
    listed = _columns_in_files(con, files)
    if not set(cols) <= listed:
        return None
    if group.ingestion_time:
        return group.ingestion_time if group.ingestion_time in listed else None
    try:
        added = _added_at(table, commit, files)
    except HistoryRemovedError:
        return None  # the exposure join records the group as not counted (_groups)
    return None if added is None else added.column("ms").to_numpy()


def _known_by_row(con: duckdb.DuckDBPyConnection, node: Node, row_ids: pa.ChunkedArray
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per result row: when its matched row became known (epoch µs) and whether there is such
    a time (a match, and a non-null ingestion time), as :func:`_known_source` defines it; None
    where that needs the row versions (files were rewritten)."""
    ids = row_ids.combine_chunks() if isinstance(row_ids, pa.ChunkedArray) else row_ids
    valid = ids.is_valid().to_numpy(zero_copy_only=False)
    if not node.group.delta_table.files(int(node.commit)):
        return np.zeros(len(ids), np.int64), valid & False
    cheap = _cheap_known(con, node)
    if cheap is None:
        return None
    if isinstance(cheap, str):
        return _ingested_by_row(node, ids)
    file_index = ids.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64) >> engine.ROW_ID_FILE_SHIFT
    return cheap[file_index] * 1000, valid


def _listing(files: list[str]) -> str:
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"


def _columns_in_files(con: duckdb.DuckDBPyConnection, files: list[str]) -> set[str]:
    listing = _listing(files)
    return set(con.sql(f"SELECT * FROM read_parquet({listing}, union_by_name=true) LIMIT 0").columns)


def _ingested_by_row(node: Node, ids: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A group's ``ingestion_time`` of each matched row (epoch µs, as ``CAST(... AS
    TIMESTAMPTZ)`` gives it), read from its pinned files by row id."""
    name = node.group.ingestion_time
    assert name is not None  # the caller checked
    source = row_gather.read_source(Gather(node, "", [(name, name)]))
    taken = source.rows(ids).take(source.table[name])
    con = engine.connect()
    try:
        con.register("__fstrain_ingested", pa.table({"k": taken}))
        us = con.sql("SELECT epoch_us(CAST(k AS TIMESTAMPTZ)) AS us FROM __fstrain_ingested").to_arrow_table()["us"]
    finally:
        con.close()
    us = us.combine_chunks()
    return us.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), us.is_valid().to_numpy(zero_copy_only=False)


def _record(jp: JoinPlan, rows: int, matched: int, late: int, delay_ms: Any) -> dict[str, Any]:
    """A group's figures: the label rows, the rows its plain join matched, how many of those
    were committed after their label time and the largest delay (seconds). For an as-known
    join ``late`` is 0 and ``kept_out``/``kept_out_max_delay_s`` say what it kept out."""
    delay = None if delay_ms is None else round(float(delay_ms) / 1000.0, 3)
    out: dict[str, Any] = {"group": jp.right.group.key, "as_known": bool(jp.join.as_known),
                           "rows": rows, "matched": matched}
    if jp.join.as_known:
        out.update(late=0, max_delay_s=None, kept_out=late, kept_out_max_delay_s=delay)
    else:
        out.update(late=late, max_delay_s=delay)
    return out


def _known_source(con: duckdb.DuckDBPyConnection, node: Node) -> str:
    """A SQL table expression of the group's rows at its pinned commit (upsert key, event
    time) with :data:`~feature_store.local.storage.row_history.KNOWN`: when each became known."""
    group, table, commit = node.group, node.group.delta_table, int(node.commit)
    cols = list(dict.fromkeys([*group.upsert_key, event_time_of(group)]))
    files = table.files(commit)
    if not files:
        name = engine.unique_name("__fstrain_known_")
        empty = table.schema(commit).empty_table().select(cols)
        con.register(name, empty.append_column(KNOWN, _empty_known()))
        return name
    listing = _listing(files)
    cheap = _cheap_known(con, node)
    select = ", ".join(q(c) for c in cols)
    if isinstance(cheap, str):
        return (f"(SELECT {select}, CAST({q(cheap)} AS TIMESTAMPTZ) AS "
                f"{q(KNOWN)} FROM read_parquet({listing}, union_by_name=true))")
    if cheap is not None:
        name = engine.unique_name("__fstrain_file_known_")
        con.register(name, pa.table({"idx": pa.array(range(len(files)), pa.int64()),
                                     "ms": pa.array(cheap, pa.int64())}))
        return (f"(SELECT {', '.join(f's.{q(c)}' for c in cols)}, "
                f"CAST(epoch_ms(m.ms) AS TIMESTAMPTZ) AS {q(KNOWN)} FROM (SELECT {select}, "
                f"file_index FROM read_parquet({listing}, union_by_name=true)) s "
                f"JOIN {name} m ON m.idx = s.file_index)")
    versions = row_history.row_versions(table, commit, group.upsert_key, group.ingestion_time)
    name = engine.unique_name("__fstrain_versions_")
    con.register(name, versions)
    return f"(SELECT {', '.join(q(c) for c in cols)}, {q(KNOWN)} FROM {name} WHERE {q(GONE)} IS NULL)"


def _empty_known() -> Any:
    return pa.array([], pa.timestamp("us", tz="UTC"))


def _added_at(table: Any, commit: int, files: list[str]) -> Any:
    """``(idx, ms)``: each of ``files`` (the pinned commit's, in scan order) with the commit time
    of the version that added it, or None when some version up to ``commit`` removed a file
    (a rewrite: a file's commit is then not its rows' commit)."""
    times = table.commit_times(commit)
    added: dict[str, int] = {}
    before: set[str] = set()
    for version, listed in enumerate(table.files_by_version(commit)):
        now = set(listed) if version < commit else set(files)
        if before - now:
            return None
        for f in now - before:
            if version not in times:
                return None
            added[f] = times[version]
        before = now
    return pa.table({"idx": pa.array(range(len(files)), pa.int64()),
                     "ms": pa.array([added[f] for f in files], pa.int64())})
