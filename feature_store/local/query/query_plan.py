"""Planning a frozen query: its groups as nodes, its joins, and the names of its columns.

:func:`plan` flattens a :class:`~feature_store.local.query.query_spec.QuerySpec` (nested sub-queries
join onto their own root) and decides, per join, whether it is point-in-time (both sides have an
event time), which right columns it brings and under which names (see
:mod:`feature_store.local.query.pit` for the rules), and which upsert-key columns break ties. The SQL
is written from the plan by :mod:`feature_store.local.query.pit`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from feature_store.local.query.query_spec import Column, GroupSpec, JoinSpec, QuerySpec
from fstrain.kernel.errors import InvalidArgumentError


@dataclass
class Node:
    """One feature group occurrence in the flattened query."""

    alias: str
    group: GroupSpec
    selected: list[str]
    commit: int


@dataclass
class JoinPlan:
    """One join of the flattened query."""

    left: Node
    right: Node
    join: JoinSpec
    point_in_time: bool
    #: the right group's upsert-key columns beyond the join keys and event time
    rest: tuple[str, ...] = ()

    @property
    def tie_break(self) -> tuple[str, ...]:
        """Among right rows with equal keys and event time, the one with the smallest values of
        these columns wins (point-in-time joins only)."""
        return self.rest if self.point_in_time else ()


@dataclass
class OutColumn:
    """One output column: its name, the node it comes from and the column there."""

    name: str
    node: Node
    source: str
    column: Column


@dataclass
class Plan:
    """A flattened query: the root node, every node, the joins and the output columns."""

    root: Node
    nodes: list[Node]
    joins: list[JoinPlan]
    columns: list[OutColumn]


@dataclass
class Gather:
    """The selected columns of a point-in-time-joined group, fetched by row id after the join."""

    node: Node
    row_column: str  # the join result's column holding the matched row id (null: no match)
    columns: list[tuple[str, str]]  # (column of the group, output name)
    #: an as-known-joined group: the row column holds the matched row version's id, and the
    #: columns are taken from the row versions the statement was bound to, not from files
    versions: bool = False


def plan(spec: QuerySpec) -> Plan:
    """Flatten a resolved query into nodes, joins and output columns."""
    counter = [0]

    def new_node(sub: QuerySpec) -> Node:
        if sub.commit is None:
            raise ValueError(f"plan() of {sub.group.owner} before its commit is resolved")
        node = Node(f"t{counter[0]}", sub.group, list(sub.features), sub.commit)
        counter[0] += 1
        return node

    root = new_node(spec)
    nodes, joins = [root], []

    def walk(sub: QuerySpec, left: Node) -> None:
        for j in sub.joins:
            right = new_node(j.query)
            nodes.append(right)
            joins.append(_plan_join(left, right, j))
            walk(j.query, right)

    walk(spec, root)
    for jp in joins:
        if jp.join.as_known and jp.left is not root:
            raise InvalidArgumentError(
                f"as_known join of '{jp.right.group.name}' onto '{jp.left.group.name}': "
                "as-known joins join the root (label) group; a nested sub-query's joins cannot "
                "be as-known. Join the group to the root instead."
            )
    columns = [OutColumn(c, root, c, root.group.get_feature(c)) for c in root.selected]
    taken = {c.name for c in columns}
    for jp in joins:
        _add_right_columns(jp, columns, taken)
    return Plan(root, nodes, joins, columns)


def _plan_join(left: Node, right: Node, join: JoinSpec) -> JoinPlan:
    lg, rg = left.group, right.group
    pit = bool(lg.event_time and rg.event_time)
    if pit and join.join_type not in ("left", "inner"):
        raise InvalidArgumentError(
            f"point-in-time join of '{rg.name}' onto '{lg.name}' must be 'left' or 'inner'. "
            f"Got {join.join_type!r} instead."
        )
    if join.lookback is not None and not pit:
        raise InvalidArgumentError(
            f"lookback on the join of '{rg.name}' onto '{lg.name}' needs an event_time on both "
            "groups (it bounds a point-in-time join)."
        )
    if join.as_known and not pit:
        raise InvalidArgumentError(
            f"as_known join of '{rg.name}' onto '{lg.name}' needs an event_time on both groups "
            "(a row is matched only if it was known at the label's event time)."
        )
    covered = set(join.right_on) | ({rg.event_time} if pit else set())
    rest = tuple(k for k in rg.upsert_key if k not in covered and k != rg.event_time)
    return JoinPlan(left, right, join, pit, rest)


def _add_right_columns(jp: JoinPlan, columns: list[OutColumn], taken: set[str]) -> None:
    rg, join = jp.right.group, jp.join
    left_selected = set(jp.left.selected)
    pending: list[tuple[str, str]] = []
    for col in jp.right.selected:
        if col == rg.event_time and join.prefix is None and col in taken:
            continue  # the root's (or an earlier group's) column of that name is the one kept
        if join.prefix is None and col in join.right_on:
            left_col = join.left_on[join.right_on.index(col)]
            if left_col == col and col in left_selected:
                continue
        name = f"{join.prefix}{col}" if join.prefix else col
        pending.append((col, name))
    clashes = [name for _, name in pending if name in taken]
    if clashes:
        auto = f"{rg.name}_"
        warn_prefix(rg.name, clashes, auto)
        pending = [(src, f"{auto}{name}" if name in taken else name) for src, name in pending]
    for src, name in pending:
        if name in taken:
            raise InvalidArgumentError(
                f"column '{name}' from '{rg.name}' clashes with a selected column even after "
                "prefixing. Pass a distinct prefix= to join() or select fewer features."
            )
        taken.add(name)
        columns.append(OutColumn(name, jp.right, src, rg.get_feature(src)))


def warn_prefix(fg_name: str, columns: list[str], prefix: str) -> None:
    """Hopsworks logs a warning when it prefixes clashing columns automatically."""
    warnings.warn(
        f"columns {columns} of feature group '{fg_name}' clash with columns already selected; "
        f"they are prefixed with '{prefix}'. Pass prefix= to join() to choose the names.",
        UserWarning,
        stacklevel=4,
    )


def event_time_of(group: GroupSpec) -> str:
    """``group``'s event-time column, for the parts of a plan only point-in-time joins reach."""
    if group.event_time is None:  # pragma: no cover - callers check pit first
        raise ValueError(f"{group.owner} has no event_time")
    return group.event_time


def is_epoch_ms(group: GroupSpec) -> bool:
    """Whether ``group``'s event time is epoch milliseconds (a bigint column, as Hopsworks
    allows)."""
    return group.get_feature(event_time_of(group)).type in ("int64", "bigint")


def lookback_in_unit(jp: JoinPlan) -> int:
    """The join's lookback in the unit its event times are compared in: milliseconds when both
    sides are epoch milliseconds, else microseconds (both sides as timestamps)."""
    seconds = jp.join.lookback.total_seconds()
    if is_epoch_ms(jp.left.group) and is_epoch_ms(jp.right.group):
        return int(seconds * 1000)
    return int(seconds * 1_000_000)
