"""A query frozen into values: what the SQL compiler reads, and nothing live.

:class:`QuerySpec` is what a :class:`~feature_store.local.objects.query.Query` becomes before it is
compiled: each feature group as a :class:`GroupSpec` (its name, version, keys, columns and table
location), the features selected from it, its joins and time travel, the filter as
:class:`Condition`/:class:`Conjunction` values, and — once :meth:`QuerySpec.resolved` — the
commit every group is read at. A spec holds no feature group, feature store or view, so the
compiler (:mod:`feature_store.local.query.pit`) depends only on these values, and a training dataset
can be re-read from its stored query without the objects that made it.

Commit resolution (a pinned commit, else the sub-query's ``as_of(commit_id=...)`` on its own
root, else the nearest enclosing ``as_of(wallclock_time)``, else the latest) reads the Delta
logs, which it imports when called.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from feature_store.feature import Feature, Filter, FilterLike, Logic
from fstrain.kernel.errors import InvalidArgumentError, NotFoundError, did_you_mean
from fstrain.kernel.timeutil import required_utc, to_utc

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.local.storage.delta_table import DeltaFeatureTable


@dataclass(frozen=True)
class Column:
    """One column of a feature group, as its catalog records it."""

    name: str
    type: str
    description: str = ""
    primary: bool = False
    partition: bool = False
    event_time: bool = False

    @classmethod
    def of(cls, feature: Feature) -> Column:
        """The column a :class:`~feature_store.feature.Feature` describes."""
        return cls(feature.name, str(feature.type), feature.description, feature.primary,
                   feature.partition, feature.event_time)


@dataclass(frozen=True)
class GroupSpec:
    """A feature group version as values: identity, keys, columns, and where its table is."""

    name: str
    version: int
    primary_key: tuple[str, ...]
    event_time: str | None
    partition_key: tuple[str, ...]
    columns: tuple[Column, ...]
    table_path: str
    #: the column saying when a row became known (an fstrain extension); None: its commit time
    ingestion_time: str | None = None

    @property
    def key(self) -> str:
        """``name:version``: how pins and training datasets name the group."""
        return f"{self.name}:{self.version}"

    @property
    def owner(self) -> str:
        """How error messages name the group."""
        return f"feature group '{self.name}' v{self.version}"

    @property
    def upsert_key(self) -> list[str]:
        """Columns that identify a row: primary key + event_time + partition key."""
        key = list(self.primary_key)
        if self.event_time and self.event_time not in key:
            key.append(self.event_time)
        key += [p for p in self.partition_key if p not in key]
        return key

    def get_feature(self, name: str) -> Column:
        """The column called ``name`` (raises with a suggestion if unknown)."""
        for column in self.columns:
            if column.name == name:
                return column
        names = [c.name for c in self.columns]
        raise NotFoundError(
            f"{self.owner} has no feature '{name}' (features: {names}).{did_you_mean(name, names)}"
        )

    @property
    def delta_table(self) -> DeltaFeatureTable:
        """The group's Delta table (imports delta-rs)."""
        from feature_store.local.storage.delta_table import DeltaFeatureTable

        return DeltaFeatureTable(Path(self.table_path), self.owner)


@dataclass(frozen=True)
class TimeTravel:
    """How a query reads its groups: latest, at a time, or its root group at one commit.

    A sub-query's own ``as_of`` applies to its groups; a group whose query sets none reads as
    the nearest enclosing query says.
    """

    wallclock_ms: int | None = None
    commit_id: int | None = None  # pins the query's root group only
    #: an incremental read: only rows changed by commits after this time (epoch ms)
    exclude_until_ms: int | None = None

    def is_set(self) -> bool:
        """Whether the query reads anything but the latest commits."""
        return (self.wallclock_ms is not None or self.commit_id is not None
                or self.exclude_until_ms is not None)


@dataclass(frozen=True)
class Condition:
    """``column <op> value`` of a filter; ``group`` is the column's group (name, version)."""

    name: str
    type: str
    group: tuple[str, int] | None
    op: str
    value: Any

    def conditions(self) -> list[Condition]:
        """The conditions of this filter: itself."""
        return [self]


@dataclass(frozen=True)
class Conjunction:
    """Two filters combined with ``AND`` or ``OR``."""

    op: str
    left: FilterSpec
    right: FilterSpec

    def conditions(self) -> list[Condition]:
        """Every condition of the tree, left to right."""
        return self.left.conditions() + self.right.conditions()


FilterSpec = Condition | Conjunction


@dataclass(frozen=True)
class JoinSpec:
    """One join of a frozen query: the sub-query, its keys and how it joins."""

    query: QuerySpec
    left_on: tuple[str, ...]
    right_on: tuple[str, ...]
    join_type: str
    prefix: str | None
    lookback: Any = None  # a pandas.Timedelta or None
    #: match only row versions known at the label time (:mod:`feature_store.local.as_known`)
    as_known: bool = False


@dataclass(frozen=True)
class QuerySpec:
    """A query as values for the compiler (:mod:`feature_store.local.query.pit`): every group with its
    selected features, joins and time travel; ``filter`` on the outermost only; ``commit`` set
    once :meth:`resolved`."""

    group: GroupSpec
    features: tuple[str, ...]
    joins: tuple[JoinSpec, ...] = ()
    filter: FilterSpec | None = None
    time_travel: TimeTravel = field(default_factory=TimeTravel)
    commit: int | None = None
    #: once resolved, for an incremental read: the commit after which changes are read
    #: (:mod:`feature_store.local.query.incremental`); None reads the whole commit
    since: int | None = None

    def groups(self) -> list[GroupSpec]:
        """Every group of the query, root first, depth first."""
        out = [self.group]
        for j in self.joins:
            out += j.query.groups()
        return out

    def filtered(self, extra: FilterSpec | None) -> QuerySpec:
        """This query with ``extra`` ANDed into its filter."""
        if extra is None:
            return self
        combined = extra if self.filter is None else Conjunction("AND", self.filter, extra)
        return dataclasses.replace(self, filter=combined)

    def known_as_of_labels(self) -> QuerySpec:
        """This query with every join of its root made as-known (a feature view created with
        ``as_known=True``); nested sub-queries' joins are left as they are."""
        return dataclasses.replace(self, joins=tuple(
            dataclasses.replace(j, as_known=True) if j.query.group.event_time else j
            for j in self.joins))

    def resolved(self, pins: dict[str, int] | None = None) -> QuerySpec:
        """This query with the commit of every group set: ``pins[group.key]`` when given, else
        what its time travel says, else the latest."""
        return _resolved(self, [self], dict(pins or {}))

    def commits(self) -> dict[str, int]:
        """``{group key: commit}`` of a resolved query (what a training dataset pins).

        Refuses a query that reads one feature group at two different commits (a pinned
        training dataset records one commit per group).
        """
        out: dict[str, int] = {}
        for node in _nodes(self):
            if node.commit is None:
                raise ValueError("commits() of a query that is not resolved")
            key = node.group.key
            if out.get(key, node.commit) != node.commit:
                raise InvalidArgumentError(
                    f"{node.group.owner} is read at commits {out[key]} and {node.commit} in one "
                    "query (its sub-queries use different as_of). Read it at one commit."
                )
            out[key] = node.commit
        return out


def _nodes(spec: QuerySpec) -> list[QuerySpec]:
    out = [spec]
    for j in spec.joins:
        out += _nodes(j.query)
    return out


def _resolved(node: QuerySpec, chain: list[QuerySpec], pins: dict[str, int]) -> QuerySpec:
    joins = tuple(dataclasses.replace(j, query=_resolved(j.query, [*chain, j.query], pins))
                  for j in node.joins)
    commit = _commit_for(node.group, chain, pins)
    return dataclasses.replace(node, joins=joins, commit=commit,
                               since=_since_for(node.group, chain, commit))


def _commit_for(group: GroupSpec, chain: list[QuerySpec], pins: dict[str, int]) -> int:
    """The commit ``group`` is read at; ``chain`` lists the queries from the top down to the
    sub-query whose root ``group`` is."""
    if group.key in pins:
        return pins[group.key]
    owner = chain[-1]
    if owner.time_travel.commit_id is not None:
        return _existing_commit(group, owner.time_travel.commit_id)
    for query in reversed(chain):
        if query.time_travel.wallclock_ms is not None:
            return _version_at(group, query.time_travel.wallclock_ms, "wallclock_time")
        if query.time_travel.exclude_until_ms is not None:
            break  # as_of(None, exclude_until=...): changes up to the latest commit
    return group.delta_table.version()


