"""Persistence of one local feature group: its catalog row, features, statistics, deletion.

:class:`~feature_store.local.objects.feature_group.FeatureGroup` calls these functions and keeps the
results in its own state; they read the group only through the members of
:class:`~feature_store.local.storage.stored_group.StoredGroup` and write through the catalog
repository (:mod:`feature_store.local.catalog`) they are given.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from feature_store.feature import Feature
from feature_store.local.catalog import dumps
from feature_store.local.storage.storage_errors import storage_boundary
from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.timeutil import utc_now

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from feature_store.local.catalog import Catalog
    from feature_store.local.storage.delta_table import DeltaFeatureTable
    from feature_store.local.storage.stored_group import StoredGroup


def features_from_schema(
    fg: StoredGroup, schema: pa.Schema, descriptions: dict[str, str] | None = None
) -> list[Feature]:
    """The group's features for a Delta schema, keeping known descriptions (``descriptions``
    override them)."""
    old = {f.name: f.description for f in fg.features}
    old.update(descriptions or {})
    return [
        Feature(
            name=field.name,
            type=str(field.type),
            description=old.get(field.name, ""),
            primary=field.name in fg.primary_key,
            partition=field.name in fg.partition_key,
            event_time=field.name == fg.event_time,
        )
        for field in schema
    ]


def insert(catalog: Catalog, fg: StoredGroup, schema: pa.Schema) -> tuple[int, list[Feature]] | None:
    """Persist a new group (catalog row, initial tags and an empty Delta table) on its first
    insert; returns ``(id, features)``, or ``None`` when another handle or process created it
    meanwhile (nothing is written then)."""
    features = features_from_schema(fg, schema)
    table = fg.delta_table
    row = {
        "name": fg.name, "version": fg.version, "description": fg.description,
        "primary_key": dumps(fg.primary_key), "event_time": fg.event_time,
        "partition_key": dumps(fg.partition_key), "foreign_key": dumps(fg.foreign_key),
        "features": dumps([f.to_dict() for f in features]),
        "statistics_config": dumps(fg.statistics_config),
        "expectation_suite": dumps(fg.expectation_suite) if fg.expectation_suite else None,
        "ingestion_policy": fg.validation_ingestion_policy, "table_path": str(table.path),
        "created_at": utc_now().isoformat(), "online_enabled": int(bool(fg.online_enabled)),
    }

    def create_table() -> None:  # inside the catalog's write transaction
        _clear_orphan_table(table)
        table.create(schema)

    fg_id, inserted = catalog.insert_feature_group(row, fg.get_tags(), create_table,
                                                   fg.ingestion_time)
    return (fg_id, features) if inserted else None


def store_features(catalog: Catalog, fg: StoredGroup,
                   descriptions: dict[str, str] | None) -> list[Feature]:
    """Re-read the features from the group's Delta schema and store them; returns them."""
    features = features_from_schema(fg, fg.delta_table.schema(), descriptions)
    catalog.set_feature_group_features(
        fg.require_saved(), [f.to_dict() for f in features])
    return features


def drop(catalog: Catalog, fg: StoredGroup, *, force: bool, views: list[str]) -> None:
    """Delete the group's table and catalog records (refused while ``views`` read it, unless
    ``force``)."""
    fg_id = fg.require_saved()
    if views and not force:
        raise InvalidArgumentError(
            f"{fg.owner} is read by feature view(s) {', '.join(views)}; deleting it would "
            "strand them and their training datasets. Delete those views first, or call "
            "fg.delete(force=True)."
        )
    catalog.delete_feature_group(fg_id)
    shutil.rmtree(fg.delta_table.path, ignore_errors=True)
    from feature_store.local.storage.delta_table import forget_snapshots

    forget_snapshots()


def pinned_commits(catalog: Catalog, name: str, version: int) -> list[int]:
    """Commits of group ``name`` v``version`` pinned by any training-dataset version (kept by
    vacuum)."""
    key = f"{name}:{version}"
    commits = set()
    for metadata in catalog.all_training_dataset_metadata():
        pins = metadata.get("feature_group_commits", {})
        if key in pins:
            commits.add(int(pins[key]))
    return sorted(commits)


def statistics(catalog: Catalog, fg: StoredGroup, commit_id: int | None, *,
               recompute: bool) -> dict[str, Any]:
    """The group's statistics at ``commit_id`` (default: latest): the stored ones unless
    ``recompute``, else computed now and stored."""
    from feature_store.local.storage import engine
    from feature_store.local.storage.statistics import compute_statistics
    fg_id = fg.require_saved()
    table = fg.delta_table
    commit = table.version() if commit_id is None else int(commit_id)
    if not recompute:
        stored = catalog.statistics(fg_id, commit)
        if stored is not None:
            return stored
    con = engine.connect()
    try:
        with storage_boundary(fg.owner, f"computing statistics of commit {commit}"):
            stats = compute_statistics(con, engine.scan(con, table, commit), table.schema(commit))
    finally:
        con.close()
    stats = {"commit_id": commit, "computed_at": utc_now().isoformat(), **stats}
    catalog.save_statistics(fg_id, commit, stats)
    return stats


def _clear_orphan_table(table: DeltaFeatureTable) -> None:
    """Remove a table folder that has no catalog row (a first insert killed between creating
    the folder and committing the row). Called inside the catalog write transaction, so no
    other process is creating the same group at this moment."""
    if table.path.exists():
        shutil.rmtree(table.path)
        from feature_store.local.storage.delta_table import forget_snapshots

        forget_snapshots()
