"""Queries over local feature groups (mirrors ``hsfs.constructor.query.Query``).

A query selects features from a root feature group and joins other groups to it. ``join`` and
``filter`` mutate the query and return it, as in Hopsworks. Every query compiles to one DuckDB
SQL statement (see :mod:`feature_store.local.query.pit` — the only place where joins are written);
point-in-time-joined groups' columns are fetched by row after it runs.

Join keys: ``on``, else ``left_on``/``right_on``, else — Hopsworks' rule — the primary-key names
both groups share (all of them); groups sharing none are refused with the keys to pass, as the
Hopsworks server refuses them (HTTP 400, errorCode 270096), so a view that runs here runs there.
In a chain ``a.join(b).join(c)`` both joins use ``a`` as their left side; a nested sub-query
joins against its own root.
"""

from __future__ import annotations

import dataclasses
import numbers
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from feature_store.feature import Feature, Filter, FilterLike, Logic
from feature_store.local.objects.sdk_conventions import convert_result
from feature_store.local.query.query_plan import plan
from feature_store.local.query.query_spec import (
    Column,
    GroupSpec,
    JoinSpec,
    QuerySpec,
    TimeTravel,
    filter_to_dict,
    freeze_filter,
    value_from_json,
)
from feature_store.local.storage.options import check_options
from feature_store.local.storage.storage_errors import storage_boundary
from fstrain.kernel.errors import InvalidArgumentError, NotFoundError, did_you_mean
from fstrain.kernel.timeutil import to_utc
from fstrain.kernel.window import scheduler_bounds

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa

    from feature_store.local.objects.hosts import QueryGroup, StoreHost

JOIN_TYPES = ("left", "inner", "right", "outer", "full")


@dataclass
class Join:
    """One join of a sub-query onto the query it belongs to."""

    query: Query
    left_on: list[str]
    right_on: list[str]
    join_type: str
    prefix: str | None
    lookback: Any = None  # a pandas.Timedelta or None
    as_known: bool = False


def fg_key(fg: QueryGroup) -> str:
    """The key identifying a feature group version inside a query (``name:version``)."""
    return f"{fg.name}:{fg.version}"