def _since_for(group: GroupSpec, chain: list[QuerySpec], commit: int) -> int | None:
    """For an incremental read (the nearest ``as_of`` with ``exclude_until``), the latest commit
    at or before ``exclude_until``; a time before the group's first commit is refused."""
    for query in reversed(chain):
        travel = query.time_travel
        if travel.exclude_until_ms is None and travel.wallclock_ms is None:
            continue
        if travel.exclude_until_ms is None:
            return None
        return min(_version_at(group, travel.exclude_until_ms, "exclude_until"), commit)
    return None


def _version_at(group: GroupSpec, ms: int, what: str) -> int:
    """The latest commit of ``group`` at or before ``ms``; a time before its first commit (the
    table did not exist then) is refused naming the group, the argument and the time."""
    try:
        return group.delta_table.version_at(ms)
    except InvalidArgumentError:
        raise InvalidArgumentError(
            f"as_of on {group.owner}: {what}={_iso(ms)} is before the group's first commit (the "
            "table did not exist then). Pick a time at or after its first commit (see "
            "commit_details())."
        ) from None


def _iso(ms: int) -> str:
    import pandas as pd

    return pd.Timestamp(ms, unit="ms", tz="UTC").isoformat()


def _existing_commit(group: GroupSpec, commit_id: int) -> int:
    """``commit_id`` if ``group`` has it, else a NotFoundError listing the commits it has."""
    table = group.delta_table
    latest = table.version()
    if commit_id > latest:
        commits = sorted(c.commit_id for c in table.history())
        raise NotFoundError(
            f"{group.owner} has no commit {commit_id} (commits: {commits}; latest {latest})."
        )
    return commit_id


# -- filters as values --------------------------------------------------------------------------


@overload
def freeze_filter(f: FilterLike) -> FilterSpec: ...


@overload
def freeze_filter(f: None) -> None: ...


def freeze_filter(f: FilterLike | None) -> FilterSpec | None:
    """A filter built from features (``fg.amount > 100``, ``&``, ``|``) as values."""
    if f is None:
        return None
    if isinstance(f, Logic):
        return Conjunction(f.op, freeze_filter(f.left), freeze_filter(f.right))
    if not isinstance(f, Filter):
        raise InvalidArgumentError(
            f"filter must be built from features (e.g. fg.amount > 100). Got {f!r} instead."
        )
    fg = f.feature.feature_group
    group = None if fg is None else (fg.name, int(fg.version))
    return Condition(f.feature.name, str(f.feature.type), group, f.op, f.value)


def filter_to_dict(f: FilterSpec) -> dict[str, Any]:
    """The stored (JSON-able) form of a filter."""
    if isinstance(f, Conjunction):
        return {"logic": f.op, "left": filter_to_dict(f.left), "right": filter_to_dict(f.right)}
    return {
        "feature": f.name,
        "feature_group": None if f.group is None else {"name": f.group[0], "version": f.group[1]},
        "op": f.op,
        "value": value_to_json(f.value),
    }


def filter_from_dict(data: dict[str, Any], query: QuerySpec) -> FilterSpec:
    """A stored filter (:func:`filter_to_dict`) over the groups of ``query``."""
    if "logic" in data:
        return Conjunction(data["logic"], filter_from_dict(data["left"], query),
                           filter_from_dict(data["right"], query))
    ref = data["feature_group"]
    if ref is None:
        raise NotFoundError(f"stored filter on '{data['feature']}' has no feature group.")
    group = next((g for g in query.groups()
                  if g.name == ref["name"] and g.version == int(ref["version"])), None)
    if group is None:
        raise InvalidArgumentError(
            f"filter on feature '{data['feature']}' refers to a feature group that is not in "
            "the query."
        )
    column = group.get_feature(data["feature"])
    return Condition(column.name, column.type, (group.name, group.version), data["op"],
                     value_from_json(data["value"]))


def value_to_json(value: Any) -> Any:
    """A filter value as JSON (timestamps tagged, numpy scalars as Python values)."""

    import pandas as pd

    if isinstance(value, list | tuple):
        return [value_to_json(v) for v in value]
    if isinstance(value, dt.datetime | pd.Timestamp):
        return {"__timestamp__": required_utc(value).isoformat()}
    if hasattr(value, "item"):
        return value.item()
    return value


def value_from_json(value: Any) -> Any:
    """The inverse of :func:`value_to_json`."""
    if isinstance(value, list):
        return [value_from_json(v) for v in value]
    if isinstance(value, dict) and "__timestamp__" in value:
        return to_utc(value["__timestamp__"])
    return value
