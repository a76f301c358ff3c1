"""The registry index: one SQLite file (WAL journal), every write in ``BEGIN IMMEDIATE``.

One row per model version (name, version, framework, metrics, status, lineage keys and the
sha256 of the version's ``manifest.json``) plus a tag table. ``BEGIN IMMEDIATE`` takes the write
lock up front, so two processes that save the same model at once are serialised: the second one
sees the first one's version and takes the next.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fstrain.kernel.sqlite_open import connect, retry_busy

_SCHEMA_VERSION = 1
_BUSY_TIMEOUT_S = 120.0

_DDL = """
CREATE TABLE IF NOT EXISTS model_versions (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    framework TEXT NOT NULL,
    created TEXT NOT NULL,
    description TEXT,
    metrics TEXT NOT NULL DEFAULT '{}',
    validation_status TEXT NOT NULL DEFAULT 'pending',
    feature_view_name TEXT,
    feature_view_version INTEGER,
    training_dataset_version INTEGER,
    manifest_sha256 TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS model_tags (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    tag TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (name, version, tag),
    FOREIGN KEY (name, version) REFERENCES model_versions (name, version) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS model_history (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    created TEXT NOT NULL,
    status TEXT,
    record_sha256 TEXT NOT NULL,
    PRIMARY KEY (name, version, seq),
    FOREIGN KEY (name, version) REFERENCES model_versions (name, version) ON DELETE CASCADE
);
"""

_COLUMNS = (
    "name, version, framework, created, description, metrics, validation_status, "
    "feature_view_name, feature_view_version, training_dataset_version, manifest_sha256"
)


@dataclass(frozen=True)
class ModelRecord:
    """One model version as the index knows it."""

    name: str
    version: int
    framework: str
    created: str
    manifest_sha256: str
    description: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    validation_status: str = "pending"
    feature_view_name: str | None = None
    feature_view_version: int | None = None
    training_dataset_version: int | None = None

    def as_row(self) -> tuple[Any, ...]:
        """The row's values in the order of the table's columns."""
        return (
            self.name,
            self.version,
            self.framework,
            self.created,
            self.description,
            json.dumps(self.metrics, sort_keys=True),
            self.validation_status,
            self.feature_view_name,
            self.feature_view_version,
            self.training_dataset_version,
            self.manifest_sha256,
        )


def _record(row: tuple[Any, ...]) -> ModelRecord:
    return ModelRecord(
        name=row[0],
        version=row[1],
        framework=row[2],
        created=row[3],
        description=row[4],
        metrics=json.loads(row[5]),
        validation_status=row[6],
        feature_view_name=row[7],
        feature_view_version=row[8],
        training_dataset_version=row[9],
        manifest_sha256=row[10],
    )


class IndexTransaction:
    """Write operations inside one ``BEGIN IMMEDIATE`` transaction (:meth:`RegistryIndex.write`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def get(self, name: str, version: int) -> ModelRecord | None:
        """The row for ``name``/``version`` as seen inside the transaction."""
        return _get(self._conn, name, version)

    def max_version(self, name: str) -> int:
        """Highest registered version of ``name`` (0 if none)."""
        row = self._conn.execute(
            "SELECT COALESCE(MAX(version), 0) FROM model_versions WHERE name = ?", (name,)
        ).fetchone()
        return int(row[0])

    def insert(self, record: ModelRecord) -> None:
        """Add a version row (the primary key rejects a duplicate)."""
        self._conn.execute(
            f"INSERT INTO model_versions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            record.as_row(),
        )

    def insert_many(self, records: list[ModelRecord]) -> None:
        """Add many version rows at once (bulk import, tests)."""
        self._conn.executemany(
            f"INSERT INTO model_versions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [r.as_row() for r in records],
        )

    def delete(self, name: str, version: int) -> None:
        """Remove a version row and its tags."""
        self._conn.execute(
            "DELETE FROM model_versions WHERE name = ? AND version = ?", (name, version)
        )

    def update(self, name: str, version: int, **values: Any) -> None:
        """Set ``validation_status`` and/or ``manifest_sha256`` of a version."""
        allowed = {"validation_status", "manifest_sha256"}
        if not values or not set(values) <= allowed:
            raise ValueError(f"update() accepts {sorted(allowed)}; got {sorted(values)}")
        assignments = ", ".join(f"{k} = ?" for k in values)
        self._conn.execute(
            f"UPDATE model_versions SET {assignments} WHERE name = ? AND version = ?",
            (*values.values(), name, version),
        )

    def add_history(self, name: str, version: int, seq: int, kind: str, created: str,
                    status: str | None, record_sha256: str) -> None:
        """Append one history event row (the primary key refuses a second event ``seq``)."""
        self._conn.execute(
            "INSERT INTO model_history (name, version, seq, kind, created, status, "
            "record_sha256) VALUES (?,?,?,?,?,?,?)",
            (name, version, seq, kind, created, status, record_sha256),
        )

    def set_tag(self, name: str, version: int, tag: str, value: Any) -> None:
        """Add or replace a tag (value stored as JSON)."""
        self._conn.execute(
            "INSERT INTO model_tags (name, version, tag, value) VALUES (?,?,?,?) "
            "ON CONFLICT (name, version, tag) DO UPDATE SET value = excluded.value",
            (name, version, tag, json.dumps(value, sort_keys=True, allow_nan=False)),
        )

    def delete_tag(self, name: str, version: int, tag: str) -> bool:
        """Remove a tag; return whether it existed."""
        cur = self._conn.execute(
            "DELETE FROM model_tags WHERE name = ? AND version = ? AND tag = ?",
            (name, version, tag),
        )
        return cur.rowcount > 0


class RegistryIndex:
    """The SQLite index file of a local model registry."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect()
        try:
            retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"), _BUSY_TIMEOUT_S)
            for statement in _statements():
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
            conn.execute("COMMIT")
        finally:
            conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = connect(self.path, _BUSY_TIMEOUT_S)
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    @contextmanager
    def write(self) -> Iterator[IndexTransaction]:
        """One write transaction: ``BEGIN IMMEDIATE``; COMMIT on success, ROLLBACK on error."""
        conn = self._connect()
        try:
            retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"), _BUSY_TIMEOUT_S)
            try:
                yield IndexTransaction(conn)
            except BaseException:
                try:  # keep the error that caused it (SQLite may have rolled back already)
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            yield conn
        finally:
            conn.close()

    def get(self, name: str, version: int) -> ModelRecord | None:
        """The row of one version, or None."""
        with self._read() as conn:
            return _get(conn, name, version)

    def list(self, name: str | None = None) -> list[ModelRecord]:
        """All versions of ``name`` (or of every model), ordered by name then version."""
        with self._read() as conn:
            if name is None:
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM model_versions ORDER BY name, version"
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM model_versions WHERE name = ? ORDER BY version",
                    (name,),
                ).fetchall()
        return [_record(r) for r in rows]

    def names(self) -> builtins.list[str]:
        """Every model name with at least one version."""
        with self._read() as conn:
            rows = conn.execute("SELECT DISTINCT name FROM model_versions ORDER BY name")
            return [r[0] for r in rows.fetchall()]

    def best(
        self, name: str, metric: str, direction: str, *, validated_only: bool,
        require_approval: bool = False,
    ) -> ModelRecord | None:
        """The version with the highest (``max``) or lowest (``min``) ``metric``; ties go to the
        newest version. Versions without the metric are ignored. ``require_approval`` keeps
        only versions whose newest history event is an approval."""
        ranked = self.ranked(name, metric, direction, validated_only=validated_only,
                             require_approval=require_approval, limit=1)
        return ranked[0] if ranked else None

    def ranked(
        self, name: str, metric: str, direction: str, *, validated_only: bool,
        require_approval: bool = False, limit: int | None = None,
    ) -> builtins.list[ModelRecord]:
        """The versions :meth:`best` chooses from, best first (at most ``limit``).
        ``validated_only`` keeps a plain ``passed`` status only (not a policy deviation)."""
        order = "DESC" if direction == "max" else "ASC"
        status = "AND validation_status = 'passed'" if validated_only else ""
        if require_approval:
            status += (" AND (SELECT h.kind FROM model_history h WHERE h.name = model_versions.name"
                       " AND h.version = model_versions.version ORDER BY h.seq DESC LIMIT 1)"
                       " = 'approval'")
        path = "$." + json.dumps(metric)
        bound = "" if limit is None else f" LIMIT {int(limit)}"
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM model_versions WHERE name = ? {status} "
                "AND json_type(metrics, ?) IN ('integer', 'real') "
                f"ORDER BY json_extract(metrics, ?) {order}, version DESC{bound}",
                (name, path, path),
            ).fetchall()
        return [_record(row) for row in rows]

    def history(self, name: str, version: int
                ) -> builtins.list[tuple[int, str, str, str | None, str]]:
        """``(seq, kind, created, status, record_sha256)`` of a version's events, oldest first."""
        with self._read() as conn:
            return [tuple(r) for r in conn.execute(
                "SELECT seq, kind, created, status, record_sha256 FROM model_history "
                "WHERE name = ? AND version = ? ORDER BY seq", (name, version)).fetchall()]

    def tags(self, name: str, version: int) -> dict[str, Any]:
        """All tags of a version."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT tag, value FROM model_tags WHERE name = ? AND version = ? ORDER BY tag",
                (name, version),
            ).fetchall()
        return {tag: json.loads(value) for tag, value in rows}


def _get(conn: sqlite3.Connection, name: str, version: int) -> ModelRecord | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM model_versions WHERE name = ? AND version = ?", (name, version)
    ).fetchone()
    return None if row is None else _record(row)


def _statements() -> list[str]:
    return [s.strip() for s in _DDL.split(";") if s.strip()]
