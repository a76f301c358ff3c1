"""The one place where joins — point-in-time and plain — are turned into SQL.

A query, frozen as a :class:`~feature_store.local.query.query_spec.QuerySpec` and planned by
:mod:`feature_store.local.query.query_plan`, compiles to one DuckDB statement over the Delta scans of
its feature groups. Semantics (see DESIGN.md and docs/concepts/joins.md):

- **Point-in-time** (both sides have an event_time): for each left row, the latest right row with
  ``right.event_time <= left.event_time`` (inclusive) on the join keys, via DuckDB's
  ``ASOF [LEFT] JOIN``. Exactly one output row per left row on a left join; no earlier row →
  nulls. Ties (several right rows with the same keys and event_time, possible only when the join
  keys do not cover the right group's primary key) are broken deterministically: the row with
  the smallest remaining primary-key values wins. ``lookback`` nulls (left) or drops (inner)
  matches older than ``left.event_time - lookback``. Only ``left`` and ``inner`` are allowed.
- **Plain** (either side lacks an event_time): an equality join. A right group *with* an
  event_time joined to a left side without one contributes its latest row per key.
- The right group's event_time, when selected, is in the output like any feature (as Hopsworks:
  ``select_all()`` of a joined group brings its event time); without a ``prefix`` it is dropped
  only when a column of that name is already selected (the root's event time); a right
  key column is dropped if the left side already selects a column of that name; other name
  clashes get the right group's name as prefix, with a warning (as Hopsworks).
- Filters that touch only the root group, and the ``start_time``/``end_time`` window on the
  root event_time, are applied inside the root scan; other filters after the joins.
- Nested sub-queries are flattened: their joins use their own root as left side.
- **As-known** (``join(..., as_known=True)``, an fstrain extension; point-in-time joins of the
  root only): a right row version matches a label row only if it was also *known* at the label
  time (committed by then, or ingested by then for a group with an ``ingestion_time``) and not
  yet replaced: per label row, the plain point-in-time join against the group as it was at the
  label time. The group is read as its row versions (``storage.row_history``) and the root
  rows are ``ASOF``-joined against its timeline: per key, from when each version is the match
  (:mod:`feature_store.local.query.as_known`).

Execution: a point-in-time-joined group whose columns nothing reads after its join (it is no
other join's left side and no post-join filter names it) carries only its keys, event time and
row id through the ASOF join — DuckDB sorts each side with every column it carries — and its
selected columns are taken by row afterwards (:mod:`feature_store.local.query.row_gather`). An
as-known-joined group is joined the same way: through the narrow timeline kept with its row
versions (:func:`as_known.timeline_table`), its columns taken from those versions by id. The
statement with every column in the joins is kept as ``display_template``: it is what
``Query.to_string()`` shows and what ``fetch(single_statement=True)`` runs to check the two.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from feature_store.local.query import as_known, row_gather
from feature_store.local.query.query_plan import (
    Gather,
    JoinPlan,
    Node,
    Plan,
    event_time_of,
    is_epoch_ms,
    lookback_in_unit,
    plan,
)
from feature_store.local.query.query_spec import Condition, Conjunction, FilterSpec, GroupSpec
from feature_store.local.query.row_gather import GatherPolicy
from feature_store.local.storage import engine
from feature_store.local.storage import row_history
from feature_store.local.storage.row_history import VID
from feature_store.local.storage.engine import quote_ident as q
from feature_store.local.storage.storage_errors import storage_boundary
from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.timeutil import required_utc, to_utc

#: the hidden column of a probed statement holding the root event time in epoch microseconds
LABEL_PROBE = "__fstrain_label_us"

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

    from feature_store.local.query.query_spec import QuerySpec


@dataclass
class PartitionShape:
    """What a partitioned run needs beside the SQL: the plan, and the root-only conditions
    (filters and the event-time window) on the root group's own column names, so they can be
    applied while the root rows are partitioned (:mod:`~feature_store.local.query.partitioned_join`)."""

    plan: Plan
    extra_columns: list[tuple[str, str]]
    post_filter: bool  # a filter naming a joined group runs after the joins
    root_filter: str | None
    root_params: list[Any]


@dataclass
class CompiledQuery:
    """SQL with placeholders for Delta scans, bound to a connection right before running.

    ``template`` is what runs: point-in-time-joined groups in ``gathers`` carry only their keys,
    event time and row id through the joins, and their columns are fetched by row afterwards
    (:mod:`feature_store.local.query.row_gather`). ``display_template`` is the equivalent single
    statement, with every column in the join, that :meth:`display_sql` shows.
    """

    template: str
    params: list[Any]
    scans: dict[str, Node] = field(default_factory=dict)
    display_template: str = ""
    gathers: list[Gather] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    #: scan placeholder -> the columns its rows can be hash-partitioned on so that every root row
    #: meets all its matches in the same partition (:mod:`~feature_store.local.query.partitioned_join`);
    #: None when the query's shape does not allow it
    partition_keys: dict[str, tuple[str, ...]] | None = None
    #: set when ``partition_keys`` is
    shape: PartitionShape | None = None
    #: scan placeholders of as-known-joined groups: bound to their row versions
    #: (see "As-known joins" below), not to their pinned files
    versions: set[str] = field(default_factory=set)
    #: the flattened query, and its root rows' select (unaliased) with its parameters: what
    #: the late-data exposure of a training dataset reads (:mod:`~feature_store.local.query.late_data`)
    plan: Plan | None = None
    root_sql: str = ""
    root_params: list[Any] = field(default_factory=list)
    #: compiled with ``probes``: the statement that runs also yields, per point-in-time join
    #: of the root, the matched row id (join alias -> hidden column; null: no match within the
    #: lookback) and the root event time in epoch microseconds (:data:`LABEL_PROBE`), one
    #: output row per root row, so the late-data exposure is counted from the query's own
    #: result (:func:`~feature_store.local.query.late_data.exposure`)
    probes: dict[str, str] = field(default_factory=dict)
    #: the single statement with the probes, for a streamed (out-of-core) run: it also yields,
    #: per probed group with an ``ingestion_time``, that time in epoch µs (``probe_known``:
    #: join alias -> hidden column), as a streamed run cannot read it by row id afterwards
    probe_template: str = ""
    probe_known: dict[str, str] = field(default_factory=dict)
    #: timeline placeholders of :attr:`template` -> their as-known join: bound to the narrow
    #: timeline kept with the group's row versions (:func:`as_known.timeline_table`)
    timelines: dict[str, JoinPlan] = field(default_factory=dict)

    @property
    def hidden(self) -> list[str]:
        """The columns of the statement that runs beyond the output: the probes."""
        return [*self.probes.values(), LABEL_PROBE] if self.probes else []

    @property
    def streamed_hidden(self) -> list[str]:
        """The columns of :attr:`probe_template` beyond the output."""
        return [*self.probes.values(), *self.probe_known.values(), LABEL_PROBE] if self.probes else []

    def source(self, con: duckdb.DuckDBPyConnection, placeholder: str, *,
               row_id: bool = False, bound: dict[str, tuple[pa.Table, str]] | None = None) -> str:
        """The SQL table expression a scan placeholder is bound to: the pinned Delta version,
        or an as-known-joined group's row versions registered on ``con`` (recorded in
        ``bound``, node alias -> the table and its registered name, where given)."""
        node = self.scans[placeholder]
        if placeholder in self.versions:
            name = engine.unique_name("__fstrain_versions_")
            versions = row_history.row_versions(node.group.delta_table, node.commit,
                                                node.group.upsert_key, node.group.ingestion_time)
            con.register(name, versions)
            if bound is not None:
                bound[node.alias] = (versions, name)
            return name
        return engine.scan(con, node.group.delta_table, node.commit, row_id=row_id)

    def bind(self, con: duckdb.DuckDBPyConnection, *, single_statement: bool = False,
             probed: bool = False, bound: dict[str, tuple[pa.Table, str]] | None = None) -> str:
        """Substitute each scan placeholder with a scan of the pinned Delta version.

        ``single_statement`` binds the equivalent statement that carries every column through
        the joins (what :meth:`display_sql` shows) instead of the one that runs; with
        ``probed`` (and probes compiled), :attr:`probe_template`. ``bound`` receives the row
        versions bound (see :meth:`source`).
        """
        gathered = set() if single_statement else {g.node.alias for g in self.gathers}
        if not single_statement or probed:
            gathered |= set(self.probes)
        bound = {} if bound is None else bound
        sources = {placeholder: self.source(con, placeholder, row_id=node.alias in gathered,
                                            bound=bound)
                   for placeholder, node in self.scans.items()}
        if not single_statement:
            for placeholder, jp in self.timelines.items():
                name = engine.unique_name("__fstrain_timeline_")
                con.register(name, as_known.timeline_table(con, jp, bound[jp.right.alias][0]))
                sources[placeholder] = name
        return self.bind_sources(sources, single_statement=single_statement, probed=probed)

    def bind_sources(self, sources: dict[str, str], *, single_statement: bool,
                     probed: bool = False) -> str:
        """The statement with each scan placeholder replaced by ``sources[placeholder]`` (a SQL
        table expression); ``single_statement`` and ``probed`` choose it as :meth:`bind` does."""
        if single_statement and probed and self.probe_template:
            sql = self.probe_template
        elif single_statement and self.display_template:
            sql = self.display_template
        else:
            sql = self.template
        for placeholder, source in sources.items():
            sql = sql.replace(placeholder, source)
        return sql

    def fetch(self, con: duckdb.DuckDBPyConnection, *, single_statement: bool = False,
              hidden: bool = False) -> pa.Table:
        """Run the query on ``con`` and return its result as Arrow.

        The gathered groups' columns are read from their pinned files in the background while
        the join runs, then taken by the matched row ids.
        ``single_statement`` runs the equivalent single statement instead (same result; used
        to check the two against each other). ``hidden`` keeps the :attr:`hidden` columns after
        the output's (the single statement has none).
        """
        groups = ", ".join(dict.fromkeys(f"'{n.group.name}' v{n.group.version}" for n in self.scans.values()))
        with storage_boundary(f"query over feature group(s) {groups}", "reading"):
            return self._fetch(con, single_statement=single_statement, hidden=hidden)

    def _fetch(self, con: duckdb.DuckDBPyConnection, *, single_statement: bool,
               hidden: bool) -> pa.Table:
        if single_statement:
            return engine.fetch_arrow(con, self.bind(con, single_statement=True), self.params)
        names = self.output + (self.hidden if hidden else [])
        bound: dict[str, tuple[pa.Table, str]] = {}
        sql = self.bind(con, bound=bound)
        if not self.gathers:
            joined = engine.fetch_arrow(con, sql, self.params)
            return joined if joined.column_names == names else joined.select(names)
        with row_gather.GatherReads(self.gathers, self._version_sources(con, bound)) as reads:
            joined = engine.fetch_arrow(con, sql, self.params)
            columns = {name: joined[name] for name in joined.column_names}
            columns.update(reads.take({g.row_column: joined[g.row_column] for g in self.gathers}))
        return pa.table({name: columns[name] for name in names})

    def _version_sources(self, con: duckdb.DuckDBPyConnection,
                         bound: dict[str, tuple[pa.Table, str]]) -> dict[str, row_gather.Source]:
        """Node alias -> the gathered columns of each as-known-joined gather's bound row
        versions, typed as DuckDB reads them (what the single statement would yield)."""
        sources = {}
        for g in self.gathers:
            if g.versions:
                versions, name = bound[g.node.alias]
                names = [src for src, _ in g.columns]
                types = con.sql(f"SELECT * FROM {name} LIMIT 0").to_arrow_table().schema
                sources[g.node.alias] = row_gather.version_source(versions, names, types)
        return sources

    def display_sql(self) -> str:
        """Readable SQL: scans as ``delta_scan(path, version)``, parameters inlined."""
        sql = self.display_template or self.template
        for placeholder, node in self.scans.items():
            scan = "row_versions" if placeholder in self.versions else "delta_scan"
            sql = sql.replace(placeholder, f"{scan}('{node.group.delta_table.path}', version => {node.commit})")
        parts = sql.split("?")
        out = parts[0]
        for value, rest in zip(self.params, parts[1:], strict=False):
            out += _literal(value) + rest
        return out


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if value is None:
        return "NULL"
    if hasattr(value, "isoformat"):
        return f"TIMESTAMPTZ '{value.isoformat()}'"
    return str(value)


# -- compiling -----------------------------------------------------------------------------


def compile_query(
    spec: QuerySpec,
    *,
    start_time: Any = None,
    end_time: Any = None,
    limit: int | None = None,
    order_by_root_key: bool = False,
    extra_columns: list[tuple[str, str]] | None = None,
    probes: bool = False,
) -> CompiledQuery:
    """Compile the frozen query ``spec`` (``query.spec()``) to one SQL statement.

    ``extra_columns`` adds ``(node-alias-of-root column, output name)`` pairs of the root group
    (used to carry keys/event time that were not selected). ``order_by_root_key`` sorts by the
    root group's primary key and event time so results are reproducible. ``probes`` adds the
    hidden columns of :attr:`CompiledQuery.probes` where the query's shape allows them.
    """
    p = plan(spec)
    params: list[Any] = []  # in placeholder order: root filter, window, post-join filter
    scans: dict[str, Node] = {}
    root_only, post = _split_filter(spec.filter, p.root.group)
    root_conditions = _root_conditions(p.root, root_only, start_time, end_time, params)
    root_params = list(params)
    root_sql = _root_select(p.root, root_conditions, scans)
    output = [c.name for c in p.columns] + [name for _, name in extra_columns or []]
    gathers = _gathers(p, post, output)
    from_parts = [f"{root_sql} {p.root.alias}"]
    run_parts = list(from_parts)  # the statement that runs: gathered timelines narrow
    where_parts: list[str] = []
    lookback_nodes: dict[str, str] = {}  # left-join alias -> its lookback condition
    narrow_timelines = {g.node.alias for g in gathers if g.versions}
    timelines: dict[str, JoinPlan] = {}
    for jp in p.joins:
        from_parts.append(_join_clause(jp, scans, where_parts, lookback_nodes, root_sql))
        run_parts.append(_timeline_clause(jp, scans, timelines)
                         if jp.right.alias in narrow_timelines else from_parts[-1])
    if post is not None:
        def column_sql(f: Condition) -> str:
            return f"{_alias_by_name(p, f)}.{q(f.name)}"

        where_parts.append(render_filter(post, column_sql, params))

    wide, narrow = _select_lists(p, gathers, extra_columns or [], lookback_nodes)
    probe_columns = _probes(p, post, gathers, limit) if probes else {}
    narrow += _probe_items(p, probe_columns, {g.node.alias for g in gathers}, lookback_nodes)
    probe_known = {jp.right.alias: f"__fstrain_known_{jp.right.alias}" for jp in p.joins
                   if jp.right.alias in probe_columns and jp.right.group.ingestion_time}
    streamed = wide + _probe_items(p, probe_columns, set(), lookback_nodes, probe_known)
    tail = _tail(p.root, from_parts, where_parts, order_by_root_key, limit)
    run_tail = _tail(p.root, run_parts, where_parts, order_by_root_key, limit)
    keys = _partition_keys(p) if limit is None and order_by_root_key else None
    shape = None if keys is None else PartitionShape(
        p, list(extra_columns or []), post is not None,
        " AND ".join(root_conditions) if root_conditions else None, root_params)
    return CompiledQuery("SELECT " + ", ".join(narrow) + run_tail, params, scans,
                         display_template="SELECT " + ", ".join(wide) + tail,
                         gathers=gathers, output=output,
                         partition_keys=None if keys is None else {
                             ph: keys[node.alias] for ph, node in scans.items()},
                         shape=shape,
                         versions={ph for ph, node in scans.items()
                                   if any(jp.join.as_known and jp.right is node for jp in p.joins)},
                         plan=p, root_sql=root_sql, root_params=root_params,
                         probes=probe_columns,
                         probe_template="SELECT " + ", ".join(streamed) + tail if probe_columns else "",
                         probe_known=probe_known, timelines=timelines)


def _probes(p: Plan, post: FilterSpec | None, gathers: list[Gather],
            limit: int | None) -> dict[str, str]:
    """Join alias -> the hidden column holding its matched row id, for each plain
    point-in-time left join of the root; empty unless the result has exactly one row per root
    row (every join such a join or an as-known left join of the root, no post-join filter, no
    limit), which is what lets the exposure count from the result."""
    one_per_root = post is None and limit is None and all(
        jp.point_in_time and jp.left is p.root and jp.join.join_type == "left" for jp in p.joins)
    if not one_per_root:
        return {}
    rows = {g.node.alias: g.row_column for g in gathers}
    probes = {}
    for jp in p.joins:
        alias = jp.right.alias
        if jp.join.as_known or engine.ROW_ID in jp.right.group.delta_table.schema(jp.right.commit).names:
            continue
        probes[alias] = rows.get(alias, f"{engine.ROW_ID}_probe_{alias}")
    return probes


def _probe_items(p: Plan, probes: dict[str, str], gathered: set[str],
                 lookback_nodes: dict[str, str], known: dict[str, str] | None = None) -> list[str]:
    """The select items of the probes a gather does not already carry (aliases ``gathered``),
    of the ``known`` groups' ingestion times in epoch µs, and of the root event time in epoch
    microseconds."""
    if not probes:
        return []
    nodes = {jp.right.alias: jp.right for jp in p.joins}
    items = []
    for alias, column in probes.items():
        if alias not in gathered:
            row_id = f"{alias}.{q(engine.ROW_ID)}"
            if alias in lookback_nodes:
                row_id = f"CASE WHEN {lookback_nodes[alias]} THEN {row_id} END"
            items.append(f"{row_id} AS {q(column)}")
    for alias, column in (known or {}).items():
        ingested = f"epoch_us(CAST({alias}.{q(str(nodes[alias].group.ingestion_time))} AS TIMESTAMPTZ))"
        items.append(f"{ingested} AS {q(column)}")
    label = _as_timestamptz(p.root.group, f"{p.root.alias}.{q(event_time_of(p.root.group))}")
    items.append(f"epoch_us({label}) AS {q(LABEL_PROBE)}")
    return items


def _partition_keys(p: Plan) -> dict[str, tuple[str, ...]] | None:
    """Per node alias, the columns its rows can be hash-partitioned on so that each root row and
    every row it can match land in the same partition, or None.

    That holds when every join is a point-in-time join of the root (one output row per root row,
    ordered by the root key) on the same root columns, each stored with the same type on both
    sides (equal values then hash equally). Plain joins, joins of sub-queries' roots and groups
    joined on different keys are not partitioned.
    """
    if not p.joins:
        return None
    root_keys: tuple[str, ...] | None = None
    keys: dict[str, tuple[str, ...]] = {}
    for jp in p.joins:
        pairs = dict(zip(jp.join.left_on, jp.join.right_on, strict=True))
        if not jp.point_in_time or jp.left is not p.root or len(pairs) != len(jp.join.left_on):
            return None
        root_keys = root_keys or tuple(jp.join.left_on)
        if set(pairs) != set(root_keys):
            return None
        for lk in root_keys:
            if str(p.root.group.get_feature(lk).type) != str(jp.right.group.get_feature(pairs[lk]).type):
                return None
        keys[jp.right.alias] = tuple(pairs[k] for k in root_keys)
    if root_keys is None:  # pragma: no cover - p.joins is not empty
        return None
    keys[p.root.alias] = root_keys
    return keys


def _root_conditions(root: Node, root_only: FilterSpec | None, start_time: Any, end_time: Any,
                     params: list[Any]) -> list[str]:
    """The pushed-down root filters and the event-time window, on the root's column names."""
    conditions = []
    if root_only is not None:
        conditions.append(render_filter(root_only, lambda f: q(f.name), params))
    return conditions + _window(root.group, start_time, end_time, params)


