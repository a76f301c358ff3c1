"""Every version a feature group's rows have had, and when each became known.

An as-known join (:mod:`feature_store.local.query.pit`) and the late-data exposure of a training
dataset need, for a group read at commit ``C``, each *row version* the table held at any commit
up to ``C``: its values, the time it became known and the time it stopped being current (a
correction or a deletion replaced it), or none while it is current. :func:`row_versions` builds
that table once per ``(table, C)`` and keeps it (a committed version never changes):

- the row-level events come from Delta's change data feed where the table was created with it
  (``delta.enableChangeDataFeed``, set for every new table): inserts and update post-images
  put a version, deletes and update pre-images end one; otherwise they come from replaying the
  table's versions: the rows of the files a commit added put, the rows of the files it removed
  end (a merge rewrites untouched rows into new files: a row put and ended by the same commit
  with the same values is no event, on both paths);
- a version became known at its commit's time (``DeltaFeatureTable.commit_times``: the
  injectable commit clock's when fstrain wrote it), or, when the group declares an ``ingestion_time`` column, at
  that column's value; it stops being current when the next event of its upsert key becomes
  known.

The result has the group's columns at ``C`` and :data:`KNOWN`, :data:`GONE` (TIMESTAMPTZ),
:data:`VID` (a row-version id) and :data:`ENDED` (ended by a deletion, not replaced).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fstrain.kernel.errors import IntegrityError

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import pyarrow as pa

    from feature_store.local.storage.delta_table import DeltaFeatureTable

KNOWN = "__fstrain_known"
GONE = "__fstrain_gone"
VID = "__fstrain_vid"
ENDED = "__fstrain_ended"
_VERSION = "__fstrain_v"
_PUT = "__fstrain_put"
#: an event that may cancel against an identical one of the same commit (update images, and
#: every event of a replay); the change data feed's inserts and deletes never do
_PAIRED = "__fstrain_paired"
#: row-version tables kept in memory (most recently used)
MAX_HISTORIES = 8


@dataclass
class _Entry:
    """A cached row-version table and the tables derived from it (see :func:`derived`)."""

    versions: pa.Table
    derived: dict[str, pa.Table] = field(default_factory=dict)


_cache: OrderedDict[tuple[str, str, int, str | None], _Entry] = OrderedDict()
_lock = threading.Lock()


def row_versions(table: DeltaFeatureTable, commit: int, upsert_key: Sequence[str],
                 ingestion_time: str | None = None) -> pa.Table:
    """The row versions of ``table`` up to ``commit`` (see the module docstring), cached."""
    key = (str(table.path), str(table.table(commit).metadata().id), int(commit), ingestion_time)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found.versions
    built = _build(table, int(commit), list(upsert_key), ingestion_time)
    with _lock:
        _cache[key] = _Entry(built)
        while len(_cache) > MAX_HISTORIES:
            _cache.popitem(last=False)
    return built


def derived(versions: pa.Table, name: str, build: Callable[[pa.Table], pa.Table]) -> pa.Table:
    """``build(versions)``, kept with ``versions`` (a table :func:`row_versions` returned) under
    ``name`` for as long as that very table stays cached: what is derived from it, such as an
    as-known join's timeline, refers to its :data:`VID` values, which a rebuilt table may
    number differently."""
    def entry() -> _Entry | None:
        return next((e for e in _cache.values() if e.versions is versions), None)

    with _lock:
        found = entry()
        if found is not None and name in found.derived:
            return found.derived[name]
    built = build(versions)
    with _lock:
        found = entry()
        if found is not None:
            found.derived[name] = built
    return built


def has_change_feed(table: DeltaFeatureTable) -> bool:
    """Whether the table recorded its change data feed from its first commit (False where
    that commit's file is gone: the replay then says so)."""
    if not table.commit_file(0).exists():
        return False
    config = table.table(0).metadata().configuration or {}
    return str(config.get("delta.enableChangeDataFeed", "")).lower() == "true"


def _build(table: DeltaFeatureTable, commit: int, upsert_key: list[str],
           ingestion_time: str | None) -> pa.Table:
    from feature_store.local.storage import engine

    schema = table.schema(commit)
    con = engine.connect()
    try:
        events = _events(con, table, commit, schema)
        times = table.commit_times(commit)
        return _versions(con, events, schema, times, upsert_key, ingestion_time)
    finally:
        con.close()


def _events(con: duckdb.DuckDBPyConnection, table: DeltaFeatureTable, commit: int,
            schema: pa.Schema) -> pa.Table:
    """Row events (the columns at ``commit``, :data:`_VERSION`, :data:`_PUT`), identical put
    and end of one row in one commit cancelled. Only :data:`_PAIRED` events are compared (a
    merge's update images of rows it matched but left as they were), so a history of inserts
    costs no comparison of whole rows, and none at all when nothing is paired."""
    import pyarrow as pa

    raw = None
    if commit > 0 and has_change_feed(table):
        raw = _feed_events(table, commit, schema)
    if raw is None:
        raw = _replayed_events(con, table, commit, schema)
    import pyarrow.compute as pc

    paired_mask = raw.column(_PAIRED)
    if not pc.any(paired_mask).as_py():  # inserts and deletes only: nothing to compare
        return raw.drop_columns([_PAIRED])
    cols = [*schema.names, _VERSION]
    plain = raw.filter(pc.invert(paired_mask)).select([*cols, _PUT])
    con.register("__fstrain_events", raw.filter(paired_mask))
    listed = ", ".join(engine_q(c) for c in cols)
    put = engine_q(_PUT)
    sql = (f"WITH e AS (SELECT * FROM __fstrain_events), "
           f"p AS (SELECT {listed} FROM e WHERE {put} EXCEPT ALL SELECT {listed} FROM e WHERE NOT {put}), "
           f"d AS (SELECT {listed} FROM e WHERE NOT {put} EXCEPT ALL SELECT {listed} FROM e WHERE {put}) "
           f"SELECT *, TRUE AS {put} FROM p UNION ALL SELECT *, FALSE AS {put} FROM d")
    try:
        compared = con.sql(sql).to_arrow_table()
    finally:
        con.unregister("__fstrain_events")
    return pa.concat_tables([plain, compared.cast(plain.schema)])


def engine_q(name: str) -> str:
    """A quoted identifier (DuckDB)."""
    return '"' + name.replace('"', '""') + '"'


def _feed_events(table: DeltaFeatureTable, commit: int, schema: pa.Schema) -> pa.Table | None:
    """Events from the change data feed, or None where it cannot be read (schema changes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        feed = pa.table(table.table(commit).load_cdf(starting_version=0,
                                                     ending_version=commit).read_all())
    except Exception:  # noqa: BLE001 - any feed the library cannot read is replayed instead
        return None
    kind = feed.column("_change_type").cast(pa.string())
    put = pc.is_in(kind, pa.array(["insert", "update_postimage"]))
    version = feed.column("_commit_version").cast(pa.int64())
    # update images pair up; so may the inserts and deletes of a commit holding both (an
    # overwrite that wrote a row back as it was)
    both = set(pc.unique(pc.filter(version, pc.equal(kind, "delete"))).to_pylist()) & set(
        pc.unique(pc.filter(version, pc.equal(kind, "insert"))).to_pylist())
    paired = pc.or_(pc.is_in(kind, pa.array(["update_preimage", "update_postimage"])),
                    pc.is_in(version, pa.array(sorted(both), pa.int64())))
    columns = [_column(feed, f) for f in schema]
    return pa.table([*columns, version, put, paired],
                    names=[*schema.names, _VERSION, _PUT, _PAIRED])


def _column(data: pa.Table, field: pa.Field) -> Any:
    import pyarrow as pa

    if field.name not in data.column_names:
        return pa.nulls(data.num_rows, field.type)
    return data.column(field.name).cast(field.type)


def _replayed_events(con: duckdb.DuckDBPyConnection, table: DeltaFeatureTable, commit: int,
                     schema: pa.Schema) -> pa.Table:
    """Events from replaying the versions: added files' rows put, removed files' rows end."""
    import pyarrow as pa

    parts = []
    before: set[str] = set()
    for version, listed in enumerate(table.files_by_version(commit)):
        files = set(listed)
        for chosen, put in ((sorted(files - before), True), (sorted(before - files), False)):
            if chosen:
                parts.append(_read_files(con, table, chosen, schema, version, put))
        before = files
    empty = pa.table([*(pa.array([], f.type) for f in schema), pa.array([], pa.int64()),
                      pa.array([], pa.bool_()), pa.array([], pa.bool_())],
                     names=[*schema.names, _VERSION, _PUT, _PAIRED])
    return pa.concat_tables([empty, *parts]) if parts else empty


def _read_files(con: duckdb.DuckDBPyConnection, table: DeltaFeatureTable, files: list[str],
                schema: pa.Schema, version: int, put: bool) -> pa.Table:
    import pyarrow as pa

    listing = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    source = f"read_parquet({listing}, union_by_name=true)"
    try:
        present = set(con.sql(f"SELECT * FROM {source} LIMIT 0").columns)
        data = con.sql(f"SELECT * FROM {source}").to_arrow_table()
    except Exception as exc:  # noqa: BLE001 - a vacuumed or damaged file
        raise IntegrityError(
            f"{table.owner}: the files of commit {version} cannot be read ({exc}); an as-known "
            "read needs every commit's files up to the one it reads. Files removed by vacuum "
            "cannot come back: build the training data at a commit whose history is kept."
        ) from exc
    columns = [_column(data, f) if f.name in present else pa.nulls(data.num_rows, f.type)
               for f in schema]
    return pa.table([*columns, pa.array([version] * data.num_rows, pa.int64()),
                     pa.array([put] * data.num_rows, pa.bool_()),
                     pa.array([True] * data.num_rows, pa.bool_())],  # a replay compares all
                    names=[*schema.names, _VERSION, _PUT, _PAIRED])


def _versions(con: duckdb.DuckDBPyConnection, events: pa.Table, schema: pa.Schema,
              times: dict[int, int], upsert_key: list[str], ingestion_time: str | None
              ) -> pa.Table:
    """Row versions with :data:`KNOWN`, :data:`GONE`, :data:`ENDED` and :data:`VID`.

    The window that finds each event's successor carries only the upsert key, the commit, the
    kind and the known time of each event (a sort carries every column it is given), and sorts
    only the events of keys with more than one (most rows were put once and never replaced: their
    version is current, found by hashing, not sorting); the versions' columns are then taken from
    the events by position."""
    import numpy as np
    import pyarrow as pa

    q = engine_q
    version = events.column(_VERSION).to_numpy(zero_copy_only=False)
    clock = np.zeros(int(version.max()) + 1 if len(version) else 1, dtype=np.int64)
    for v, ms in times.items():
        if 0 <= v < len(clock):
            clock[v] = ms
    committed = pa.array(clock[version] * 1000, pa.timestamp("us", tz="UTC"))
    columns = [*(events.column(k) for k in upsert_key), events.column(_VERSION),
               events.column(_PUT), committed, pa.array(np.arange(len(events), dtype=np.int64))]
    names = [*(f"__fstrain_u{i}" for i in range(len(upsert_key))), _VERSION, _PUT, "__fstrain_c",
             "__fstrain_i"]
    if ingestion_time:
        columns.append(events.column(ingestion_time))
        names.append("__fstrain_it")
    known = (f"CASE WHEN {q(_PUT)} THEN CAST(__fstrain_it AS TIMESTAMPTZ) ELSE __fstrain_c END"
             if ingestion_time else "__fstrain_c")
    con.register("__fstrain_ev", pa.table(columns, names=names))
    keys = ", ".join(f"__fstrain_u{i}" for i in range(len(upsert_key)))
    same = " AND ".join(f"e2.__fstrain_u{i} IS NOT DISTINCT FROM m.__fstrain_u{i}"
                        for i in range(len(upsert_key)))
    k, g = q("__fstrain_k"), q("__fstrain_g")
    p1, p2, v1, v2 = (q(f"__fstrain_{n}") for n in ("p1", "p2", "v1", "v2"))
    sql = (
        f"WITH e2 AS (SELECT *, {known} AS {k} FROM __fstrain_ev), "
        f"m AS (SELECT {keys} FROM e2 GROUP BY ALL HAVING count(*) > 1), "
        f"many AS (SELECT e2.* FROM e2 SEMI JOIN m ON {same}), "
        f"once AS (SELECT e2.* FROM e2 ANTI JOIN m ON {same}), "
        f"s AS (SELECT __fstrain_i, {keys}, {k}, {q(_PUT)}, lead({k}) OVER w AS {g}, "
        f"lead({q(_PUT)}) OVER w AS {p1}, lead({q(_PUT)}, 2) OVER w AS {p2}, "
        f"lead({q(_VERSION)}) OVER w AS {v1}, lead({q(_VERSION)}, 2) OVER w AS {v2} "
        f"FROM many WINDOW w AS (PARTITION BY {keys} ORDER BY {q(_VERSION)}, {q(_PUT)})) "
        f"SELECT __fstrain_i, {k} AS {q(KNOWN)}, {g} AS {q(GONE)}, "
        f"({g} IS NOT NULL AND NOT {p1} AND NOT coalesce({p2} AND {v2} = {v1}, FALSE)) "
        f"AS {q(ENDED)} FROM s WHERE {q(_PUT)} "
        f"UNION ALL SELECT __fstrain_i, {k}, NULL, FALSE FROM once WHERE {q(_PUT)}"
    )
    try:
        found = con.sql(sql).to_arrow_table()
    finally:
        con.unregister("__fstrain_ev")
    rows = events.select(schema.names).take(found.column("__fstrain_i"))
    return pa.table([*rows.columns, found.column(KNOWN).cast(pa.timestamp("us", tz="UTC")),
                     found.column(GONE).cast(pa.timestamp("us", tz="UTC")), found.column(ENDED),
                     pa.array(np.arange(1, found.num_rows + 1, dtype=np.int64))],
                    names=[*schema.names, KNOWN, GONE, ENDED, VID])
