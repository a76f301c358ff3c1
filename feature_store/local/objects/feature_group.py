"""Feature groups of the local backend (mirrors ``hsfs.feature_group.FeatureGroup``).

A feature group is a Delta Lake table plus its catalog entry. ``insert`` upserts on
primary key + event_time (+ partition key): a new event_time for a known key adds history, the
same key and event_time replaces the row. Each insert is one atomic Delta commit, and the
commit id is the Delta table version.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.core.expectations import (
    ValidationReport,
    check_suite,
    normalize_policy,
    suite_to_dict,
)
from feature_store.feature import Feature, FilterLike
from feature_store.local.objects.query import Query
from feature_store.local.objects.tags import TaggedEntity
from feature_store.local.storage import group_storage
from feature_store.local.storage.options import check_options, check_write_options
from fstrain.kernel.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    UnknownFeatureError,
    did_you_mean,
)
from fstrain.kernel.names import check_entity_name
from fstrain.kernel.scratch import VACUUM_AFTER_S
from fstrain.kernel.timeutil import required_utc, utc_now

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from feature_store.core.expectations import ValidationReport
    from feature_store.local.objects.hosts import StoreHost
    from feature_store.local.storage.delta_table import DeltaFeatureTable

class FeatureGroup(TaggedEntity):
    """A versioned feature group stored as a Delta Lake table."""

    _TAG_KIND = "fg"

    def __init__(
        self,
        store: StoreHost,
        name: str,
        version: int,
        *,
        primary_key: list[str],
        event_time: str | None = None,
        description: str = "",
        partition_key: list[str] | None = None,
        foreign_key: list[str] | None = None,
        statistics_config: bool | dict[str, Any] | None = None,
        expectation_suite: dict[str, Any] | None = None,
        ingestion_policy: str = "ALWAYS",
        features: list[Feature] | None = None,
        fg_id: int | None = None,
        initial_tags: dict[str, Any] | None = None,
        ingestion_time: str | None = None,
        online_enabled: bool = False,
    ) -> None:
        self._store = store
        self.name = name
        self.version = version
        self.primary_key = list(primary_key)
        self.event_time = event_time
        #: the column saying when a row became known (an fstrain extension, like Feast's
        #: created timestamp); None: when its commit was written
        self.ingestion_time = ingestion_time
        self.description = description
        self.partition_key = list(partition_key or [])
        self.foreign_key = list(foreign_key or [])
        self.statistics_config = _statistics_config(statistics_config)
        self._expectation_suite = expectation_suite
        self._ingestion_policy = ingestion_policy
        self._features = features or []
        self.id = fg_id
        self._initial_tags = dict(initial_tags or {})
        # served by FeatureView.get_feature_vector(s) (the latest row per primary key)
        self.online_enabled = bool(online_enabled)
        for f in self._features:
            f.feature_group = self

    # -- identity ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"FeatureGroup({self.name!r}, {self.version}, primary_key={self.primary_key}, event_time={self.event_time!r})"

    @property
    def owner(self) -> str:
        """How error messages name this feature group."""
        return f"feature group '{self.name}' v{self.version}"

    @property
    def feature_store(self) -> StoreHost:
        """The feature store holding this group."""
        return self._store

    @property
    def features(self) -> list[Feature]:
        """The features (columns) of the group; empty until the first insert."""
        return list(self._features)

    @property
    def schema(self) -> list[Feature]:
        return self.features

    @property
    def location(self) -> str:
        return str(self._table.path)

    @property
    def time_travel_format(self) -> str:
        """What the group is stored as: always ``"DELTA"`` locally (a group created with
        ``time_travel_format="HUDI"`` is a Delta table too, and says so)."""
        return "DELTA"

    @property
    def upsert_key(self) -> list[str]:
        """Columns that identify a row: primary key + event_time + partition key."""
        key = list(self.primary_key)
        if self.event_time and self.event_time not in key:
            key.append(self.event_time)
        key += [p for p in self.partition_key if p not in key]
        return key

    @property
    def table_path(self) -> Path:
        """Where the Delta table of this group version is."""
        return Path(self._store.root) / "tables" / f"{self.name}_{self.version}"

    @property
    def delta_table(self) -> DeltaFeatureTable:
        """The Delta table holding this group version (its writes and history)."""
        from feature_store.local.storage.delta_table import DeltaFeatureTable

        return DeltaFeatureTable(self.table_path, self.owner)

    @property
    def _table(self) -> DeltaFeatureTable:
        return self.delta_table

    def require_saved(self) -> int:
        """The group's catalog id (raises :class:`NotFoundError` before its first insert)."""
        if self.id is None:
            raise NotFoundError(
                f"{self.owner} has no data yet: it is created by its first insert()."
            )
        return self.id

    def get_feature(self, name: str) -> Feature:
        """The :class:`Feature` called ``name`` (raises with a suggestion if unknown)."""
        for f in self._features:
            if f.name == name:
                return f
        names = [f.name for f in self._features]
        raise NotFoundError(
            f"{self.owner} has no feature '{name}' (features: {names}).{did_you_mean(name, names)}"
        )

    def __getitem__(self, name: str) -> Feature:
        return self.get_feature(name)

    def __getattr__(self, name: str) -> Feature:
        if name.startswith("_"):
            raise AttributeError(name)
        for f in self.__dict__.get("_features", []):
            if f.name == name:
                return f
        names = [f.name for f in self.__dict__.get("_features", [])]
        raise UnknownFeatureError(
            f"{self.owner if 'name' in self.__dict__ else type(self).__name__} has no attribute "
            f"or feature '{name}' (features: {names}).{did_you_mean(name, names)}"
        )

    # -- writing -----------------------------------------------------------------------------

    def insert(
        self,
        features: Any,
        overwrite: bool = False,
        operation: str = "upsert",
        storage: str | None = None,
        write_options: dict[str, Any] | None = None,
        validation_options: dict[str, Any] | None = None,
        wait: bool = False,
    ) -> tuple[None, ValidationReport | None]:
        """Upsert a pandas DataFrame or Arrow table as one atomic commit.

        Returns ``(None, report)`` like Hopsworks' ``(job, report)``: there is no job on the
        local backend; ``report`` is ``None`` when no expectation suite ran. Bad data raises a
        :class:`~fstrain.kernel.errors.FeatureStoreError` subclass and writes nothing.
        ``wait`` and ``write_options={"wait_for_job": ...}`` are honoured by construction (the
        commit has finished when the call returns); any other ``write_options`` key is refused
        by name (see :mod:`feature_store.local.storage.options`).
        """
        check_write_options(self.owner, write_options)
        return self._store.writer.insert(
            self,
            features,
            overwrite=overwrite,
            operation=operation,
            storage=storage,
            validation_options=validation_options or {},
        )

    def multi_part_insert(self, features: Any = None, **kwargs: Any) -> tuple[None, Any]:
        """Same as :meth:`insert` on the local backend (there is no Kafka buffer to flush)."""
        return self.insert(features, **kwargs)

    def remove_rows(self, delete_df: Any, write_options: dict[str, Any] | None = None) -> int:
        """Delete the rows matching ``delete_df`` on primary key (+ event_time, partition key).

        Returns the commit id of the delete. ``write_options`` as for :meth:`insert`.
        """
        check_write_options(self.owner, write_options)
        return self._store.writer.remove_rows(self, delete_df)

    def append_features(self, features: Feature | list[Feature]) -> FeatureGroup:
        """Add new nullable columns (schema evolution: columns can only be added)."""
        self._store.writer.append_features(self, features)
        return self

    def update_description(self, description: str) -> FeatureGroup:
        """Change the group's description."""
        fg_id = self.require_saved()
        self._store.catalog.set_feature_group_description(fg_id, description)
        self.description = description
        return self

    def vacuum(self, retention_hours: int = 0, dry_run: bool = False) -> list[str]:
        """Delete data files that no kept commit needs; returns the removed (or, with
        ``dry_run``, removable) files.

        Kept: the latest commit, every commit pinned by a training-dataset version of any
        feature view (so those versions still re-read bit for bit), and commits younger than
        ``retention_hours``. Time travel to any other commit fails afterwards. Staging folders
        of training-dataset creates older than a day (whatever host wrote them: killed
        creates) go too, and spine tables (``spines/``) no training-dataset version records,
        unused for a day (batch reads' spines), listed by their path under the store.
        """
        self.require_saved()
        if retention_hours < 0:
            raise InvalidArgumentError(
                f"{self.owner}: retention_hours must be >= 0. Got {retention_hours!r} instead."
            )
        pinned = group_storage.pinned_commits(self._store.catalog, self.name, self.version)
        table = self._table
        with table.write_lock():
            removed = table.vacuum(pinned, retention_hours=int(retention_hours), dry_run=dry_run)
        from feature_store.local.storage import spine_table
        from feature_store.local.training_data.store import clean_stale_staging

        root = Path(self._store.root)
        stale = clean_stale_staging(root / "training_datasets", older_than_s=VACUUM_AFTER_S,
                                    dry_run=dry_run)
        versions = self._store.catalog.all_training_dataset_metadata()
        recorded = {str(spine["sha256"]) for md in versions
                    if (spine := (md.get("extra") or {}).get("spine"))}
        spines = spine_table.remove_unused(root, recorded, VACUUM_AFTER_S, dry_run)
        return [*removed, *(str(p.relative_to(root)) for p in [*stale, *spines])]

    def update_feature_description(self, feature_name: str, description: str) -> FeatureGroup:
        """Set the description of one feature."""
        return self.update_feature_descriptions({feature_name: description})

    def update_feature_descriptions(self, descriptions: dict[str, str]) -> FeatureGroup:
        """Set the descriptions of several features at once."""
        self.require_saved()
        for name in descriptions:
            self.get_feature(name)
        self.refresh_features(dict(descriptions))
        return self

    def delete(self, force: bool = False) -> None:
        """Drop the feature group: its table, metadata, tags, reports and statistics.

        Refused while a feature view reads the group (the error names the views) unless
        ``force=True``, which leaves those views unreadable.
        """
        views = self._store.feature_views_reading(self.name, self.version)
        group_storage.drop(self._store.catalog, self, force=force, views=views)
        self.id = None

    # -- reading -----------------------------------------------------------------------------

    def select_all(
        self,
        include_primary_key: bool = True,
        include_foreign_key: bool = True,
        include_partition_key: bool = True,
        include_event_time: bool = True,
    ) -> Query:
        """A query selecting every feature (keys and event time included unless excluded)."""
        self.require_saved()
        names = []
        for f in self._features:
            if f.name in self.primary_key and not include_primary_key:
                continue
            if f.name in self.foreign_key and not include_foreign_key:
                continue
            if f.name in self.partition_key and not include_partition_key:
                continue
            if f.name == self.event_time and not include_event_time:
                continue
            names.append(f.name)
        return Query(self, names)

    def select_features(self) -> Query:
        """All features except primary key, foreign key, partition key and event time."""
        return self.select_all(False, False, False, False)

    def select(self, features: list[str | Feature]) -> Query:
        """A query selecting the given features (names or :class:`Feature` objects; one name or
        feature alone, as the SDK takes it too)."""
        self.require_saved()
        if isinstance(features, str | Feature):
            features = [features]
        names = [f.name if isinstance(f, Feature) else f for f in features]
        for n in names:
            self.get_feature(n)
        return Query(self, names)

    def select_except(self, features: str | Feature | list[str | Feature] | None = None) -> Query:
        """All features except the given ones (one name or :class:`Feature`, or a list)."""
        if isinstance(features, (str, Feature)):
            features = [features]
        drop = {f.name if isinstance(f, Feature) else f for f in features or []}
        for n in drop:
            self.get_feature(n)
        return self.select([f.name for f in self._features if f.name not in drop])

    def filter(self, f: FilterLike) -> Query:
        """Shorthand for ``select_all().filter(f)``."""
        return self.select_all().filter(f)

    def read(
        self,
        wallclock_time: Any = None,
        online: bool = False,
        dataframe_type: str = "default",
        read_options: dict[str, Any] | None = None,
        start_time: Any = None,
        end_time: Any = None,
    ) -> Any:
        """Read the group (as of ``wallclock_time`` if given), optionally an event-time window.

        ``start_time``/``end_time`` bound the event time half-open, ``[start, end)``. When both
        are omitted, ``HOPS_START_TIME``/``HOPS_END_TIME`` from the environment are used (the
        Hopsworks 5 scheduled-job contract).
        """
        if online:
            raise InvalidArgumentError(
                f"{self.owner}: read(online=True) needs an online store; the local backend has "
                "only the offline store. Use online=False."
            )
        check_options(self.owner, "read_options", read_options, {})
        query = self.select_all()
        if wallclock_time is not None:
            query = query.as_of(wallclock_time)
        return query.read(
            dataframe_type=dataframe_type, start_time=start_time, end_time=end_time
        )

    def show(self, n: int) -> Any:
        """The first ``n`` rows as pandas."""
        return self.select_all().show(n)

    def as_of(
        self, wallclock_time: Any = None, exclude_until: Any = None, *, commit_id: int | None = None
    ) -> Query:
        """A query reading the group as it was at ``wallclock_time`` (time travel).

        ``wallclock_time`` is a time (ISO string, datetime, epoch ms); ``commit_id`` (a key of
        :meth:`commit_details`) pins an exact commit instead. ``exclude_until`` makes it an
        incremental read of the rows changed by commits after ``exclude_until`` and at or
        before ``wallclock_time`` (see :meth:`Query.as_of
        <feature_store.local.objects.query.Query.as_of>` for what is returned).
        """
        return self.select_all().as_of(wallclock_time, exclude_until, commit_id=commit_id)

    def commit_details(
        self, wallclock_time: Any = None, limit: int | None = None
    ) -> dict[int, dict[str, Any]]:
        """``{commit_id: {committedOn, rowsInserted, rowsUpdated, rowsDeleted}}``, newest first."""
        self.require_saved()
        commits = self._table.history()
        if wallclock_time is not None:
            cutoff = required_utc(wallclock_time, what="wallclock_time")
            commits = [c for c in commits if c.timestamp_ms <= cutoff.value // 1_000_000]
        if limit is not None:
            commits = commits[:limit]
        return {
            c.commit_id: {
                "committedOn": c.committed_on,
                "rowsInserted": c.rows_inserted,
                "rowsUpdated": c.rows_updated,
                "rowsDeleted": c.rows_deleted,
                "operation": c.operation,
            }
            for c in commits
        }

    def latest_commit_id(self) -> int:
        """The current commit id (Delta version) of the group."""
        self.require_saved()
        return self._table.version()

    # -- tags --------------------------------------------------------------------------------

    def get_tags(self) -> dict[str, Any]:
        """All tags of the group (before the first insert: those given at creation)."""
        if self.id is None:
            return dict(self._initial_tags)
        return super().get_tags()

    def add_feature_tag(self, feature: str, name: str, value: Any) -> None:
        """Attach a tag to one feature, e.g. ``fg.add_feature_tag("sex", "pii", True)``."""
        self.get_feature(feature)
        self._store.catalog.set_tag("fg", self.require_saved(), feature, _tag_name(name), value)

    def get_feature_tags(self, feature: str) -> dict[str, Any]:
        """All tags of one feature."""
        self.get_feature(feature)
        return self._store.catalog.get_tags("fg", self.require_saved(), feature)

    def get_all_feature_tags(self) -> dict[str, dict[str, Any]]:
        """``{feature: {tag: value}}`` for every tagged feature."""
        return self._store.catalog.all_feature_tags("fg", self.require_saved())

    def delete_feature_tag(self, feature: str, name: str) -> None:
        """Remove one tag from one feature."""
        if not self._store.catalog.delete_tag("fg", self.require_saved(), feature, name):
            raise NotFoundError(f"{self.owner}: feature '{feature}' has no tag '{name}'.")

    # -- statistics --------------------------------------------------------------------------

    def compute_statistics(self, commit_id: int | None = None) -> dict[str, Any]:
        """Compute (and store) statistics of the group at ``commit_id`` (default: latest)."""
        return group_storage.statistics(self._store.catalog, self, commit_id, recompute=True)

    def update_statistics_config(self) -> FeatureGroup:
        """Persist the group's current ``statistics_config`` (after assigning it), as Hopsworks.

        ``fg.statistics_config = {"enabled": True, "histograms": True}`` then
        ``fg.update_statistics_config()``; the value is validated and stored in the catalog.
        """
        self.statistics_config = _statistics_config(self.statistics_config)
        self._store.catalog.set_statistics_config(self.require_saved(), self.statistics_config)
        return self

    def get_statistics(
        self, computation_time: Any = None, feature_names: list[str] | None = None,
        commit_id: int | None = None,
    ) -> dict[str, Any]:
        """Statistics at a commit (latest by default, or the commit at ``computation_time``)."""
        if computation_time is not None and commit_id is None:
            commit_id = self._table.version_at(
                required_utc(computation_time, what="computation_time").value // 1_000_000
            )
        stats = group_storage.statistics(self._store.catalog, self, commit_id, recompute=False)
        if feature_names:
            stats = {**stats, "features": [f for f in stats["features"] if f["feature"] in feature_names]}
        return stats

    def get_all_statistics(self) -> list[dict[str, Any]]:
        """Every stored statistics entry, oldest first."""
        return self._store.catalog.all_statistics(self.require_saved())

    # -- expectation suites and validation reports -------------------------------------------

    @property
    def expectation_suite(self) -> dict[str, Any] | None:
        """The attached suite as a dict, or ``None``."""
        return self._expectation_suite

    def save_expectation_suite(
        self,
        expectation_suite: Any,
        run_validation: bool = True,
        validation_ingestion_policy: str = "always",
        overwrite: bool = False,
    ) -> dict[str, Any]:
        """Attach a Great Expectations suite; every later insert is validated against it."""
        policy = normalize_policy(validation_ingestion_policy)
        data = suite_to_dict(expectation_suite, default_name=f"{self.name}_v{self.version}_suite")
        data["run_validation"] = bool(run_validation)
        check_suite(data, [f.name for f in self._features] or None, self.owner)
        if self._expectation_suite is not None and not overwrite:
            raise AlreadyExistsError(
                f"{self.owner} already has expectation suite '{self._expectation_suite['name']}'. "
                "Pass overwrite=True to replace it."
            )
        self._expectation_suite, self._ingestion_policy = data, policy
        if self.id is not None:
            self._store.catalog.set_expectation_suite(self.id, data, policy)
        return data

    def get_expectation_suite(self) -> dict[str, Any] | None:
        """The attached suite (dict form) or ``None``."""
        return self._expectation_suite

    def delete_expectation_suite(self) -> None:
        """Detach the suite; inserts are no longer validated."""
        self._expectation_suite = None
        if self.id is not None:
            self._store.catalog.clear_expectation_suite(self.id)

    @property
    def validation_ingestion_policy(self) -> str:
        return self._ingestion_policy

    def get_validation_reports(self, ingestion_result: str | None = None) -> list[ValidationReport]:
        """Stored validation reports, newest first (optionally only INGESTED or REJECTED)."""
        rows = self._store.catalog.validation_reports(self.require_saved())
        return [
            ValidationReport.from_dict(report)
            for report, result in rows
            if ingestion_result is None or result == ingestion_result.upper()
        ]

    def get_latest_validation_report(self) -> ValidationReport | None:
        """The newest validation report, or ``None``."""
        reports = self.get_validation_reports()
        return reports[0] if reports else None

    # -- persistence, package-internal (the writer's first insert, schema evolution) ---------

    #: what decides how a group's rows are keyed, timed and read: a handle may bind to a group
    #: created meanwhile only if it declares the same
    DEFINING = ("primary_key", "event_time", "ingestion_time", "partition_key", "foreign_key")

    def adopt_existing(self) -> None:
        """If another handle or process created this group meanwhile, bind to it (its id,
        features and, unless this handle has one, its expectation suite). A handle that
        declares other keys or times is refused: its rows would be written under the other
        handle's definition."""
        if self._store.catalog.feature_group_row(self.name, self.version) is None:
            return
        current = self._store.get_feature_group(self.name, self.version)
        differ = {name: (getattr(self, name), getattr(current, name)) for name in self.DEFINING
                  if getattr(self, name) != getattr(current, name)}
        if differ:
            listed = "; ".join(f"{name}={mine!r} here, {theirs!r} there"
                               for name, (mine, theirs) in differ.items())
            raise InvalidArgumentError(
                f"{self.owner} was created meanwhile by another handle or process with another "
                f"definition ({listed}). Nothing was written. Get it with "
                f"fs.get_feature_group({self.name!r}, {self.version}), or create another "
                "version.")
        self.id = current.id
        self._features = current.features
        if self._expectation_suite is None:
            self._expectation_suite = current.expectation_suite
            self._ingestion_policy = current.validation_ingestion_policy

    def create_metadata(self, schema: pa.Schema) -> None:
        """Persist this new group (catalog row + empty Delta table with ``schema``); called by
        the writer on the first insert, after every check passed."""
        created = group_storage.insert(self._store.catalog, self, schema)
        if created is None:
            self.adopt_existing()
            return
        self.id, features = created
        self._bind_features(features)

    def refresh_features(self, descriptions: dict[str, str] | None = None) -> None:
        """Re-read the features from the Delta schema (after columns were added) and store
        them, with ``descriptions`` overriding the known ones."""
        self._bind_features(group_storage.store_features(self._store.catalog, self, descriptions))

    def _bind_features(self, features: list[Feature]) -> None:
        self._features = features
        for f in features:
            f.feature_group = self


def _tag_name(name: str) -> str:

    return check_entity_name(name, "tag")


def _statistics_config(config: bool | dict[str, Any] | None) -> dict[str, Any]:
    if config is None or config is True:
        return {"enabled": True}
    if config is False:
        return {"enabled": False}
    if type(config).__name__ == "StatisticsConfig" and hasattr(config, "exact_uniqueness"):
        config = {k: getattr(config, k) for k in
                  ("enabled", "correlations", "histograms", "exact_uniqueness", "columns")}
    if isinstance(config, dict):
        unknown = set(config) - {"enabled", "correlations", "histograms", "exact_uniqueness", "columns"}
        if unknown:
            raise InvalidArgumentError(
                f"statistics_config keys must be among enabled/correlations/histograms/"
                f"exact_uniqueness/columns. Got {sorted(unknown)} instead."
            )
        return {"enabled": bool(config.get("enabled", True)), **config}
    raise InvalidArgumentError(
        f"statistics_config must be a bool or a dict. Got {config!r} instead."
    )


__all__ = ["FeatureGroup", "convert_result", "utc_now"]
