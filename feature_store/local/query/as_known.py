"""The SQL of as-known point-in-time joins (``join(..., as_known=True)``, an fstrain extension).

A right row version matches a label row only if its event time is at or before the label time
*and* it was known (committed, or ingested for a group with an ``ingestion_time``) by then and
not yet replaced: per label row, the plain point-in-time join against the group as it was at
the label time. The group is read as its row versions (:mod:`feature_store.local.storage.row_history`).

What a key's labels match changes only at the times its versions become eligible
(``greatest(event_time, known)``) or stop being current, so the join is one ``ASOF`` join of
the label rows against a *timeline* of the right group: per key, each such time and the
version matched from it until the next one (:func:`timeline_source`), on ``label time >= at``
— the cost of a plain point-in-time join on a table about the size of the versions.

- Keys that never lost a row to a deletion: the match from a time on is the best version
  eligible by then (latest event time, then the plain join's tie-break, then the latest known:
  a replaced version's successor has the same event time and is known later), one running
  ``arg_max`` over the key's versions ordered by eligible time (``RANGE`` frame: versions
  eligible at the same time share it).
- Keys that lost a row (few): at each eligible time and end time of their versions, the best
  version eligible and not yet ended then, found exactly; a time from which nothing matches
  has no version (the join's columns are null; an inner join drops the label there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from feature_store.local.query.query_plan import event_time_of, is_epoch_ms
from feature_store.local.storage import engine, row_history
from feature_store.local.storage.engine import quote_ident as q
from feature_store.local.storage.row_history import ENDED, GONE, KNOWN, VID

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

    from feature_store.local.query.query_plan import JoinPlan
    from feature_store.local.query.query_spec import GroupSpec

#: the timeline's column: from when its version is the key's match (TIMESTAMPTZ)
AT = "__fstrain_at"


def timestamptz(group: GroupSpec, expr: str) -> str:
    """``expr`` (``group``'s event time) as a TIMESTAMPTZ (epoch milliseconds converted, UTC)."""
    if is_epoch_ms(group):
        return f"CAST(epoch_ms({expr}) AS TIMESTAMPTZ)"
    return f"CAST({expr} AS TIMESTAMPTZ)"


def timeline_source(jp: JoinPlan, versions: str, *, narrow: bool = False, ended: bool = True,
                    packed: bool = False) -> str:
    """The SQL table expression (unaliased) of the right group's timeline: its join keys,
    :data:`AT` and the columns of the version matched from then on (every row-version column,
    null where nothing matches). ``versions`` is the row-version table's scan (placeholder).

    ``narrow`` keeps of the version only :data:`VID` and, for a join with a lookback (which
    reads it), its event time: the statement that runs carries no more through the ``ASOF``
    join (which sorts whatever it carries), the group's columns being taken from the row
    versions by id afterwards (:mod:`feature_store.local.query.row_gather`). What
    :func:`timeline_table` knows of the versions simplifies the SQL: ``ended`` False (no
    version was ended by a deletion) leaves out the exact search of such keys, and ``packed``
    (no tie-break, no null event or known time) ranks the versions by one 128-bit number
    instead of a struct."""
    rg = jp.right.group
    rks = [q(k) for k in jp.join.right_on]
    keys = ", ".join(rks)
    et = q(event_time_of(rg))
    event_tz = timestamptz(rg, f"c.{et}")
    rank = "0"
    if jp.tie_break:  # the plain join's winner (smallest values, nulls last) ranks highest
        order = ", ".join(f"c.{q(k)} DESC NULLS FIRST" for k in jp.tie_break)
        rank = f"dense_rank() OVER (PARTITION BY {_on('c', rks)}, c.{et} ORDER BY {order})"
    at, vid, known, gone = q(AT), q(VID), q(KNOWN), q(GONE)
    carried = ", ".join(f"c.{q(k)}" for k in dict.fromkeys([*jp.join.right_on, *jp.tie_break]))
    deleted = f"d.{rks[0]} IS NOT NULL" if ended else "FALSE"
    found = (f"arg_max({vid}, {_score(jp, event_tz, f'c.{known}', packed)}) OVER (PARTITION BY "
             f"{keys} ORDER BY {at} RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")
    parts = [f"h AS (SELECT * FROM {versions})"]
    if ended:
        parts.append(f"d AS (SELECT DISTINCT {keys} FROM h WHERE {q(ENDED)})")
    parts.append(
        f"c AS (SELECT {carried}, c.{vid}, c.{et}, c.{known}, c.{gone}, "
        f"greatest({event_tz}, c.{known}) AS {at}, {rank} AS {_R}, {deleted} AS {_D} FROM h c"
        + (f" LEFT JOIN d ON {_eq('c', 'd', rks)})" if ended else ")"))
    parts.append(f"s AS (SELECT {keys}, {at}, {found} AS {_MV} FROM c WHERE NOT {_D})")
    timeline = "s"
    if ended:
        ties = ", ".join([f"c.{et} DESC", *(f"c.{q(k)}" for k in jp.tie_break), f"c.{known} DESC"])
        parts += [
            f"p AS (SELECT {keys}, {at} FROM c WHERE {_D} AND {at} IS NOT NULL "
            f"UNION SELECT {keys}, {gone} FROM c WHERE {_D} AND {gone} IS NOT NULL)",
            f"x AS (SELECT {_on('p', rks)}, p.{at}, c.{vid} AS {_MV} FROM p LEFT JOIN c "
            f"ON {_eq('c', 'p', rks)} AND c.{_D} AND {event_tz} <= p.{at} AND c.{known} <= p.{at} "
            f"AND (c.{gone} IS NULL OR c.{gone} > p.{at}) "
            f"QUALIFY row_number() OVER (PARTITION BY {_on('p', rks)}, p.{at} ORDER BY {ties}) = 1)",
            "t AS (SELECT * FROM s UNION ALL SELECT * FROM x)"]
        timeline = "t"
    lookup = not narrow or jp.join.lookback is not None
    select = (f"SELECT t.{at}, {_on('t', rks)}, {_version_columns(jp, narrow)} "
              f"FROM {timeline} t LEFT JOIN h ON h.{vid} = t.{_MV}" if lookup else
              f"SELECT t.{at}, {_on('t', rks)}, t.{_MV} AS {vid} FROM {timeline} t")
    return f"(WITH {', '.join(parts)} {select})"


def _score(jp: JoinPlan, event_tz: str, known: str, packed: bool) -> str:
    """What ranks a key's eligible versions (the highest is the match): event time, the
    plain join's tie-break, then the latest known. ``packed``: event time and known time
    (microseconds, none null, no tie-break) in one HUGEINT, high and low 64 bits, ordered as the
    struct is and cheaper to compare."""
    if packed and not jp.tie_break:
        return (f"(CAST(epoch_us({event_tz}) AS HUGEINT) * {1 << 64} + "
                f"(CAST(epoch_us({known}) AS HUGEINT) + {1 << 63}))")
    return f"{{'t': {event_tz}, 'r': {_R}, 'k': {known}}}"


def _version_columns(jp: JoinPlan, narrow: bool) -> str:
    """The matched version's columns a timeline carries beside its keys and :data:`AT`."""
    rks = [q(k) for k in jp.join.right_on]
    if not narrow:
        return f"h.* EXCLUDE ({', '.join(rks)})"
    kept = [c for c in (q(event_time_of(jp.right.group)), q(VID)) if c not in rks]
    return ", ".join(f"h.{c}" for c in kept)


#: where a timeline's SQL names its row versions before they are bound
_VERSIONS = "__fstrain_timeline_versions__"


def timeline_table(con: duckdb.DuckDBPyConnection, jp: JoinPlan, versions: pa.Table) -> pa.Table:
    """The narrow timeline (:func:`timeline_source` with ``narrow``) of the right group's row
    versions ``versions``, computed on ``con`` once and then kept with them
    (:func:`~feature_store.local.storage.row_history.derived`): the running ``arg_max`` over
    every version is most of an as-known join's cost beyond a plain one's, and the same
    commits are read again and again (a view's versions, its splits, re-reads)."""
    et = event_time_of(jp.right.group)
    ended = bool(pc.any(versions.column(ENDED)).as_py())
    packed = versions.column(KNOWN).null_count == 0 and versions.column(et).null_count == 0
    sql = timeline_source(jp, _VERSIONS, narrow=True, ended=ended, packed=packed)

    def build(table: pa.Table) -> pa.Table:
        name = engine.unique_name("__fstrain_timeline_versions_")
        con.register(name, table)
        try:
            return con.sql(f"SELECT * FROM {sql.replace(_VERSIONS, name)}").to_arrow_table()
        finally:
            con.unregister(name)

    return row_history.derived(versions, sql, build)


_R, _D, _MV = '"__fstrain_r"', '"__fstrain_d"', '"__fstrain_mv"'


def _on(alias: str, columns: list[str]) -> str:
    return ", ".join(f"{alias}.{c}" for c in columns)


def _eq(a: str, b: str, columns: list[str]) -> str:
    return " AND ".join(f"{a}.{c} = {b}.{c}" for c in columns)


def condition(jp: JoinPlan) -> str:
    """The ``ASOF`` join's ``ON`` condition: the label rows (the left node) against the timeline
    (aliased as the right node), on the keys and ``label time >= at``."""
    left, right = jp.left.alias, jp.right.alias
    conds = [f"{left}.{q(lk)} = {right}.{q(rk)}"
             for lk, rk in zip(jp.join.left_on, jp.join.right_on, strict=True)]
    label = timestamptz(jp.left.group, f"{left}.{q(event_time_of(jp.left.group))}")
    conds.append(f"{label} >= {right}.{q(AT)}")
    return " AND ".join(conds)


def matched(jp: JoinPlan) -> str:
    """True where the label row has a match (an inner join keeps only those)."""
    return f"{jp.right.alias}.{q(VID)} IS NOT NULL"
