"""Catalog records of feature views, their training datasets and saved transformation functions."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from feature_store.local.catalog.database import Database, dumps, insert_tags, loads


class ViewRecords(Database):
    """Named reads and writes of feature views and what belongs to them."""

    # -- feature views -----------------------------------------------------------------------

    def insert_feature_view(
        self, name: str, version: int, description: str, spec: dict[str, Any], created_at: str,
        tags: dict[str, Any],
    ) -> int:
        """Insert a feature view row with its tags; returns its id."""
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO feature_views (name, version, description, spec, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (name, version, description, dumps(spec), created_at),
            )
            fv_id = int(cur.lastrowid or 0)
            insert_tags(conn, "fv", fv_id, tags)
        return fv_id

    def feature_view_rows(self, name: str | None = None) -> list[sqlite3.Row]:
        """Rows of every version of ``name`` (of every view when ``None``), by name, version."""
        if name is None:
            return self.query("SELECT * FROM feature_views ORDER BY name, version")
        return self.query("SELECT * FROM feature_views WHERE name=? ORDER BY version", (name,))

    def feature_view_names(self) -> list[str]:
        """Every feature view name, sorted."""
        return [r["name"] for r in self.query("SELECT DISTINCT name FROM feature_views ORDER BY name")]

    def feature_view_versions(self, name: str) -> list[int]:
        """The versions of feature view ``name``, ascending."""
        rows = self.query("SELECT version FROM feature_views WHERE name=? ORDER BY version", (name,))
        return [r["version"] for r in rows]

    def feature_view_row(self, name: str, version: int) -> sqlite3.Row | None:
        """The row of ``name`` v``version``, or ``None``."""
        return self.query_one(
            "SELECT * FROM feature_views WHERE name=? AND version=?", (name, version)
        )

    def set_feature_view_spec(self, fv_id: int, spec: dict[str, Any]) -> None:
        """Replace a view's stored spec."""
        with self.transaction() as conn:
            conn.execute("UPDATE feature_views SET spec=? WHERE id=?", (dumps(spec), fv_id))

    def delete_feature_view(self, fv_id: int) -> None:
        """Remove a feature view row and its tags."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM tags WHERE entity_type='fv' AND entity_id=?", (fv_id,))
            conn.execute("DELETE FROM feature_views WHERE id=?", (fv_id,))

    # -- training datasets -------------------------------------------------------------------

    def training_dataset_versions(self, fv_id: int | None) -> list[int]:
        """The training-dataset versions of a view, ascending."""
        rows = self.query(
            "SELECT version FROM training_datasets WHERE fv_id=? ORDER BY version", (fv_id,)
        )
        return [r["version"] for r in rows]

    def training_dataset(self, fv_id: int | None, version: int) -> tuple[dict[str, Any], str] | None:
        """``(metadata, state)`` of one training-dataset version, or ``None``."""
        row = self.query_one(
            "SELECT metadata, state FROM training_datasets WHERE fv_id=? AND version=?",
            (fv_id, version),
        )
        return None if row is None else (loads(row["metadata"]), row["state"])

    def all_training_dataset_metadata(self) -> list[dict[str, Any]]:
        """The metadata of every training-dataset version of every view."""
        return [loads(r["metadata"]) for r in self.query("SELECT metadata FROM training_datasets")]

    def insert_training_dataset(
        self, fv_id: int | None, prepare: Callable[[int], dict[str, Any]]
    ) -> int:
        """Insert the view's next training-dataset version (state ``ok``); returns it.

        ``prepare(version)`` runs inside the write transaction, so no other writer takes the
        same version; it moves the files into place and returns the metadata to store (with
        ``created_at``). A failure in it rolls the insert back.
        """
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT COALESCE(MAX(version), 0) AS v FROM training_datasets WHERE fv_id=?",
                (fv_id,),
            ).fetchone()
            version = int(row["v"]) + 1
            metadata = prepare(version)
            conn.execute(
                "INSERT INTO training_datasets (fv_id, version, state, metadata, created_at) "
                "VALUES (?, ?, 'ok', ?, ?)",
                (fv_id, version, dumps(metadata), metadata["created_at"]),
            )
        return version

    def set_training_dataset_state(self, fv_id: int | None, version: int, state: str) -> None:
        """Set the state of one training-dataset version (``ok`` or ``purged``)."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE training_datasets SET state=? WHERE fv_id=? AND version=?",
                (state, fv_id, version),
            )

    def update_training_dataset(
        self, fv_id: int | None, version: int, change: Callable[[dict[str, Any]], None],
        state: str,
    ) -> None:
        """Read, ``change`` in place and store one version's metadata, and set its state, in
        one write transaction."""
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT metadata FROM training_datasets WHERE fv_id=? AND version=?",
                (fv_id, version),
            ).fetchone()
            metadata = loads(row["metadata"])
            change(metadata)
            conn.execute(
                "UPDATE training_datasets SET state=?, metadata=? WHERE fv_id=? AND version=?",
                (state, dumps(metadata), fv_id, version),
            )

    def delete_training_dataset(self, fv_id: int | None, version: int) -> None:
        """Remove one training-dataset version's row."""
        with self.transaction() as conn:
            conn.execute(
                "DELETE FROM training_datasets WHERE fv_id=? AND version=?", (fv_id, version)
            )

    # -- saved transformation functions ------------------------------------------------------

    def insert_transformation_function(self, name: str, version: int, udf_json: str,
                                       created_at: str) -> None:
        """Store a ``@udf`` (the SDK's JSON) as ``name``/``version``."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO transformation_functions (name, version, udf, created_at) "
                "VALUES (?, ?, ?, ?)",
                (name, version, udf_json, created_at),
            )

    def delete_transformation_function(self, name: str, version: int | None) -> bool:
        """Remove one saved function; returns whether it existed."""
        with self.transaction() as conn:
            cur = conn.execute("DELETE FROM transformation_functions WHERE name=? AND version=?",
                               (name, version))
            return cur.rowcount > 0

    def transformation_function_versions(self, name: str) -> list[int]:
        """Saved versions of ``name``, ascending."""
        rows = self.query(
            "SELECT version FROM transformation_functions WHERE name=? ORDER BY version", (name,))
        return [r["version"] for r in rows]

    def transformation_functions(self) -> list[tuple[dict[str, Any], int]]:
        """``(udf, version)`` of every saved function (the SDK's JSON parsed), by name, version."""
        rows = self.query(
            "SELECT udf, version FROM transformation_functions ORDER BY name, version")
        return [(loads(r["udf"]), r["version"]) for r in rows]

    def transformation_function(self, name: str, version: int) -> dict[str, Any] | None:
        """The saved ``@udf`` JSON (parsed) of ``name``/``version``, or ``None``."""
        row = self.query_one(
            "SELECT udf FROM transformation_functions WHERE name=? AND version=?", (name, version))
        return None if row is None else loads(row["udf"])
