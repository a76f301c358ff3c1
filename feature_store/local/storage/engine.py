"""DuckDB plumbing for the local backend: connections and Delta scans.

Scans read a Delta version's parquet files with ``read_parquet([...], union_by_name=true)`` so
DuckDB knows their sizes (an Arrow dataset reports no row count, which makes DuckDB 2.0 pick a
nested-loop ASOF join — see the stack notes) and can push projections and filters down.
Columns added by schema evolution that no file holds yet are projected as typed NULLs.
"""

from __future__ import annotations

import itertools
import os
import threading
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from feature_store.local.storage.snapshots import snapshot

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

    from feature_store.local.storage.delta_table import DeltaFeatureTable

_counter = itertools.count()


_database: tuple[int, duckdb.DuckDBPyConnection] | None = None
_database_lock = threading.Lock()


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh connection (cursor) to this process's in-memory DuckDB database.

    Opening a database costs ~20 ms and closing one after a large query frees its memory on the
    caller's clock; a cursor on one shared database costs nothing and has its own registered
    tables. The database is configured once (offline, UTC, ASOF never as a nested loop) and
    re-created in a forked child, which must not use its parent's.
    """
    global _database
    with _database_lock:
        if _database is None or _database[0] != os.getpid():
            import duckdb

            database = duckdb.connect(
                config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
            )
            database.execute("SET GLOBAL TimeZone='UTC'")
            # DuckDB switches ASOF joins to a nested loop for tiny estimated inputs; never do that.
            database.execute("SET GLOBAL asof_loop_join_threshold=0")
            _database = (os.getpid(), database)
        return _database[1].cursor()


def unique_name(prefix: str) -> str:
    """A name no other table registered in this process has (``prefix`` + a counter)."""
    return f"{prefix}{next(_counter)}"


def quote_ident(name: str) -> str:
    """Quote an identifier for DuckDB."""
    return '"' + name.replace('"', '""') + '"'


def sql_type(arrow_type: pa.DataType) -> str:
    """DuckDB type for an Arrow type (used for NULL placeholders)."""
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMPTZ" if arrow_type.tz else "TIMESTAMP"
    mapping = {
        pa.int64(): "BIGINT",
        pa.int32(): "INTEGER",
        pa.float64(): "DOUBLE",
        pa.float32(): "FLOAT",
        pa.string(): "VARCHAR",
        pa.bool_(): "BOOLEAN",
        pa.date32(): "DATE",
    }
    return mapping.get(arrow_type, "VARCHAR")


def _file_columns(
    con: duckdb.DuckDBPyConnection, table: DeltaFeatureTable, version: int, files: list[str]
) -> tuple[str, ...]:
    """The columns ``version``'s files hold (cached with the version's snapshot)."""
    snap = snapshot(str(table.path), version)
    if snap.file_columns is None:
        rel = con.sql(f"SELECT * FROM read_parquet({_file_list(files)}, union_by_name=true) LIMIT 0")
        snap.file_columns = tuple(rel.columns)
    return snap.file_columns


def scan_schema(con: duckdb.DuckDBPyConnection, table: DeltaFeatureTable, version: int) -> pa.Schema:
    """The Arrow schema of :func:`scan` results for ``version`` (planned, not run; cached with the
    version's snapshot)."""
    snap = snapshot(str(table.path), version)
    if snap.scan_schema is None:
        query = f"SELECT * FROM {scan(con, table, version)} LIMIT 0"
        snap.scan_schema = con.sql(query).to_arrow_table().schema
    return snap.scan_schema


def _file_list(files: list[str]) -> str:
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"


ROW_ID = "__fstrain_row"
"""Column a scan adds on request: the row's place in the version's files, ``file << 40 | row``."""

ROW_ID_FILE_SHIFT = 40


def scan(
    con: duckdb.DuckDBPyConnection, table: DeltaFeatureTable, version: int, *, row_id: bool = False
) -> str:
    """A SQL table expression (a sub-select) reading ``table`` exactly as of ``version``.

    With ``row_id`` the scan also yields :data:`ROW_ID`, which locates each row in the
    version's files (their index in :meth:`DeltaFeatureTable.files` order, and the row's number
    in that file), so columns can be fetched by row after a join (see ``row_gather``).
    """
    schema = table.schema(version)
    files = table.files(version)
    if not files:
        name = f"__empty_{next(_counter)}"
        empty = schema.empty_table()
        if row_id:
            empty = empty.append_column(ROW_ID, pa.array([], pa.int64()))
        con.register(name, empty)
        return name
    present = _file_columns(con, table, version, files)
    columns = [
        quote_ident(f.name)
        if f.name in present
        else f"CAST(NULL AS {sql_type(f.type)}) AS {quote_ident(f.name)}"
        for f in schema
    ]
    if row_id:
        columns.append(
            f"(CAST(file_index AS BIGINT) << {ROW_ID_FILE_SHIFT}) "
            f"| CAST(file_row_number AS BIGINT) AS {quote_ident(ROW_ID)}"
        )
    # file_index and file_row_number are DuckDB's virtual columns of a multi-file scan
    source = f"read_parquet({_file_list(files)}, union_by_name=true)"
    return f"(SELECT {', '.join(columns)} FROM {source})"


def fetch_arrow(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> pa.Table:
    """Run a query and return an Arrow table (no extra copy of the rows)."""
    return con.sql(sql, params=params or None).to_arrow_table()
