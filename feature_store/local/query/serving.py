"""Feature vectors of a feature view, read from the latest committed row per primary key.

What a cluster's online store answers for ``FeatureView.get_feature_vector(s)``: per feature
group of the view's query, the current row of the serving key. Locally the current row is read
straight from the group's Delta table at its latest commit — the row of that primary key with
the latest event time (a group without an event time holds one row per key) — by DuckDB, with
the requested keys registered as a small Arrow table and joined to the scan: one filtered scan
per group and request, never a point-in-time join.

Keys of a joined group come from the request when it names them (the joined group's key, with
the join's prefix), else from the row its left side returned (``left_on``), as the SDK's
serving keys do. Query filters are not applied, as the SDK's online lookups by primary key do
not apply them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.local.query.query_plan import JoinPlan, Node, plan
from fstrain.kernel.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import pyarrow as pa

    from feature_store.local.query.query_spec import GroupSpec, QuerySpec

Row = dict[str, Any]


@dataclass(frozen=True)
class Lookup:
    """One request's answer: the values of the columns whose group had a row, and the names of
    the columns whose group had none."""

    values: Row
    missing: frozenset[str]


def serving_keys(spec: QuerySpec) -> tuple[list[str], list[str]]:
    """``(required, valid)`` serving-key names of a query: the root's primary key, and every
    name a request may use (the root's key and each joined group's key, with its join prefix)."""
    p = plan(spec)
    valid = list(p.root.group.primary_key)
    for jp in p.joins:
        valid += [k for k in _right_key_names(jp) if k not in valid]
    return list(p.root.group.primary_key), valid


def _right_key_names(jp: JoinPlan) -> list[str]:
    prefix = jp.join.prefix or ""
    return [f"{prefix}{k}" for k in jp.join.right_on]


def lookup(spec: QuerySpec, entries: list[Row], owner: str) -> list[Lookup]:
    """The vector values of each request in ``entries`` (serving keys checked by the caller)."""
    from feature_store.local.storage import engine

    p = plan(spec)
    con = engine.connect()
    try:
        root_keys = list(p.root.group.primary_key)
        rows = {p.root.alias: _fetch(con, p.root, root_keys,
                                     [tuple(e[k] for k in root_keys) for e in entries], owner)}
        for jp in p.joins:
            keys = [_join_key(jp, entry, left) for entry, left in zip(entries, rows[jp.left.alias], strict=True)]
            rows[jp.right.alias] = _fetch(con, jp.right, list(jp.join.right_on), keys, owner)
    finally:
        con.close()
    out = []
    for i in range(len(entries)):
        values: Row = {}
        missing = set()
        for col in p.columns:
            row = rows[col.node.alias][i]
            if row is None:
                missing.add(col.name)
            else:
                values[col.name] = row[col.source]
        out.append(Lookup(values, frozenset(missing)))
    return out


def _join_key(jp: JoinPlan, entry: Row, left: Row | None) -> tuple[Any, ...] | None:
    """The joined group's key for one request: named in the request, else the left row's."""
    key = []
    for left_col, name in zip(jp.join.left_on, _right_key_names(jp), strict=True):
        if entry.get(name) is not None:
            key.append(entry[name])
        elif left is not None and left.get(left_col) is not None:
            key.append(left[left_col])
        else:
            return None
    return tuple(key)


def _fetch(con: duckdb.DuckDBPyConnection, node: Node, keys: list[str],
           values: list[tuple[Any, ...] | None], owner: str) -> list[Row | None]:
    """Per key tuple of ``values`` (``None``: no lookup), the group's current row, or ``None``."""
    wanted = sorted({v for v in values if v is not None}, key=repr)
    if not wanted:
        return [None] * len(values)
    found = _current_rows(con, node.group, node.commit, keys, wanted, owner)
    return [None if v is None else found.get(v) for v in values]


def _current_rows(con: duckdb.DuckDBPyConnection, group: GroupSpec, commit: int,
                  keys: list[str], wanted: list[tuple[Any, ...]], owner: str) -> dict[tuple[Any, ...], Row]:
    """The rows of ``group`` at ``commit`` whose ``keys`` are in ``wanted``: per key, the one
    with the latest event time (ties: the smallest remaining upsert-key values)."""
    from feature_store.local.storage import engine
    from feature_store.local.storage.delta_table import DeltaFeatureTable

    table = DeltaFeatureTable(Path(group.table_path), group.owner)
    schema = table.schema(commit)
    name = engine.unique_name("__serving_keys_")
    con.register(name, _key_table(schema, keys, wanted, owner))
    try:
        q = engine.quote_ident
        on = " AND ".join(f"s.{q(k)} = w.{q(k)}" for k in keys)
        order = [f"s.{q(group.event_time)} DESC NULLS LAST"] if group.event_time else []
        order += [f"s.{q(k)}" for k in group.upsert_key if k not in keys and k != group.event_time]
        partition = ", ".join(f"s.{q(k)}" for k in keys)
        sql = (f"SELECT s.* FROM {engine.scan(con, table, commit)} s JOIN {name} w ON {on} "
               f"QUALIFY row_number() OVER (PARTITION BY {partition}"
               f"{' ORDER BY ' + ', '.join(order) if order else ''}) = 1")
        result = con.sql(sql).to_arrow_table()
    finally:
        con.unregister(name)
    return {tuple(r[k] for k in keys): r for r in result.to_pylist()}


def _key_table(schema: pa.Schema, keys: list[str], wanted: list[tuple[Any, ...]],
               owner: str) -> pa.Table:
    """The requested keys as an Arrow table typed as the group's key columns."""
    import pyarrow as pa

    columns = {}
    for i, key in enumerate(keys):
        field = schema.field(key)
        values = [w[i] for w in wanted]
        try:
            columns[key] = pa.array(values, type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
            bad = next((v for v in values if not _fits(v, field.type)), values[0])
            raise InvalidArgumentError(
                f"{owner}: serving key '{key}' holds {field.type} values. Got {bad!r} "
                f"({type(bad).__name__}) instead."
            ) from exc
    return pa.table(columns)


def _fits(value: Any, arrow_type: pa.DataType) -> bool:
    import pyarrow as pa

    try:
        pa.array([value], type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return False
    return True
