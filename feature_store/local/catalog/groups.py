"""Catalog records of feature groups: their rows, tags, statistics and validation reports."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from feature_store.local.catalog.database import Database, dumps, insert_tags, loads


#: a group's row with its fstrain extensions (``ingestion_time``), kept in a table of their own
#: so a catalog written before them needs no migration (the table is created on open)
_GROUP_ROWS = ("SELECT g.*, x.ingestion_time AS ingestion_time FROM feature_groups g "
               "LEFT JOIN feature_group_extensions x ON x.fg_id = g.id")


class GroupRecords(Database):
    """Named reads and writes of feature groups and what hangs off them."""

    # -- feature groups ----------------------------------------------------------------------

    def feature_group_rows(self, name: str | None = None) -> list[sqlite3.Row]:
        """Rows of every version of ``name`` (of every group when ``None``), by name, version."""
        if name is None:
            return self.query(f"{_GROUP_ROWS} ORDER BY g.name, g.version")
        return self.query(f"{_GROUP_ROWS} WHERE g.name=? ORDER BY g.version", (name,))

    def feature_group_versions(self, name: str) -> list[int]:
        """The versions of feature group ``name``, ascending."""
        rows = self.query(
            "SELECT version FROM feature_groups WHERE name=? ORDER BY version", (name,)
        )
        return [r["version"] for r in rows]

    def feature_group_names(self) -> list[str]:
        """Every feature group name, sorted."""
        return [r["name"] for r in self.query("SELECT DISTINCT name FROM feature_groups ORDER BY name")]

    def feature_group_row(self, name: str, version: int) -> sqlite3.Row | None:
        """The row of ``name`` v``version``, or ``None``."""
        return self.query_one(f"{_GROUP_ROWS} WHERE g.name=? AND g.version=?", (name, version))

    def feature_group_row_by_id(self, fg_id: int) -> sqlite3.Row | None:
        """The row with id ``fg_id``, or ``None``."""
        return self.query_one(f"{_GROUP_ROWS} WHERE g.id=?", (fg_id,))

    def insert_feature_group(
        self, row: dict[str, Any], tags: dict[str, Any], on_insert: Callable[[], None],
        ingestion_time: str | None = None,
    ) -> tuple[int, bool]:
        """Insert a feature group row, its tags and its ``ingestion_time`` column (an fstrain
        extension) unless ``row``'s name+version exists.

        ``on_insert`` runs inside the write transaction after the insert (it creates the
        group's table), so a failure there rolls the row back. Returns ``(id, inserted)``.
        """
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self.transaction() as conn:
            found = conn.execute(
                "SELECT id FROM feature_groups WHERE name=? AND version=?",
                (row["name"], row["version"]),
            ).fetchone()
            if found is not None:
                return int(found["id"]), False
            cur = conn.execute(
                f"INSERT INTO feature_groups ({columns}) VALUES ({marks})", tuple(row.values())
            )
            fg_id = int(cur.lastrowid or 0)
            insert_tags(conn, "fg", fg_id, tags)
            if ingestion_time is not None:
                conn.execute("INSERT OR REPLACE INTO feature_group_extensions (fg_id, "
                             "ingestion_time) VALUES (?, ?)", (fg_id, ingestion_time))
            on_insert()
        return fg_id, True

    # -- spine groups (metadata only: their rows are never stored here) ----------------------

    def spine_group_row(self, name: str, version: int) -> sqlite3.Row | None:
        """The spine group ``name`` v``version``, or ``None``."""
        return self.query_one(
            "SELECT * FROM spine_groups WHERE name=? AND version=?", (name, version)
        )

    def insert_spine_group(self, row: dict[str, Any]) -> tuple[int, bool]:
        """Insert a spine group's metadata unless its name+version exists; ``(id, inserted)``."""
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self.transaction() as conn:
            found = conn.execute("SELECT id FROM spine_groups WHERE name=? AND version=?",
                                 (row["name"], row["version"])).fetchone()
            if found is not None:
                return int(found["id"]), False
            cur = conn.execute(f"INSERT INTO spine_groups ({columns}) VALUES ({marks})",
                               tuple(row.values()))
        return int(cur.lastrowid or 0), True

    def set_feature_group_description(self, fg_id: int, description: str) -> None:
        """Change a group's description."""
        self._update_group(fg_id, "description=?", (description,))

    def set_feature_group_features(self, fg_id: int, features: list[dict[str, Any]]) -> None:
        """Replace a group's feature list (``Feature.to_dict()`` of each column)."""
        self._update_group(fg_id, "features=?", (dumps(features),))

    def set_statistics_config(self, fg_id: int, config: dict[str, Any]) -> None:
        """Store a group's statistics configuration."""
        self._update_group(fg_id, "statistics_config=?", (dumps(config),))

    def set_expectation_suite(self, fg_id: int, suite: dict[str, Any], policy: str) -> None:
        """Attach an expectation suite (dict form) and its ingestion policy to a group."""
        self._update_group(fg_id, "expectation_suite=?, ingestion_policy=?", (dumps(suite), policy))

    def clear_expectation_suite(self, fg_id: int) -> None:
        """Detach a group's expectation suite (its ingestion policy is kept)."""
        self._update_group(fg_id, "expectation_suite=NULL", ())

    def _update_group(self, fg_id: int, assignments: str, values: tuple[Any, ...]) -> None:
        with self.transaction() as conn:
            conn.execute(f"UPDATE feature_groups SET {assignments} WHERE id=?", (*values, fg_id))

    def delete_feature_group(self, fg_id: int) -> None:
        """Remove a feature group row with its tags, validation reports and statistics."""
        with self.transaction() as conn:
            for table in ("validation_reports", "statistics", "feature_group_extensions"):
                conn.execute(f"DELETE FROM {table} WHERE fg_id=?", (fg_id,))
            conn.execute("DELETE FROM tags WHERE entity_type='fg' AND entity_id=?", (fg_id,))
            conn.execute("DELETE FROM feature_groups WHERE id=?", (fg_id,))

    # -- statistics --------------------------------------------------------------------------

    def statistics(self, fg_id: int, commit_id: int) -> dict[str, Any] | None:
        """The stored statistics of one commit of a group, or ``None``."""
        row = self.query_one(
            "SELECT content FROM statistics WHERE fg_id=? AND commit_id=?", (fg_id, commit_id)
        )
        return None if row is None else loads(row["content"])

    def all_statistics(self, fg_id: int) -> list[dict[str, Any]]:
        """Every stored statistics entry of a group, oldest commit first."""
        rows = self.query(
            "SELECT content FROM statistics WHERE fg_id=? ORDER BY commit_id", (fg_id,)
        )
        return [loads(r["content"]) for r in rows]

    def save_statistics(self, fg_id: int, commit_id: int, content: dict[str, Any]) -> None:
        """Store (or replace) the statistics of one commit; ``content`` has ``computed_at``."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO statistics (fg_id, commit_id, computed_at, content) "
                "VALUES (?, ?, ?, ?)",
                (fg_id, commit_id, content["computed_at"], dumps(content)),
            )

    # -- validation reports ------------------------------------------------------------------

    def insert_validation_report(
        self, fg_id: int, created_at: str, success: bool, ingestion_result: str,
        report: dict[str, Any],
    ) -> None:
        """Append one validation report of a group."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO validation_reports (fg_id, created_at, success, ingestion_result, "
                "report) VALUES (?, ?, ?, ?, ?)",
                (fg_id, created_at, int(success), ingestion_result, dumps(report)),
            )

    def validation_reports(self, fg_id: int) -> list[tuple[dict[str, Any], str]]:
        """``(report, ingestion_result)`` of every report of a group, newest first."""
        rows = self.query(
            "SELECT report, ingestion_result FROM validation_reports WHERE fg_id=? ORDER BY id DESC",
            (fg_id,),
        )
        return [(loads(r["report"]), r["ingestion_result"]) for r in rows]

    # -- tags (shared by feature groups, features and feature views) ------------------------

    def set_tag(self, entity_type: str, entity_id: int, feature: str, name: str, value: Any) -> None:
        """Insert or replace one tag."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO tags (entity_type, entity_id, feature, name, value) "
                "VALUES (?, ?, ?, ?, ?)",
                (entity_type, entity_id, feature, name, dumps(value)),
            )

    def get_tags(self, entity_type: str, entity_id: int, feature: str = "") -> dict[str, Any]:
        """All tags of one entity (or of one of its features)."""
        rows = self.query(
            "SELECT name, value FROM tags WHERE entity_type=? AND entity_id=? AND feature=? "
            "ORDER BY name",
            (entity_type, entity_id, feature),
        )
        return {r["name"]: loads(r["value"]) for r in rows}

    def all_feature_tags(self, entity_type: str, entity_id: int) -> dict[str, dict[str, Any]]:
        """Tags of every feature of one entity: ``{feature: {tag: value}}``."""
        rows = self.query(
            "SELECT feature, name, value FROM tags WHERE entity_type=? AND entity_id=? "
            "AND feature != '' ORDER BY feature, name",
            (entity_type, entity_id),
        )
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            out.setdefault(r["feature"], {})[r["name"]] = loads(r["value"])
        return out

    def delete_tag(self, entity_type: str, entity_id: int, feature: str, name: str) -> bool:
        """Remove one tag; returns whether it existed."""
        with self.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM tags WHERE entity_type=? AND entity_id=? AND feature=? AND name=?",
                (entity_type, entity_id, feature, name),
            )
            return cur.rowcount > 0