def _root_select(root: Node, conditions: list[str], scans: dict[str, Node]) -> str:
    """The root scan with the pushed-down root conditions (unaliased)."""
    sql = f"(SELECT * FROM {_placeholder(root, scans)}"
    if conditions:
        sql += " WHERE " + " AND ".join(conditions)
    return sql + ")"


def _join_clause(jp: JoinPlan, scans: dict[str, Node], where_parts: list[str],
                 lookback_nodes: dict[str, str], root_sql: str) -> str:
    """One ``JOIN ... ON ...`` clause. A point-in-time join's lookback goes to ``where_parts``
    (inner join) or to ``lookback_nodes`` (left join: the right side's columns become null).
    An as-known join is an ``ASOF`` join against the right group's timeline
    (:mod:`feature_store.local.query.as_known`); an inner one keeps the matched rows only."""
    if jp.join.as_known:
        if jp.join.lookback is not None:
            _lookback_to(jp, where_parts, lookback_nodes)
        if jp.join.join_type != "left":
            where_parts.append(as_known.matched(jp))
        return _as_known_clause(jp, scans)
    right_sql = f"(SELECT * FROM {_placeholder(jp.right, scans)}"
    dedupe = _dedupe(jp)
    if dedupe:
        right_sql += f" QUALIFY {dedupe}"
    right_sql += f") {jp.right.alias}"
    conds = [
        f"{jp.left.alias}.{q(lk)} = {jp.right.alias}.{q(rk)}"
        for lk, rk in zip(jp.join.left_on, jp.join.right_on, strict=True)
    ]
    if jp.point_in_time:
        lt, rt = _event_time_pair(jp)
        conds.append(f"{lt} >= {rt}")
        kind = "ASOF LEFT JOIN" if jp.join.join_type == "left" else "ASOF JOIN"
        if jp.join.lookback is not None:
            _lookback_to(jp, where_parts, lookback_nodes)
    else:
        kind = {"left": "LEFT JOIN", "inner": "JOIN", "right": "RIGHT JOIN",
                "outer": "FULL OUTER JOIN"}[jp.join.join_type]
    return f"{kind} {right_sql} ON " + " AND ".join(conds)


