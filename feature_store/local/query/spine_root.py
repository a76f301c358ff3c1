"""A spine as the root of a frozen query: the view's joins, anchored on rows the caller supplies.

``fv.get_batch_data(spine=...)`` and the training-data calls with ``spine=`` read the view's
query with its root group replaced by the spine (Hopsworks: "the spine overwrites the left side
of the feature join"). The joins, their keys and the point-in-time rule stay the ones the
compiler (:mod:`feature_store.local.query.pit`) already has: each spine row is a label row, and
every joined group contributes its latest row at or before the spine row's event time.

:func:`with_root` checks, before anything runs, that the spine can stand where the root stood:
it has every column the query selects from the root and every join key, the root's primary key
and event time under the same names, keys of the joined groups' kinds, and an event time where a
point-in-time join needs one. :func:`spine_record` / :func:`spine_group_spec` are how a
training-dataset version records the spine it was built from and finds its rows again.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from feature_store.local.query.query_spec import (
    Column,
    Conjunction,
    FilterSpec,
    GroupSpec,
    QuerySpec,
)
from fstrain.kernel.errors import NotFoundError, SchemaMismatchError


def with_root(query: QuerySpec, spine: GroupSpec) -> QuerySpec:
    """``query`` (frozen, unresolved) with its root group replaced by ``spine``; filters on the
    old root are read on the spine's columns of the same names."""
    root = query.group
    owner = f"spine '{spine.name}' v{spine.version}"
    names = [c.name for c in spine.columns]
    keys = list(root.primary_key) + ([root.event_time] if root.event_time else [])
    needed = dict.fromkeys([*query.features, *keys,
                            *(k for j in query.joins for k in j.left_on)])
    for column in needed:
        if column not in names:
            raise SchemaMismatchError(
                f"{owner}: column '{column}' is missing (the query reads it from its root "
                f"{root.owner}; the spine has {names}). Add the column to the spine dataframe."
            )
    for key in root.primary_key:
        if key not in spine.primary_key:
            raise SchemaMismatchError(
                f"{owner}: '{key}' must be a primary-key column of the spine, as it is of "
                f"{root.owner} whose place the spine takes (spine primary key: "
                f"{list(spine.primary_key)}). Create the spine group with primary_key="
                f"{list(root.primary_key)}."
            )
    if root.event_time and spine.event_time != root.event_time:
        raise SchemaMismatchError(
            f"{owner}: its event_time must be '{root.event_time}', as of {root.owner} whose "
            f"place it takes (point-in-time joins read each row's features as of that time). "
            f"Got {spine.event_time!r} instead."
        )
    for join in query.joins:
        right = join.query.group
        for lk, rk in zip(join.left_on, join.right_on, strict=True):
            _check_key(owner, spine.get_feature(lk), right, right.get_feature(rk))
    return dataclasses.replace(query, group=spine, filter=retarget(
        query.filter, (root.name, root.version), (spine.name, spine.version)))


def _family(type_name: str) -> str:
    t = type_name.lower()
    if t.startswith(("int", "uint", "bigint", "double", "float", "decimal")):
        return "number"
    if t.startswith(("string", "large_string", "varchar")):
        return "string"
    return t.split("[", 1)[0]


def _check_key(owner: str, column: Column, right: GroupSpec, right_column: Column) -> None:
    if _family(column.type) != _family(right_column.type):
        raise SchemaMismatchError(
            f"{owner}: join key '{column.name}' is {column.type} but {right.owner}'s "
            f"'{right_column.name}' is {right_column.type}; no row would ever match. Give the "
            "spine column the feature group's type."
        )


def retarget(f: FilterSpec | None, old: tuple[str, int], new: tuple[str, int]
             ) -> FilterSpec | None:
    """A filter with the conditions on group ``old`` (name, version: the replaced root) read
    on group ``new`` (the spine), by column name."""
    if f is None:
        return None
    if isinstance(f, Conjunction):
        return Conjunction(f.op, retarget(f.left, old, new) or f.left,
                           retarget(f.right, old, new) or f.right)
    if f.group == old:
        return dataclasses.replace(f, group=new)
    return f


def spine_record(spine: GroupSpec, sha256: str, rows: int) -> dict[str, Any]:
    """What a training-dataset version records of the spine it was built from."""
    return {
        "name": spine.name, "version": spine.version,
        "primary_key": list(spine.primary_key), "event_time": spine.event_time,
        "columns": [{"name": c.name, "type": c.type} for c in spine.columns],
        "sha256": sha256, "rows": int(rows),
    }


def spine_group_spec(record: dict[str, Any], table_path: Path) -> GroupSpec:
    """The spine of a recorded version (:func:`spine_record`), read from ``table_path``;
    a table that is gone is a :class:`NotFoundError` naming the spine and its hash."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(table_path)):
        raise NotFoundError(
            f"spine '{record['name']}' v{record['version']} (sha256 {record['sha256']}) that "
            f"this training dataset was built from is missing from {table_path}. Restore the "
            "store's spines/ folder from a backup, or create a new version."
        )
    pk, et = tuple(record["primary_key"]), record["event_time"]
    columns = tuple(Column(c["name"], c["type"], primary=c["name"] in pk,
                           event_time=c["name"] == et) for c in record["columns"])
    return GroupSpec(record["name"], int(record["version"]), pk, et, (), columns,
                     str(table_path))


