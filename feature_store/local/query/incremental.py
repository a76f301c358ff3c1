"""Incremental reads: the rows a group's commits changed in a window (``as_of(..., exclude_until=...)``).

A resolved query (:meth:`~feature_store.local.query.query_spec.QuerySpec.resolved`) whose time
travel has ``exclude_until`` carries, per group, the commit current at ``exclude_until``
(``since``) next to the commit it reads (current at ``wallclock_time``, else the latest). Such a
group is scanned as the rows of its ``commit`` that are not rows of its ``since`` commit, compared
by whole row (a multiset difference, ``EXCEPT ALL``): keys inserted in the window, and keys whose
values changed in it, each once with its value at ``wallclock_time``. Deleted keys are not
returned, as the Hopsworks SDK's incremental read keeps only inserts and update post-images.
A column added in the window compares as null in the older commit.

The compiled statement is then run as its single-statement form with these scans in place of the
plain ones (:meth:`~feature_store.local.query.pit.CompiledQuery.bind_sources`), so joins, filters
and ordering are the ones every other read uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from feature_store.local.storage import engine
from feature_store.local.storage.storage_errors import storage_boundary
from fstrain.kernel.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import pyarrow as pa

    from feature_store.local.query.pit import CompiledQuery
    from feature_store.local.query.query_plan import Node
    from feature_store.local.query.query_spec import QuerySpec


def windows(spec: QuerySpec) -> dict[str, int]:
    """``{group key: since commit}`` of the incrementally read groups of a resolved query.

    Refuses a group read over two different windows in one query.
    """
    out: dict[str, int] = {}
    stack = [spec]
    while stack:
        node = stack.pop()
        stack += [j.query for j in node.joins]
        if node.since is None:
            continue
        key = node.group.key
        if out.get(key, node.since) != node.since:
            raise InvalidArgumentError(
                f"{node.group.owner} is read incrementally from commits {out[key]} and "
                f"{node.since} in one query (its sub-queries use different exclude_until). "
                "Read it over one window."
            )
        out[key] = node.since
    return out


def changed_rows(con: duckdb.DuckDBPyConnection, node: Node, since: int) -> str:
    """A SQL table expression: the rows of ``node``'s commit that are not rows of ``since``."""
    table = node.group.delta_table
    schema = table.schema(node.commit)
    before = set(table.schema(since).names)
    now = ", ".join(engine.quote_ident(f.name) for f in schema)
    then = ", ".join(
        engine.quote_ident(f.name) if f.name in before
        else f"CAST(NULL AS {engine.sql_type(f.type)}) AS {engine.quote_ident(f.name)}"
        for f in schema
    )
    return (f"(SELECT {now} FROM {engine.scan(con, table, node.commit)} EXCEPT ALL "
            f"SELECT {then} FROM {engine.scan(con, table, since)})")


def fetch(compiled: CompiledQuery, spec: QuerySpec, con: duckdb.DuckDBPyConnection) -> pa.Table:
    """Run ``compiled`` (compiled from the resolved ``spec``), reading incrementally the groups
    whose time travel has ``exclude_until``; a query without any runs as usual."""
    since = windows(spec)
    if not since:
        return compiled.fetch(con)
    groups = ", ".join(dict.fromkeys(f"'{n.group.name}' v{n.group.version}"
                                     for n in compiled.scans.values()))
    with storage_boundary(f"query over feature group(s) {groups}", "reading"):
        sources = {
            placeholder: (changed_rows(con, node, since[node.group.key])
                          if node.group.key in since
                          else engine.scan(con, node.group.delta_table, node.commit))
            for placeholder, node in compiled.scans.items()
        }
        sql = compiled.bind_sources(sources, single_statement=True)
        return engine.fetch_arrow(con, sql, compiled.params)