def _as_known_clause(jp: JoinPlan, scans: dict[str, Node]) -> str:
    """An as-known join's ``ASOF`` clause against the right group's timeline, computed in the
    statement (:func:`as_known.timeline_source`)."""
    source = as_known.timeline_source(jp, _placeholder(jp.right, scans))
    return f"ASOF LEFT JOIN {source} {jp.right.alias} ON {as_known.condition(jp)}"


def _timeline_clause(jp: JoinPlan, scans: dict[str, Node], timelines: dict[str, JoinPlan]) -> str:
    """An as-known join's ``ASOF`` clause against the right group's narrow timeline, bound to
    the table :func:`as_known.timeline_table` keeps with its row versions (placeholder in
    ``timelines``)."""
    _placeholder(jp.right, scans)  # its row versions are bound, and gathered from
    placeholder = f"__TIMELINE_{jp.right.alias}__"
    timelines[placeholder] = jp
    return f"ASOF LEFT JOIN {placeholder} {jp.right.alias} ON {as_known.condition(jp)}"


def _lookback_to(jp: JoinPlan, where_parts: list[str], lookback_nodes: dict[str, str]) -> None:
    """A point-in-time join's lookback: a ``WHERE`` condition (inner) or the condition under
    which its columns are not null (left)."""
    lt, rt = _event_time_pair(jp)
    fresh = _lookback_condition(jp, lt, rt)
    if jp.join.join_type == "inner":
        where_parts.append(fresh)
    else:
        lookback_nodes[jp.right.alias] = fresh


