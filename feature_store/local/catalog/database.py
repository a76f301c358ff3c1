"""The catalog database: one transactional SQLite file holding all feature-store metadata.

Feature groups, their schemas, tags, expectation suites, validation reports, statistics, feature
views and training datasets all live here. Writers take SQLite's write lock up front
(``BEGIN IMMEDIATE``) so read-modify-write sequences are atomic across processes; WAL mode lets
readers proceed while a writer holds the lock.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fstrain.kernel.canonical_json import finite_floats
from fstrain.kernel.errors import BackendError
from fstrain.kernel.oserrors import advice
from fstrain.kernel.sqlite_open import connect, retry_busy

_BUSY_TIMEOUT_S = 120.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS feature_groups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    primary_key TEXT NOT NULL,
    event_time TEXT,
    partition_key TEXT NOT NULL DEFAULT '[]',
    foreign_key TEXT NOT NULL DEFAULT '[]',
    features TEXT NOT NULL,
    statistics_config TEXT NOT NULL,
    expectation_suite TEXT,
    ingestion_policy TEXT,
    table_path TEXT NOT NULL,
    created_at TEXT NOT NULL,
    online_enabled INTEGER NOT NULL DEFAULT 0,
    UNIQUE (name, version)
);
CREATE TABLE IF NOT EXISTS spine_groups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    primary_key TEXT NOT NULL,
    foreign_key TEXT NOT NULL DEFAULT '[]',
    event_time TEXT,
    features TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (name, version)
);
CREATE TABLE IF NOT EXISTS tags (
    entity_type TEXT NOT NULL,
    entity_id INTEGER NOT NULL,
    feature TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (entity_type, entity_id, feature, name)
);
CREATE TABLE IF NOT EXISTS feature_group_extensions (
    fg_id INTEGER PRIMARY KEY,
    ingestion_time TEXT
);
CREATE TABLE IF NOT EXISTS validation_reports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fg_id INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    success INTEGER NOT NULL,
    ingestion_result TEXT NOT NULL,
    report TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS statistics (
    fg_id INTEGER NOT NULL,
    commit_id INTEGER NOT NULL,
    computed_at TEXT NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (fg_id, commit_id)
);
CREATE TABLE IF NOT EXISTS feature_views (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    spec TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (name, version)
);
CREATE TABLE IF NOT EXISTS transformation_functions (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    udf TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS training_datasets (
    fv_id INTEGER NOT NULL,
    version INTEGER NOT NULL,
    state TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (fv_id, version)
);
"""

#: columns added after a catalog's tables were first created: ``(table, column, declaration)``.
#: A catalog written before the column existed gets it on open (with its default), so old stores
#: keep working without a migration step.
_ADDED_COLUMNS = (
    ("feature_groups", "online_enabled", "INTEGER NOT NULL DEFAULT 0"),
)


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Add the :data:`_ADDED_COLUMNS` a catalog lacks (read first: a current catalog takes no
    write lock; a missing column is added under one, checked again there)."""

    def missing() -> list[tuple[str, str, str]]:
        return [(t, c, d) for t, c, d in _ADDED_COLUMNS
                if c not in {r[1] for r in conn.execute(f"PRAGMA table_info({t})")}]

    if not missing():
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table, column, declaration in missing():
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def dumps(value: Any) -> str:
    """Canonical JSON for catalog columns (sorted keys, strict): ``±inf`` as the strings
    ``"inf"``/``"-inf"`` and NaN as null, as :func:`fstrain.kernel.canonical_json.to_jsonable`
    writes them (a label's distribution over infinities has an infinite mean and a NaN
    deviation, a category may be infinite)."""
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False, default=str)
    except ValueError:  # a non-finite float somewhere: looked for only then
        return json.dumps(finite_floats(value), sort_keys=True, allow_nan=False, default=str)


def loads(text: str | None) -> Any:
    """Inverse of :func:`dumps` (``None`` stays ``None``)."""
    return None if text is None else json.loads(text)


def insert_tags(conn: sqlite3.Connection, entity_type: str, entity_id: int,
                tags: dict[str, Any]) -> None:
    """Write an entity's initial tags inside the caller's transaction (``conn``)."""
    for tag, value in tags.items():
        conn.execute(
            "INSERT OR REPLACE INTO tags (entity_type, entity_id, feature, name, value) "
            "VALUES (?, ?, '', ?, ?)",
            (entity_type, entity_id, tag, dumps(value)),
        )


class Database:
    """A thin transactional wrapper around the catalog's SQLite file.

    The record classes of this package (:mod:`.groups`, :mod:`.views`) build their named
    methods on it; code outside the package uses only those (``tests/test_layering.py``).
    :meth:`query` is kept public for tests and diagnostics that read the raw tables.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._damage_is_typed():
            conn = self._connect()
            try:
                retry_busy(lambda: conn.executescript(_SCHEMA), _BUSY_TIMEOUT_S)
                retry_busy(lambda: _add_missing_columns(conn), _BUSY_TIMEOUT_S)
            finally:
                conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = connect(self.path, _BUSY_TIMEOUT_S)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A connection for reads (autocommit; each statement sees a consistent snapshot)."""
        with self._damage_is_typed():
            conn = self._connect()
            try:
                yield conn
            finally:
                conn.close()

    @contextmanager
    def _damage_is_typed(self) -> Iterator[None]:
        """A catalog file that is not a database (or is damaged) is a BackendError naming it."""
        try:
            yield
        except sqlite3.DatabaseError as exc:

            if isinstance(exc, sqlite3.OperationalError):  # I/O, full disk, permissions: no damage
                hint = advice(exc) or "check the disk and the folder's permissions, then retry"
                raise BackendError(
                    f"catalog {self.path} cannot be written or read ({type(exc).__name__}: "
                    f"{exc}): {hint}. Nothing was changed in the catalog."
                ) from exc
            raise BackendError(
                f"catalog {self.path} cannot be used ({type(exc).__name__}: {exc}). Restore it "
                "from a backup; the Delta tables beside it are intact."
            ) from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction holding the database write lock from the start."""
        with self._damage_is_typed(), self._transaction() as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"), _BUSY_TIMEOUT_S)
            try:
                yield conn
            except BaseException:
                _rollback(conn)
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Run one read query and return all rows."""
        with self.read() as conn:
            return list(conn.execute(sql, params))

    def query_one(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        """Run one read query and return the first row, or ``None``."""
        rows = self.query(sql, params)
        return rows[0] if rows else None


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back, keeping the error that caused it: after an I/O error SQLite may already have
    rolled back, and ``ROLLBACK`` then fails with "no transaction is active"."""
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass
