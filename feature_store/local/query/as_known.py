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

from feature_store.local.query.query_plan import event_time_of, is_epoch_ms
from feature_store.local.storage.engine import quote_ident as q
from feature_store.local.storage.row_history import ENDED, GONE, KNOWN, VID

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.local.query.query_plan import JoinPlan
    from feature_store.local.query.query_spec import GroupSpec

#: the timeline's column: from when its version is the key's match (TIMESTAMPTZ)
AT = "__fstrain_at"


def timestamptz(group: GroupSpec, expr: str) -> str:
    """``expr`` (``group``'s event time) as a TIMESTAMPTZ (epoch milliseconds converted, UTC)."""
    if is_epoch_ms(group):
        return f"CAST(epoch_ms({expr}) AS TIMESTAMPTZ)"
    return f"CAST({expr} AS TIMESTAMPTZ)"


def timeline_source(jp: JoinPlan, versions: str) -> str:
    """The SQL table expression (unaliased) of the right group's timeline: its join keys,
    :data:`AT` and the columns of the version matched from then on (every row-version column,
    null where nothing matches). ``versions`` is the row-version table's scan (placeholder)."""
    rg = jp.right.group
    rks = [q(k) for k in jp.join.right_on]
    keys = ", ".join(rks)
    et = q(event_time_of(rg))
    event_tz = timestamptz(rg, f"c.{et}")
    rank = "0"
    if jp.tie_break:  # the plain join's winner (smallest values, nulls last) ranks highest
        order = ", ".join(f"c.{q(k)} DESC NULLS FIRST" for k in jp.tie_break)
        rank = f"dense_rank() OVER (PARTITION BY {_on('c', rks)}, c.{et} ORDER BY {order})"
    ties = ", ".join([f"c.{et} DESC", *(f"c.{q(k)}" for k in jp.tie_break), f"c.{q(KNOWN)} DESC"])
    at, vid, known, gone = q(AT), q(VID), q(KNOWN), q(GONE)
    carried = ", ".join(f"c.{q(k)}" for k in dict.fromkeys([*jp.join.right_on, *jp.tie_break]))
    return (
        f"(WITH h AS (SELECT * FROM {versions}), "
        f"d AS (SELECT DISTINCT {keys} FROM h WHERE {q(ENDED)}), "
        f"c AS (SELECT {carried}, c.{vid}, c.{et}, c.{known}, c.{gone}, "
        f"greatest({event_tz}, c.{known}) AS {at}, {rank} AS {_R}, "
        f"d.{rks[0]} IS NOT NULL AS {_D} FROM h c LEFT JOIN d ON {_eq('c', 'd', rks)}), "
        f"s AS (SELECT {keys}, {at}, arg_max({vid}, {{'t': {event_tz}, 'r': {_R}, "
        f"'k': c.{known}}}) OVER (PARTITION BY {keys} ORDER BY {at} RANGE BETWEEN UNBOUNDED "
        f"PRECEDING AND CURRENT ROW) AS {_MV} FROM c WHERE NOT {_D}), "
        f"p AS (SELECT {keys}, {at} FROM c WHERE {_D} AND {at} IS NOT NULL "
        f"UNION SELECT {keys}, {gone} FROM c WHERE {_D} AND {gone} IS NOT NULL), "
        f"x AS (SELECT {_on('p', rks)}, p.{at}, c.{vid} AS {_MV} FROM p LEFT JOIN c "
        f"ON {_eq('c', 'p', rks)} AND c.{_D} AND {event_tz} <= p.{at} AND c.{known} <= p.{at} "
        f"AND (c.{gone} IS NULL OR c.{gone} > p.{at}) "
        f"QUALIFY row_number() OVER (PARTITION BY {_on('p', rks)}, p.{at} ORDER BY {ties}) = 1), "
        f"t AS (SELECT * FROM s UNION ALL SELECT * FROM x) "
        f"SELECT t.{at}, {_on('t', rks)}, h.* EXCLUDE ({keys}) "
        f"FROM t LEFT JOIN h ON h.{vid} = t.{_MV})"
    )


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