def _select_lists(p: Plan, gathers: list[Gather], extra_columns: list[tuple[str, str]],
                  lookback_nodes: dict[str, str]) -> tuple[list[str], list[str]]:
    """The select lists: ``wide`` carries every column through the joins (the displayed
    statement), ``narrow`` carries a gathered group's row id instead of its columns (the one
    that runs)."""
    def fresh(alias: str, expr: str) -> str:
        if alias in lookback_nodes:
            return f"CASE WHEN {lookback_nodes[alias]} THEN {expr} END"
        return expr

    gathered = {g.node.alias for g in gathers}
    wide, narrow = [], []
    for c in p.columns:
        item = f"{fresh(c.node.alias, f'{c.node.alias}.{q(c.source)}')} AS {q(c.name)}"
        wide.append(item)
        if c.node.alias not in gathered:
            narrow.append(item)
    for g in gathers:
        row_id = fresh(g.node.alias, f"{g.node.alias}.{q(VID if g.versions else engine.ROW_ID)}")
        narrow.append(f"{row_id} AS {q(g.row_column)}")
    for source, name in extra_columns:
        item = f"{p.root.alias}.{q(source)} AS {q(name)}"
        wide.append(item)
        narrow.append(item)
    return wide, narrow


def _tail(root: Node, from_parts: list[str], where_parts: list[str], order_by_root_key: bool,
          limit: int | None) -> str:
    """``FROM ... [WHERE ...] [ORDER BY root key] [LIMIT n]``."""
    tail = " FROM " + " ".join(from_parts)
    if where_parts:
        tail += " WHERE " + " AND ".join(where_parts)
    if order_by_root_key:
        tail += " ORDER BY " + ", ".join(f"{root.alias}.{q(k)}" for k in root.group.upsert_key)
    if limit is not None:
        tail += f" LIMIT {int(limit)}"
    return tail


