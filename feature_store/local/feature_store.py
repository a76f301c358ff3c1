"""The local feature store (mirrors ``hsfs.feature_store.FeatureStore``)."""

from __future__ import annotations

import shutil
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.feature import Feature
from feature_store.local.catalog import dumps, loads, open_catalog
from feature_store.local.feature_group import FeatureGroup, warn_default_version
from feature_store.local.feature_view_operations import (
    FeatureViewOperations,
    refuse_unsupported,
)
from fstrain.kernel.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    did_you_mean,
    listing,
    missing_version,
)
from fstrain.kernel.names import (
    check_entity_name,
    check_version,
    normalize_feature_name,
)
from fstrain.kernel.timeutil import utc_now

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from feature_store.local.delta_table import DeltaFeatureTable
    from feature_store.local.writer import FeatureGroupWriter


class FeatureStore(FeatureViewOperations):
    """Feature groups, feature views and training datasets of one local project."""

    def __init__(self, root: Path, project_name: str = "fstrain", sdk_objects: Any = None) -> None:
        self.root = root
        # the Hopsworks SDK's object factories (fstrain.sdk_objects), wired in by login()
        self._sdk_objects = sdk_objects
        self.project_name = project_name
        self.name = f"{project_name}_featurestore"
        # the catalog repository (package-internal: entities of this backend use its methods)
        self.catalog = open_catalog(root)

    def __repr__(self) -> str:
        return f"FeatureStore(root='{self.root}')"

    @cached_property
    def _writer(self) -> FeatureGroupWriter:
        from feature_store.local.writer import FeatureGroupWriter

        return FeatureGroupWriter(self)

    def _delta_table(self, name: str, version: int) -> DeltaFeatureTable:
        from feature_store.local.delta_table import DeltaFeatureTable

        return DeltaFeatureTable(self.root / "tables" / f"{name}_{version}", f"feature group '{name}' v{version}")

    # -- feature groups ----------------------------------------------------------------------

    def _new_feature_group(
        self,
        name: str,
        version: int,
        primary_key: list[str] | None,
        event_time: str | None,
        description: str,
        partition_key: list[str] | None,
        foreign_key: list[str] | None,
        expectation_suite: Any,
        statistics_config: Any,
        tags: dict[str, Any] | None,
        validation_ingestion_policy: str = "always",
    ) -> FeatureGroup:
        check_entity_name(name, "feature group")
        check_version(version, "feature group", name)
        owner = f"feature group '{name}' v{version}"
        if not primary_key:
            raise InvalidArgumentError(
                f"{owner}: primary_key must name at least one column. Got {primary_key!r} instead."
            )
        if isinstance(primary_key, str):
            primary_key = [primary_key]
        pk = [normalize_feature_name(c, owner=owner) for c in primary_key]
        et = normalize_feature_name(event_time, owner=owner) if event_time else None
        fg = FeatureGroup(
            self,
            name,
            version,
            primary_key=pk,
            event_time=et,
            description=description or "",
            partition_key=[normalize_feature_name(c, owner=owner) for c in partition_key or []],
            foreign_key=[normalize_feature_name(c, owner=owner) for c in foreign_key or []],
            statistics_config=statistics_config,
            initial_tags=tags,
        )
        if expectation_suite is not None:
            fg.save_expectation_suite(
                expectation_suite, validation_ingestion_policy=validation_ingestion_policy
            )
        return fg

    def create_feature_group(
        self,
        name: str,
        version: int | None = None,
        description: str = "",
        online_enabled: bool = False,
        time_travel_format: str | None = None,
        partition_key: list[str] | None = None,
        primary_key: list[str] | None = None,
        foreign_key: list[str] | None = None,
        embedding_index: Any = None,
        hudi_precombine_key: str | None = None,
        features: list[Feature] | None = None,
        statistics_config: Any = None,
        event_time: str | None = None,
        stream: bool = False,
        expectation_suite: Any = None,
        tags: dict[str, Any] | None = None,
        validation_ingestion_policy: str = "always",
        **unsupported: Any,
    ) -> FeatureGroup:
        """Create a new feature group version (lazily: it is persisted by the first insert).

        ``version=None`` takes the next free version. An existing name+version raises
        :class:`~fstrain.kernel.errors.AlreadyExistsError`.
        """
        refuse_unsupported(unsupported, "create_feature_group")
        _refuse_ignored(name, "create_feature_group", online_enabled=online_enabled, features=features,
                        embedding_index=embedding_index, stream=stream,
                        hudi_precombine_key=hudi_precombine_key,
                        time_travel_format=time_travel_format)
        existing = self._versions(name)
        if version is None:
            version = (max(existing) + 1) if existing else 1
        elif version in existing:
            raise AlreadyExistsError(
                f"feature group '{name}' v{version} already exists (versions: "
                f"{listing(existing)}). Use get_feature_group() or a new version."
            )
        return self._new_feature_group(
            name, version, primary_key, event_time, description, partition_key, foreign_key,
            expectation_suite, statistics_config, tags, validation_ingestion_policy,
        )

    def get_or_create_feature_group(
        self,
        name: str,
        version: int | None = None,
        description: str = "",
        online_enabled: bool = False,
        time_travel_format: str | None = None,
        partition_key: list[str] | None = None,
        primary_key: list[str] | None = None,
        foreign_key: list[str] | None = None,
        embedding_index: Any = None,
        hudi_precombine_key: str | None = None,
        features: list[Feature] | None = None,
        statistics_config: Any = None,
        expectation_suite: Any = None,
        event_time: str | None = None,
        stream: bool = False,
        tags: dict[str, Any] | None = None,
        validation_ingestion_policy: str = "always",
        **unsupported: Any,
    ) -> FeatureGroup:
        """Return the feature group if it exists (arguments are then ignored, as in Hopsworks),
        else a new, lazily created one."""
        refuse_unsupported(unsupported, "get_or_create_feature_group")
        _refuse_ignored(name, "get_or_create_feature_group", online_enabled=online_enabled, features=features,
                        embedding_index=embedding_index, stream=stream,
                        hudi_precombine_key=hudi_precombine_key,
                        time_travel_format=time_travel_format)
        version = 1 if version is None else version
        row = self._fg_row(name, version)
        if row is not None:
            return self._fg_from_row(row)
        return self._new_feature_group(
            name, version, primary_key, event_time, description, partition_key, foreign_key,
            expectation_suite, statistics_config, tags, validation_ingestion_policy,
        )

    def get_feature_group(self, name: str, version: int | None = None) -> FeatureGroup:
        """An existing feature group version (``version=None`` warns and uses 1)."""
        if version is None:
            warn_default_version("feature group", name)
            version = 1
        row = self._fg_row(name, version)
        if row is None:
            raise missing_version("feature group", name, version, self._versions(name),
                                  self._fg_names())
        return self._fg_from_row(row)

    def get_feature_groups(self, name: str | None = None) -> list[FeatureGroup]:
        """All versions of ``name`` (or every feature group when ``name`` is None)."""
        rows = self.catalog.feature_group_rows(name)
        if name is not None and not rows:
            names = self._fg_names()
            raise NotFoundError(
                f"feature group '{name}' does not exist (feature groups: {listing(names)})."
                f"{did_you_mean(name, names)}"
            )
        return [self._fg_from_row(r) for r in rows]

    def _versions(self, name: str) -> list[int]:
        return self.catalog.feature_group_versions(name)

    def _fg_names(self) -> list[str]:
        return self.catalog.feature_group_names()

    def _fg_row(self, name: str, version: int) -> Any:
        return self.catalog.feature_group_row(name, version)

    def _fg_by_id(self, fg_id: int) -> FeatureGroup:
        row = self.catalog.feature_group_row_by_id(fg_id)
        if row is None:
            raise NotFoundError(f"feature group id {fg_id} no longer exists.")
        return self._fg_from_row(row)

    def _fg_from_row(self, row: Any) -> FeatureGroup:
        features = [Feature(**f) for f in loads(row["features"])]
        return FeatureGroup(
            self,
            row["name"],
            row["version"],
            primary_key=loads(row["primary_key"]),
            event_time=row["event_time"],
            description=row["description"],
            partition_key=loads(row["partition_key"]),
            foreign_key=loads(row["foreign_key"]),
            statistics_config=loads(row["statistics_config"]),
            expectation_suite=loads(row["expectation_suite"]),
            ingestion_policy=row["ingestion_policy"] or "ALWAYS",
            features=features,
            fg_id=row["id"],
        )

    def _features_from_schema(
        self, fg: FeatureGroup, schema: pa.Schema, descriptions: dict[str, str] | None = None
    ) -> list[Feature]:
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

    def _adopt_existing(self, fg: FeatureGroup) -> None:
        """If another handle or process created the group meanwhile, bind ``fg`` to it."""
        row = self._fg_row(fg.name, fg.version)
        if row is not None:
            current = self._fg_from_row(row)
            fg.id = current.id
            fg._features = current.features
            if fg.expectation_suite is None:
                fg._expectation_suite = current.expectation_suite
                fg._ingestion_policy = current.validation_ingestion_policy

    def _create_metadata(self, fg: FeatureGroup, schema: pa.Schema) -> None:
        """Persist a new feature group (catalog row + empty Delta table) on its first insert."""
        features = self._features_from_schema(fg, schema)
        table = self._delta_table(fg.name, fg.version)
        row = {
            "name": fg.name, "version": fg.version, "description": fg.description,
            "primary_key": dumps(fg.primary_key), "event_time": fg.event_time,
            "partition_key": dumps(fg.partition_key), "foreign_key": dumps(fg.foreign_key),
            "features": dumps([f.to_dict() for f in features]),
            "statistics_config": dumps(fg.statistics_config),
            "expectation_suite": dumps(fg.expectation_suite) if fg.expectation_suite else None,
            "ingestion_policy": fg.validation_ingestion_policy, "table_path": str(table.path),
            "created_at": utc_now().isoformat(),
        }

        def create_table() -> None:  # inside the catalog's write transaction
            _clear_orphan_table(table)
            table.create(schema)

        fg_id, inserted = self.catalog.insert_feature_group(row, fg._initial_tags, create_table)
        if not inserted:
            self._adopt_existing(fg)
            return
        fg.id = fg_id
        fg._features = features
        for f in features:
            f.feature_group = fg

    def _refresh_features(self, fg: FeatureGroup, descriptions: dict[str, str] | None = None) -> None:
        features = self._features_from_schema(fg, fg.delta_table.schema(), descriptions)
        self.catalog.set_feature_group_features(fg._require_saved(), [f.to_dict() for f in features])
        fg._features = features
        for f in features:
            f.feature_group = fg

    def _drop_feature_group(self, fg: FeatureGroup, *, force: bool = False) -> None:
        fg_id = fg._require_saved()
        views = self._views_reading(fg.name, fg.version)
        if views and not force:
            raise InvalidArgumentError(
                f"{fg.owner} is read by feature view(s) {', '.join(views)}; deleting it would "
                "strand them and their training datasets. Delete those views first, or call "
                "fg.delete(force=True)."
            )
        self.catalog.delete_feature_group(fg_id)
        shutil.rmtree(fg.delta_table.path, ignore_errors=True)
        from feature_store.local.delta_table import forget_snapshots

        forget_snapshots()
        fg.id = None

    def _pinned_commits(self, fg: FeatureGroup) -> list[int]:
        """Commits of ``fg`` pinned by any training-dataset version (kept by vacuum)."""
        key = f"{fg.name}:{fg.version}"
        commits = set()
        for metadata in self.catalog.all_training_dataset_metadata():
            pins = metadata.get("feature_group_commits", {})
            if key in pins:
                commits.add(int(pins[key]))
        return sorted(commits)

    # -- statistics --------------------------------------------------------------------------

    def _statistics_for(self, fg: FeatureGroup, commit_id: int | None, *, recompute: bool) -> dict[str, Any]:
        from feature_store.local import engine
        from feature_store.local.statistics import compute_statistics

        fg_id = fg._require_saved()
        table = fg.delta_table
        commit = table.version() if commit_id is None else int(commit_id)
        if not recompute:
            stored = self.catalog.statistics(fg_id, commit)
            if stored is not None:
                return stored
        from feature_store.local.storage_errors import storage_boundary

        con = engine.connect()
        try:
            with storage_boundary(fg.owner, f"computing statistics of commit {commit}"):
                stats = compute_statistics(con, engine.scan(con, table, commit), table.schema(commit))
        finally:
            con.close()
        stats = {"commit_id": commit, "computed_at": utc_now().isoformat(), **stats}
        self.catalog.save_statistics(fg_id, commit, stats)
        return stats


