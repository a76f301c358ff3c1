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
the time of the commit that wrote its current version. The figures come from one narrow ASOF
join per group (its keys, event time and known time; :func:`~feature_store.local.query.pit.exposure_sql`),
not a second run of the query. The known time is read cheaply where it can be:

- a group with an ``ingestion_time``: that column of the pinned files;
- a group whose files up to the pinned commit were only ever added (appends, merges that
  matched no row): the time of the commit that added each row's file;
- otherwise (corrections or deletions rewrote files): the current row versions of the group's
  history (:mod:`feature_store.local.storage.row_history`, kept per commit, shared with
  as-known joins).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from feature_store.local.query.pit import exposure_sql
from feature_store.local.query.query_plan import JoinPlan, event_time_of
from feature_store.local.storage import engine, row_history
from feature_store.local.storage.engine import quote_ident as q
from feature_store.local.storage.row_history import GONE, KNOWN

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

    from feature_store.local.query.pit import CompiledQuery
    from feature_store.local.query.query_plan import Node, Plan

def exposure(compiled: CompiledQuery,
             con: duckdb.DuckDBPyConnection | None = None) -> dict[str, Any]:
    """``{"groups": [...]}``: one record per point-in-time join of the root (see
    :func:`_record`); plain joins and nested sub-queries' joins have no label time to compare
    with and are left out. Runs on ``con`` where given (an out-of-core create passes its own,
    whose memory limit and spill folder then bound these joins too), else on a connection of
    its own."""
    p = compiled.plan
    if p is None or not any(jp.point_in_time and jp.left is p.root for jp in p.joins):
        return {"groups": []}
    if con is not None:
        return {"groups": _groups(compiled, p, con)}
    own = engine.connect()
    try:
        return {"groups": _groups(compiled, p, own)}
    finally:
        own.close()


def _groups(compiled: CompiledQuery, p: Plan, con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    root_ph = f"__SCAN_{p.root.alias}__"
    root_sql = compiled.root_sql.replace(root_ph, compiled.source(con, root_ph))
    groups = []
    for jp in p.joins:
        if not jp.point_in_time or jp.left is not p.root:
            continue
        right = _known_source(con, jp.right)
        sql = exposure_sql(jp, root_sql, right, q(KNOWN))
        row = engine.fetch_arrow(con, sql, compiled.root_params).to_pylist()[0]
        rows, matched, late, delay_ms = row.values()
        groups.append(_record(jp, int(rows), int(matched), int(late), delay_ms))
    return groups


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
    listing = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    present = set(con.sql(f"SELECT * FROM read_parquet({listing}, union_by_name=true) LIMIT 0").columns)
    if set(cols) <= present:
        select = ", ".join(q(c) for c in cols)
        if group.ingestion_time and group.ingestion_time in present:
            return (f"(SELECT {select}, CAST({q(group.ingestion_time)} AS TIMESTAMPTZ) AS "
                    f"{q(KNOWN)} FROM read_parquet({listing}, union_by_name=true))")
        added = None if group.ingestion_time else _added_at(table, commit, files)
        if added is not None:
            name = engine.unique_name("__fstrain_file_known_")
            con.register(name, added)
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
    for version in range(commit + 1):
        now = set(table.files(version)) if version < commit else set(files)
        if before - now:
            return None
        for f in now - before:
            if version not in times:
                return None
            added[f] = times[version]
        before = now
    return pa.table({"idx": pa.array(range(len(files)), pa.int64()),
                     "ms": pa.array([added[f] for f in files], pa.int64())})