def _gathers(p: Plan, post: FilterSpec | None, output: list[str]) -> list[Gather]:
    """The point-in-time-joined groups whose columns are fetched by row after the join.

    A group qualifies when nothing after its own join reads its columns in SQL: it is no other
    join's left side and no post-join filter names it; when neither its columns nor the output
    already use the row-id names; and when gathering pays and fits in memory
    (:class:`~feature_store.local.query.row_gather.GatherPolicy`). An as-known-joined group
    qualifies on the first two alone: its row versions are in memory already, and its
    timeline otherwise carries every column through the join.
    """
    lefts = {jp.left.alias for jp in p.joins}
    filtered = {_alias_by_name(p, f) for f in post.conditions()} if post is not None else set()
    taken = set(output)
    policy = GatherPolicy()
    gathers = []
    for jp in p.joins:
        node = jp.right
        columns = [(c.source, c.name) for c in p.columns if c.node is node]
        row_column = f"{engine.ROW_ID}_{node.alias}"
        if jp.join.as_known:
            if columns and node.alias not in lefts | filtered and row_column not in taken:
                gathers.append(Gather(node, row_column, columns, versions=True))
            continue
        if (not jp.point_in_time or not columns or node.alias in lefts
                or node.alias in filtered
                or row_column in taken
                or engine.ROW_ID in node.group.delta_table.schema(node.commit).names
                or not policy.admit(node.group.delta_table, node.commit, [src for src, _ in columns])):
            continue
        gathers.append(Gather(node, row_column, columns))
    return gathers