class Query:
    """Features selected from a root feature group, with joins and filters."""

    def __init__(
        self, left_feature_group: QueryGroup, left_features: list[str], *,
        joins: list[Join] | None = None, where: FilterLike | None = None,
        time_travel: TimeTravel | None = None, limit: int | None = None,
    ) -> None:
        """A query of ``left_features`` of ``left_feature_group``; the keyword arguments
        rebuild a saved or copied query (users compose with ``join``/``filter``/``as_of``)."""
        self._left_feature_group = left_feature_group
        self._left_features = list(left_features)
        self._joins: list[Join] = list(joins or [])
        self._filter: FilterLike | None = where
        self._time_travel = time_travel or TimeTravel()
        self._limit: int | None = limit

    def __repr__(self) -> str:
        fgs = ", ".join(fg_key(fg) for fg in self.feature_groups())
        return f"Query(root={fg_key(self._left_feature_group)}, feature_groups=[{fgs}])"

    # -- composition -------------------------------------------------------------------------

    @property
    def left_feature_group(self) -> QueryGroup:
        return self._left_feature_group

    @property
    def left_features(self) -> list[str]:
        """The features selected from the root group."""
        return list(self._left_features)

    @property
    def joins(self) -> list[Join]:
        return list(self._joins)

    @property
    def time_travel(self) -> TimeTravel:
        """The wallclock time or commit this query's root group is read at (unset: latest)."""
        return self._time_travel

    def feature_groups(self) -> list[QueryGroup]:
        """Every feature group of the query, root first, depth first."""
        out = [self._left_feature_group]
        for j in self._joins:
            out += j.query.feature_groups()
        return out

    def join(
        self,
        sub_query: Query,
        on: list[str] | None = None,
        left_on: list[str] | None = None,
        right_on: list[str] | None = None,
        join_type: str = "left",
        prefix: str | None = None,
        lookback: Any = None,
        as_known: bool = False,
    ) -> Query:
        """Join ``sub_query`` onto this query's root; mutates and returns ``self``.

        ``lookback`` (a ``pandas.Timedelta``, ``datetime.timedelta`` or string such as
        ``"7D"``) bounds a point-in-time join: right rows older than
        ``root.event_time - lookback`` do not match. ``as_known=True`` (an fstrain extension)
        also requires the matched row to have been known at the root row's event time:
        committed by then, with the value it had then (see docs/concepts/joins.md, "As-known joins").
        """
        if not isinstance(sub_query, Query):
            raise InvalidArgumentError(
                f"join() takes a Query (e.g. fg.select_all()). Got {type(sub_query).__name__} instead."
            )
        jt = str(join_type).lower()
        if jt not in JOIN_TYPES:
            raise InvalidArgumentError(
                f"join_type must be one of {JOIN_TYPES}. Got {join_type!r} instead."
            )
        left_fg, right_fg = self._left_feature_group, sub_query.left_feature_group
        if getattr(right_fg, "spine", False):
            raise InvalidArgumentError(
                f"join of {right_fg.owner} onto '{left_fg.name}': a spine can only be the left "
                "side (the root) of a join, as in Hopsworks: its rows are the ones features are "
                "fetched for. Start the query from the spine: spine.select_all().join(...)."
            )
        left_names = [f.name for f in left_fg.features]
        right_names = [f.name for f in right_fg.features]
        if on is not None:
            left_keys = right_keys = [on] if isinstance(on, str) else list(on)
        elif left_on is not None or right_on is not None:
            left_keys = [left_on] if isinstance(left_on, str) else list(left_on or [])
            right_keys = [right_on] if isinstance(right_on, str) else list(right_on or [])
            if len(left_keys) != len(right_keys) or not left_keys:
                raise InvalidArgumentError(
                    f"join of '{right_fg.name}' onto '{left_fg.name}': left_on and right_on must "
                    f"have the same, non-zero length. Got {left_keys} and {right_keys} instead."
                )
        else:
            left_keys = right_keys = _shared_primary_key(left_fg, right_fg, left_names)
        for k in left_keys:
            if k not in left_names:
                raise InvalidArgumentError(
                    f"join key '{k}' is not a feature of '{left_fg.name}' (features: "
                    f"{left_names}).{did_you_mean(k, left_names)}"
                )
        for k in right_keys:
            if k not in right_names:
                raise InvalidArgumentError(
                    f"join key '{k}' is not a feature of '{right_fg.name}' (features: "
                    f"{right_names}).{did_you_mean(k, right_names)}"
                )
        _check_prefix(prefix, right_fg.name)
        _check_key_types(left_fg, right_fg, left_keys, right_keys)
        _check_as_known(as_known, left_fg, right_fg)
        self._joins.append(
            Join(sub_query, left_keys, right_keys, "outer" if jt == "full" else jt, prefix,
                 _lookback(lookback), bool(as_known))
        )
        return self

    def filter(self, f: FilterLike) -> Query:
        """AND a filter into the query; mutates and returns ``self``."""
        if not isinstance(f, Filter | Logic):
            raise InvalidArgumentError(
                f"filter() takes feature expressions such as fg.amount > 100. Got {f!r} instead."
            )
        self._filter = f if self._filter is None else (self._filter & f)
        return self

    def as_of(
        self, wallclock_time: Any = None, exclude_until: Any = None, *, commit_id: int | None = None
    ) -> Query:
        """Read every feature group of the query as it was at ``wallclock_time`` (time travel).

        ``commit_id`` pins the root feature group to one commit instead. ``exclude_until``
        makes the read incremental, as in the Hopsworks SDK: only rows changed by commits after
        ``exclude_until`` (exclusive) and at or before ``wallclock_time`` (inclusive; ``None``:
        the latest commit). fstrain returns, per group, the rows of the ``wallclock_time``
        commit that are not rows of the commit current at ``exclude_until`` (compared by whole
        row): keys inserted in the window and keys whose values changed in it, each once with
        its value at ``wallclock_time``. Deleted keys are not returned (the SDK's incremental
        read keeps only inserts and update post-images); a key changed and changed back within
        the window is not returned. In a join every group is read over the window, as the SDK
        applies the interval to all joined groups. ``exclude_until`` after ``wallclock_time``,
        or before a group's first commit, is refused.
        """
        if commit_id is not None:
            if exclude_until is not None:
                raise InvalidArgumentError(
                    f"as_of on {self._left_feature_group.owner}: exclude_until reads changes "
                    "between two times; it does not combine with commit_id. Pass "
                    "wallclock_time instead."
                )
            if isinstance(commit_id, bool) or not isinstance(commit_id, int) or commit_id < 0:
                raise InvalidArgumentError(
                    f"as_of on {self._left_feature_group.owner}: commit_id must be a commit id "
                    f"(a non-negative int from commit_details()). Got {commit_id!r} instead."
                )
            self._time_travel = TimeTravel(commit_id=int(commit_id))
            return self
        if wallclock_time is None and exclude_until is None:
            raise InvalidArgumentError("as_of() needs wallclock_time or commit_id.")
        self._time_travel = _window(self._left_feature_group.owner, wallclock_time,
                                    exclude_until)
        for j in self._joins:  # every sub-query, recursively
            j.query.as_of(wallclock_time, exclude_until)
        return self

    def known_as_of_labels(self) -> Query:
        """A copy of this query with every point-in-time join of its root made as-known (what a
        feature view created with ``as_known=True`` reads); plain joins (a side without an
        event time) and nested sub-queries' own joins are left as they are."""
        root_timed = bool(self._left_feature_group.event_time)
        joins = [dataclasses.replace(j, as_known=True)
                 if root_timed and j.query.left_feature_group.event_time else j
                 for j in self._joins]
        return Query(self._left_feature_group, self._left_features, joins=joins,
                     where=self._filter, time_travel=self._time_travel, limit=self._limit)

    def is_incremental(self) -> bool:
        """Whether this query or a sub-query reads incrementally (``as_of(exclude_until=...)``)."""
        return (self._time_travel.exclude_until_ms is not None
                or any(j.query.is_incremental() for j in self._joins))

    def resolve_commits(self) -> dict[str, int]:
        """The commit each feature group would be read at now (used to pin training data).

        Refuses a query that reads one feature group at two different commits (a pinned
        training dataset records one commit per group).
        """
        return self.spec().commits()

    def frozen(self) -> QuerySpec:
        """This query as values (:class:`~feature_store.local.query.query_spec.QuerySpec`): every
        group with its selected features, joins and time travel, commits not yet resolved."""
        return self._frozen(self, top=True)

    def _frozen(self, node: Query, *, top: bool) -> QuerySpec:
        joins = tuple(
            JoinSpec(self._frozen(j.query, top=False), tuple(j.left_on), tuple(j.right_on),
                     j.join_type, j.prefix, j.lookback, j.as_known)
            for j in node.joins
        )
        return QuerySpec(_group_spec(node.left_feature_group), tuple(node.left_features), joins,
                         freeze_filter(self._filter) if top else None, node.time_travel)

    def spec(self) -> QuerySpec:
        """This query frozen for compiling: each group's commit resolved now (pins, ``as_of``
        of the query and its sub-queries, else the latest)."""
        return self.frozen().resolved()

    def limit(self, n: int) -> Query:
        """Return at most ``n`` rows; mutates and returns ``self``."""
        self._limit = int(n)
        return self

    # -- output ------------------------------------------------------------------------------

    @property
    def features(self) -> list[Feature]:
        """The output features, named as they appear in the result."""
        groups = {fg_key(fg): fg for fg in self.feature_groups()}
        return [Feature(name=c.name, type=c.column.type, description=c.column.description,
                        primary=c.column.primary, partition=c.column.partition,
                        event_time=c.column.event_time, feature_group=groups[c.node.group.key])
                for c in plan(self.spec()).columns]

    def _compile(self, start_time: Any = None, end_time: Any = None, limit: int | None = None,
                 spec: QuerySpec | None = None):
        from feature_store.local.query.pit import compile_query
        with storage_boundary(self._owner(), "planning"):
            return compile_query(spec or self.spec(), start_time=start_time, end_time=end_time,
                                 limit=limit or self._limit, order_by_root_key=True)

    def _run(self, start_time: Any = None, end_time: Any = None,
             limit: int | None = None) -> pa.Table:
        """Compile and run the query (incrementally where its time travel says so)."""
        from feature_store.local.query import incremental
        from feature_store.local.storage import engine

        with storage_boundary(self._owner(), "planning"):
            spec = self.spec()
        compiled = self._compile(start_time, end_time, limit, spec=spec)
        con = engine.connect()
        try:
            return incremental.fetch(compiled, spec, con)
        finally:
            con.close()

    def _owner(self) -> str:
        """How error messages name this query: its feature groups."""
        names = ", ".join(f"'{fg.name}' v{fg.version}" for fg in self.feature_groups())
        return f"query over feature group(s) {names}"

    def read(
        self,
        online: bool = False,
        dataframe_type: str = "default",
        read_options: dict[str, Any] | None = None,
        start_time: Any = None,
        end_time: Any = None,
    ) -> Any:
        """Run the query. ``start_time``/``end_time`` bound the root event time, ``[start, end)``;
        when both are omitted ``HOPS_START_TIME``/``HOPS_END_TIME`` apply (Hopsworks 5).

        Rows come in the root group's primary-key (+ event time) order, so two identical reads
        return the same rows in the same order (as training data does)."""
        if online:
            raise InvalidArgumentError(
                "read(online=True) needs an online store; the local backend has only the "
                "offline store. Use online=False."
            )
        check_options(self._owner(), "read_options", read_options, {})
        start_time, end_time = scheduler_bounds(start_time, end_time)
        return convert_result(self.to_arrow(start_time, end_time), dataframe_type)

    def to_arrow(self, start_time: Any = None, end_time: Any = None) -> pa.Table:
        """Run the query and return an Arrow table (no pandas conversion)."""
        return self._run(start_time, end_time)

    def show(self, n: int) -> pd.DataFrame:
        """The first ``n`` rows as pandas."""
        return self._run(limit=n).to_pandas()

    def to_string(self, online: bool = False, arrow_flight: bool = False) -> str:
        """The SQL this query runs, as one statement (parameters inlined, scans shown as Delta
        table paths). Execution lets point-in-time-joined groups carry only keys and row ids
        through the joins and takes their columns by row afterwards: same result.
        ``online``/``arrow_flight`` ask for the SQL of engines the local backend has not, and
        are refused."""
        for option, value in (("online", online), ("arrow_flight", arrow_flight)):
            if value:
                raise InvalidArgumentError(
                    f"{self._owner()}: to_string({option}=True) asks for the SQL of an engine "
                    "the local backend has not (it runs DuckDB over the Delta files). Omit it."
                )
        return self._compile().display_sql()

    # -- persistence (feature views store their query) ---------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able description of the query (feature groups by name and version)."""
        return {
            "left_feature_group": {"name": self._left_feature_group.name,
                                   "version": self._left_feature_group.version,
                                   **({"spine": True}
                                      if getattr(self._left_feature_group, "spine", False)
                                      else {})},
            "left_features": list(self._left_features),
            "joins": [
                {
                    "query": j.query.to_dict(),
                    "left_on": j.left_on,
                    "right_on": j.right_on,
                    "join_type": j.join_type,
                    "prefix": j.prefix,
                    "lookback_s": None if j.lookback is None else j.lookback.total_seconds(),
                    **({"as_known": True} if j.as_known else {}),
                }
                for j in self._joins
            ],
            "filter": None if self._filter is None else filter_to_dict(freeze_filter(self._filter)),
            **({"as_of": {"wallclock_ms": self._time_travel.wallclock_ms,
                          "commit_id": self._time_travel.commit_id,
                          **({"exclude_until_ms": self._time_travel.exclude_until_ms}
                             if self._time_travel.exclude_until_ms is not None else {})}}
               if self._time_travel.is_set() else {}),
        }

    @classmethod
    def from_dict(cls, store: StoreHost, data: dict[str, Any]) -> Query:
        """Rebuild a query saved with :meth:`to_dict` against ``store``."""
        import pandas as pd

        ref = data["left_feature_group"]
        fg = (store.spine_group_of(ref["name"], ref["version"]) if ref.get("spine")
              else store.get_feature_group(ref["name"], ref["version"]))
        joins = []
        for j in data["joins"]:
            sub = cls.from_dict(store, j["query"])
            lookback = None if j["lookback_s"] is None else pd.Timedelta(seconds=j["lookback_s"])
            joins.append(Join(sub, j["left_on"], j["right_on"], j["join_type"], j["prefix"],
                              lookback, bool(j.get("as_known", False))))
        where = None if data.get("filter") is None else _filter_from_dict(store, data["filter"])
        time_travel = TimeTravel(**data["as_of"]) if data.get("as_of") else None
        return cls(fg, data["left_features"], joins=joins, where=where, time_travel=time_travel)