_IGNORED_HELP = {
    "online_enabled": "the local backend has only the offline store; drop online_enabled=True",
    "features": "the schema is taken from the first insert; drop features= and insert a "
                "DataFrame with those columns",
    "embedding_index": "the local backend has no vector index; drop embedding_index=",
    "stream": "the local backend writes in batch; drop stream=True",
    "hudi_precombine_key": "local groups are Delta tables, deduplicated on primary key + "
                           "event_time; drop hudi_precombine_key=",
    "time_travel_format": "local groups are always Delta tables; pass None or 'DELTA'",
}


def _refuse_ignored(name: str, call: str, **options: Any) -> None:
    """Refuse options the local backend would otherwise accept and silently ignore."""
    for option, value in options.items():
        if option == "time_travel_format":
            given = value is not None and str(value).upper() != "DELTA"
        elif option in ("online_enabled", "stream"):
            given = bool(value)
        else:
            given = value is not None
        if given:
            raise InvalidArgumentError(
                f"{call}('{name}'): {option}={value!r} is not supported: {_IGNORED_HELP[option]}."
            )


def _clear_orphan_table(table: DeltaFeatureTable) -> None:
    """Remove a table folder that has no catalog row (a first insert killed between creating
    the folder and committing the row). Called inside the catalog write transaction, so no
    other process is creating the same group at this moment."""
    if table.path.exists():
        shutil.rmtree(table.path)
        from feature_store.local.delta_table import forget_snapshots

        forget_snapshots()