def _placeholder(node: Node, scans: dict[str, Node]) -> str:
    ph = f"__SCAN_{node.alias}__"
    scans[ph] = node
    return ph


def _as_timestamptz(group: GroupSpec, expr: str) -> str:
    """``expr`` (``group``'s event time) as a TIMESTAMPTZ (epoch milliseconds converted, UTC)."""
    if is_epoch_ms(group):
        return f"CAST(epoch_ms({expr}) AS TIMESTAMPTZ)"
    return f"CAST({expr} AS TIMESTAMPTZ)"


def _event_time_pair(jp: JoinPlan) -> tuple[str, str]:
    lt = f"{jp.left.alias}.{q(event_time_of(jp.left.group))}"
    rt = f"{jp.right.alias}.{q(event_time_of(jp.right.group))}"
    ltype = jp.left.group.get_feature(event_time_of(jp.left.group)).type
    rtype = jp.right.group.get_feature(event_time_of(jp.right.group)).type
    if ltype != rtype:
        lt, rt = _as_timestamptz(jp.left.group, lt), _as_timestamptz(jp.right.group, rt)
    return lt, rt


def _lookback_condition(jp: JoinPlan, lt: str, rt: str) -> str:
    """``right.event_time >= left.event_time - lookback`` in the pair's unit."""
    amount = lookback_in_unit(jp)
    if is_epoch_ms(jp.left.group) and is_epoch_ms(jp.right.group):
        return f"{rt} >= {lt} - {amount}"
    return f"{rt} >= {lt} - to_microseconds({amount})"