def _check_prefix(prefix: Any, right_name: str) -> None:
    """A join prefix must make valid column names (``[a-z_][a-z0-9_]*``)."""

    if prefix is None:
        return
    if not isinstance(prefix, str) or not re.match(r"^[a-z_][a-z0-9_]{0,40}$", prefix):
        raise InvalidArgumentError(
            f"join of '{right_name}': prefix must be lower case letters, digits and '_', "
            f"starting with a letter or '_' (e.g. 'card_'). Got {prefix!r} instead."
        )


def _key_family(type_name: str) -> str:
    t = type_name.lower()
    if t.startswith(("int", "uint", "bigint")) or t in ("double", "float") or t.startswith("decimal"):
        return "number"
    if t.startswith(("string", "large_string", "varchar")):
        return "string"
    if t.startswith("timestamp"):
        return "timestamp"
    return t


def _check_key_types(left: QueryGroup, right: QueryGroup, left_keys: list[str],
                     right_keys: list[str]) -> None:
    """Refuse joining keys of different kinds (an int key never equals a string key)."""
    for lk, rk in zip(left_keys, right_keys, strict=True):
        lt, rt = left.get_feature(lk).type, right.get_feature(rk).type
        if _key_family(str(lt)) != _key_family(str(rt)):
            raise InvalidArgumentError(
                f"join of '{right.name}' onto '{left.name}': key '{lk}' is {lt} but "
                f"'{right.name}.{rk}' is {rt}; no row would ever match. Store the keys with the "
                "same type."
            )


def _check_as_known(value: Any, left: QueryGroup, right: QueryGroup) -> None:
    """``as_known`` is a bool, and needs an event time on both groups."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(
            f"join of '{right.name}' onto '{left.name}': as_known must be True or False. "
            f"Got {value!r} instead."
        )
    if value and not (left.event_time and right.event_time):
        missing = left.name if not left.event_time else right.name
        raise InvalidArgumentError(
            f"join of '{right.name}' onto '{left.name}': as_known=True needs an event_time on "
            f"both groups, and '{missing}' has none (a row is matched only if it was known at "
            "the label's event time). Drop as_known or join a group with an event_time."
        )


def _lookback(value: Any) -> Any:
    if value is None:
        return None

    import pandas as pd

    if isinstance(value, numbers.Number):
        raise InvalidArgumentError(
            f"lookback={value!r} has no unit. Pass a duration: a string such as '7D' or "
            "'12h', a datetime.timedelta or a pandas.Timedelta."
        )
    try:
        delta = pd.Timedelta(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"lookback must be a duration such as '7D' or a timedelta. Got {value!r} instead."
        ) from exc
    if delta <= pd.Timedelta(0):
        raise InvalidArgumentError(f"lookback must be positive. Got {value!r} instead.")
    return delta


def _filter_from_dict(store: StoreHost, data: dict[str, Any]) -> FilterLike:
    if "logic" in data:
        return Logic(data["logic"], _filter_from_dict(store, data["left"]),
                     _filter_from_dict(store, data["right"]))
    ref = data["feature_group"]
    if ref is None:
        raise NotFoundError(f"stored filter on '{data['feature']}' has no feature group.")
    fg = store.get_feature_group(ref["name"], ref["version"])
    return Filter(fg.get_feature(data["feature"]), data["op"], value_from_json(data["value"]))


def _window(owner: str, wallclock_time: Any, exclude_until: Any) -> TimeTravel:
    """The time travel of ``as_of(wallclock_time, exclude_until)``, checked: ``exclude_until``
    must not be after ``wallclock_time``."""
    end = None if wallclock_time is None else to_utc(wallclock_time, what="wallclock_time")
    start = None if exclude_until is None else to_utc(exclude_until, what="exclude_until")
    if start is not None and end is not None and start > end:
        raise InvalidArgumentError(
            f"as_of on {owner}: exclude_until must not be after wallclock_time (changes are "
            f"read from exclude_until, exclusive, up to wallclock_time). Got "
            f"exclude_until={start.isoformat()} and wallclock_time={end.isoformat()} instead."
        )
    return TimeTravel(wallclock_ms=None if end is None else _epoch_ms(end),
                      exclude_until_ms=None if start is None else _epoch_ms(start))


def _epoch_ms(ts: Any) -> int:
    """Epoch milliseconds of a timestamp of any unit (years past 2262 included)."""
    import numpy as np

    return int(ts.asm8.astype("datetime64[ms]").astype(np.int64))


def _shared_primary_key(left_fg: Any, right_fg: Any, left_names: list[str]) -> list[str]:
    """Hopsworks' implicit join keys: the primary-key names both groups share, in the right
    group's order. None shared is an error naming both groups and the likely ``on=`` keys."""
    left_pk = set(left_fg.primary_key)
    shared = [k for k in right_fg.primary_key if k in left_pk]
    if shared:
        return shared
    likely = [k for k in right_fg.primary_key if k in left_names] or list(right_fg.primary_key)
    raise InvalidArgumentError(
        f"join of '{right_fg.name}' onto '{left_fg.name}': without on=/left_on=/right_on= the "
        f"join keys are the primary-key names both groups share (Hopsworks' rule), and "
        f"'{left_fg.name}' (primary key {list(left_fg.primary_key)}) and '{right_fg.name}' "
        f"(primary key {list(right_fg.primary_key)}) share none. Name the keys, e.g. "
        f"on={likely!r}, or left_on=[...] and right_on=[...]."
    )


def _group_spec(fg: QueryGroup) -> GroupSpec:
    """A feature group as the values a query spec holds."""
    return GroupSpec(fg.name, fg.version, tuple(fg.primary_key), fg.event_time,
                     tuple(fg.partition_key), tuple(Column.of(f) for f in fg.features),
                     str(fg.table_path), getattr(fg, "ingestion_time", None))