def _window(fg: GroupSpec, start_time: Any, end_time: Any, params: list[Any]) -> list[str]:
    start = to_utc(start_time, what="start_time")
    end = to_utc(end_time, what="end_time")
    if start is None and end is None:
        return []
    if not fg.event_time:
        raise InvalidArgumentError(
            f"feature group '{fg.name}' v{fg.version} has no event_time, so start_time/end_time "
            "cannot be applied. Drop the window or use a group with an event_time."
        )
    if start is not None and end is not None and start >= end:
        raise InvalidArgumentError(
            f"start_time must be before end_time (the window is [start, end)). Got "
            f"{start.isoformat()} and {end.isoformat()} instead."
        )
    epoch_ms = is_epoch_ms(fg)
    col = q(fg.event_time) if epoch_ms else f"CAST({q(fg.event_time)} AS TIMESTAMPTZ)"
    conds = []
    for bound, op in ((start, ">="), (end, "<")):
        if bound is not None:
            conds.append(f"{col} {op} ?")
            params.append(bound.value // 1_000_000 if epoch_ms else bound.to_pydatetime())
    return conds


def _conjuncts(f: FilterSpec) -> list[FilterSpec]:
    if isinstance(f, Conjunction) and f.op == "AND":
        return _conjuncts(f.left) + _conjuncts(f.right)
    return [f]


def _split_filter(f: FilterSpec | None, root: GroupSpec
                  ) -> tuple[FilterSpec | None, FilterSpec | None]:
    """Split a filter into the conjuncts that touch only the root group and the rest."""
    if f is None:
        return None, None
    root_parts: list[FilterSpec] = []
    other: list[FilterSpec] = []
    for part in _conjuncts(f):
        same = bool(part.conditions()) and all(
            c.group == (root.name, root.version) for c in part.conditions())
        (root_parts if same else other).append(part)
    return _and_all(root_parts), _and_all(other)


def _and_all(parts: list[FilterSpec]) -> FilterSpec | None:
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = Conjunction("AND", out, p)
    return out


def _alias_by_name(p: Plan, f: Condition) -> str:
    for node in p.nodes:
        if f.group is not None and (node.group.name, node.group.version) == f.group:
            return node.alias
    raise InvalidArgumentError(
        f"filter on feature '{f.name}' refers to a feature group that is not in the query."
    )


def render_filter(expr: FilterSpec, column_sql: Callable[[Condition], str],
                  params: list[Any]) -> str:
    """Render a filter to SQL; values go to ``params`` as positional ``?`` parameters.

    ``column_sql(condition)`` maps a condition to its SQL column.
    """
    if isinstance(expr, Conjunction):
        left = render_filter(expr.left, column_sql, params)
        right = render_filter(expr.right, column_sql, params)
        return f"({left} {expr.op} {right})"
    col = column_sql(expr)
    value = _param_value(expr)
    if expr.op == "IS NULL":
        return f"{col} IS NULL"
    if expr.op == "IN":
        if not value:
            return "FALSE"
        params.extend(value)
        return f"{col} IN ({', '.join('?' for _ in value)})"
    if expr.op == "CONTAINS":
        params.append(f"%{value}%")
        return f"{col} LIKE ?"
    params.append(value)
    return f"{col} {expr.op} ?"


def _param_value(condition: Condition) -> Any:
    """Timestamps in filters follow the UTC rule; everything else passes through."""
    value = condition.value
    if (condition.type.startswith("timestamp") and value is not None
            and not isinstance(value, list)):
        group = condition.group
        of = f" of feature group '{group[0]}' v{group[1]}" if group is not None else ""
        return required_utc(value, what=f"filter value for '{condition.name}'{of}"
                            ).to_pydatetime()
    return value


def _dedupe(jp: JoinPlan) -> str | None:
    """The QUALIFY condition keeping one right row per match candidate, or None: among rows
    with the same keys and event time the smallest remaining upsert key (point-in-time); the
    latest row per key (a plain join of a group with an event time)."""
    rg = jp.right.group
    keys = ", ".join(q(k) for k in jp.join.right_on)
    if jp.point_in_time and jp.rest:
        order = ", ".join(q(k) for k in jp.rest)
        return (f"row_number() OVER (PARTITION BY {keys}, {q(event_time_of(rg))} "
                f"ORDER BY {order}) = 1")
    if not jp.point_in_time and rg.event_time:
        order = ", ".join([q(rg.event_time) + " DESC"] + [q(k) for k in jp.rest])
        return f"row_number() OVER (PARTITION BY {keys} ORDER BY {order}) = 1"
    return None


def exposure_sql(jp: JoinPlan, root_sql: str, right_source: str, known: str) -> str:
    """The late-data figures of a plain point-in-time join (:mod:`feature_store.local.query.late_data`):
    root rows, matched rows (lookback included), matched rows whose row became known (column
    ``known`` of ``right_source``, the group's rows at its commit) after the label time, and
    the largest such delay in milliseconds."""
    root, right = jp.left, jp.right
    keys = [f"{root.alias}.{q(a)} = {right.alias}.{q(b)}"
            for a, b in zip(jp.join.left_on, jp.join.right_on, strict=True)]
    lt, rt = _event_time_pair(jp)
    label = _as_timestamptz(root.group, f"{root.alias}.{q(event_time_of(root.group))}")
    dedupe = _dedupe(jp)
    right_sql = f"(SELECT * FROM {right_source}" + (f" QUALIFY {dedupe}" if dedupe else "") + ")"
    matched = f"{right.alias}.{q(event_time_of(right.group))} IS NOT NULL"
    if jp.join.lookback is not None:
        matched += f" AND {_lookback_condition(jp, lt, rt)}"
    late = f"{matched} AND {right.alias}.{known} > {label}"
    delay = f"epoch_ms({right.alias}.{known}) - epoch_ms({label})"
    return (f"SELECT count(*), count(*) FILTER (WHERE {matched}), "
            f"count(*) FILTER (WHERE {late}), max({delay}) FILTER (WHERE {late}) "
            f"FROM {root_sql} {root.alias} ASOF LEFT JOIN {right_sql} {right.alias} "
            f"ON {' AND '.join(keys)} AND {lt} >= {rt}")
