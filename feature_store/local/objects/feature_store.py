"""The local feature store (mirrors ``hsfs.feature_store.FeatureStore``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.feature import Feature
from feature_store.local.catalog import dumps, loads, open_catalog
from feature_store.local.objects.feature_group import FeatureGroup
from feature_store.local.objects.feature_view_operations import FeatureViewOperations
from feature_store.local.objects.sdk_conventions import refuse_unsupported, warn_default_version
from feature_store.local.objects.spine_group import SpineGroup
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
    from feature_store.local.storage.writer import FeatureGroupWriter


class FeatureStore(FeatureViewOperations):
    """Feature groups, feature views and training datasets of one local project."""

    #: the fstrain extensions this backend accepts (the Hopsworks adapter refuses them by name)
    FSTRAIN_EXTENSIONS: frozenset[str] = frozenset({"ingestion_time"})

    def __init__(self, root: Path, project_name: str = "fstrain", sdk_objects: Any = None,
                 split_readers: Callable[[], Any] | None = None) -> None:
        self.root = root
        # the Hopsworks SDK's object factories (fstrain.sdk_objects), wired in by login()
        self.sdk_objects = sdk_objects
        # loads the trainers' torch and Ray readers of split files, wired in by login()
        self.split_readers = split_readers
        self.project_name = project_name
        self.name = f"{project_name}_featurestore"
        # the catalog repository (package-internal: entities of this backend use its methods)
        self.catalog = open_catalog(root)

    def __repr__(self) -> str:
        return f"FeatureStore(root='{self.root}')"

    @cached_property
    def writer(self) -> FeatureGroupWriter:
        """The write path of this store's feature groups (package-internal: used by
        :class:`FeatureGroup`; users call ``fg.insert``)."""
        from feature_store.local.storage.writer import FeatureGroupWriter

        return FeatureGroupWriter(self.catalog)

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
        time_travel_format: str | None = None,
        call: str = "create_feature_group",
        ingestion_time: str | None = None,
        online_enabled: bool = False,
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
        known = _ingestion_time(owner, ingestion_time, pk, et)
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
            ingestion_time=known,
            online_enabled=_online_enabled(owner, online_enabled),
        )
        if expectation_suite is not None:
            fg.save_expectation_suite(
                expectation_suite, validation_ingestion_policy=validation_ingestion_policy
            )
        if time_travel_format is not None and str(time_travel_format).upper() == "HUDI":
            warnings.warn(
                f"{call}('{name}', version={version}): time_travel_format='HUDI' is stored as a "
                "Delta table on the local backend (upserts, commits and time travel as on a "
                "cluster's Delta groups); the group reports time_travel_format='DELTA'.",
                UserWarning,
                stacklevel=3,
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
        ingestion_time: str | None = None,
        **unsupported: Any,
    ) -> FeatureGroup:
        """Create a new feature group version (lazily: it is persisted by the first insert).

        ``version=None`` takes the next free version. An existing name+version raises
        :class:`~fstrain.kernel.errors.AlreadyExistsError`. Groups are Delta tables:
        ``time_travel_format`` may be None, ``"DELTA"`` or ``"HUDI"`` (stored as Delta, with one
        warning per creation); ``"ICEBERG"`` is refused. ``ingestion_time`` (an fstrain
        extension, like Feast's created timestamp) names a timestamp column saying when each
        row became known, for history loaded after the fact: an as-known join then reads it
        instead of the commit time (docs/concepts/joins.md).
        """
        refuse_unsupported(unsupported, "create_feature_group")
        _refuse_ignored(name, "create_feature_group", features=features,
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
            time_travel_format, "create_feature_group", ingestion_time, online_enabled,
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
        ingestion_time: str | None = None,
        **unsupported: Any,
    ) -> FeatureGroup:
        """Return the feature group if it exists (arguments are then ignored, as in Hopsworks),
        else a new, lazily created one (``time_travel_format="HUDI"`` warns, as on
        :meth:`create_feature_group`, only when the group is new)."""
        refuse_unsupported(unsupported, "get_or_create_feature_group")
        _refuse_ignored(name, "get_or_create_feature_group", features=features,
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
            time_travel_format, "get_or_create_feature_group", ingestion_time, online_enabled,
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

    # -- spine groups ------------------------------------------------------------------------

    def get_or_create_spine_group(
        self,
        name: str,
        version: int | None = None,
        description: str | None = "",
        primary_key: list[str] | None = None,
        foreign_key: list[str] | None = None,
        event_time: str | None = None,
        features: list[Feature] | None = None,
        dataframe: Any = None,
    ) -> SpineGroup:
        """The spine group ``name`` v``version`` with ``dataframe`` as its rows (an existing
        group keeps its keys and columns, as in Hopsworks, and the dataframe must have them);
        else a new one whose columns are the dataframe's. ``version=None`` means 1.

        The rows are checked before anything is recorded (primary key and event time present
        and complete, event time a timestamp, date or epoch milliseconds); they are never
        stored in the catalog, only with the training datasets built from them.
        """
        version = 1 if version is None else version
        check_entity_name(name, "spine group")
        check_version(version, "spine group", name)
        row = self.catalog.spine_group_row(name, version)
        if row is not None:
            spine = self._spine_from_row(row)
            spine.dataframe = dataframe
            return spine
        return self._new_spine_group(name, version, description or "", primary_key, foreign_key,
                                     event_time, features, dataframe)

    def _new_spine_group(self, name: str, version: int, description: str,
                         primary_key: list[str] | None, foreign_key: list[str] | None,
                         event_time: str | None, features: list[Feature] | None,
                         dataframe: Any) -> SpineGroup:
        owner = f"spine group '{name}' v{version}"
        if features is not None:
            raise InvalidArgumentError(
                f"get_or_create_spine_group('{name}'): features={features!r} is not supported: "
                "the columns are taken from the dataframe; drop features= and pass dataframe=."
            )
        if dataframe is None:
            raise InvalidArgumentError(
                f"{owner}: a new spine group takes its columns from a dataframe; pass "
                "dataframe= with the primary key, event time and label columns."
            )
        if self._fg_names() and name in self._fg_names():
            raise AlreadyExistsError(
                f"{owner}: a feature group is called '{name}' (feature groups and spine groups "
                "share their names, as in Hopsworks). Pick another name."
            )
        if isinstance(primary_key, str):
            primary_key = [primary_key]
        if not primary_key:
            raise InvalidArgumentError(
                f"{owner}: primary_key must name at least one column (the spine's rows are "
                f"joined and ordered by it). Got {primary_key!r} instead."
            )
        pk = [normalize_feature_name(c, owner=owner) for c in primary_key]
        et = normalize_feature_name(event_time, owner=owner) if event_time else None
        spine = SpineGroup.from_rows(
            self, name, version, primary_key=pk, event_time=et, dataframe=dataframe,
            foreign_key=[normalize_feature_name(c, owner=owner) for c in foreign_key or []])
        columns = spine.features  # checked before anything is recorded
        spine.id, inserted = self.catalog.insert_spine_group({
            "name": name, "version": version, "description": description,
            "primary_key": dumps(pk), "foreign_key": dumps(spine.foreign_key),
            "event_time": et, "features": dumps([f.to_dict() for f in columns]),
            "created_at": utc_now().isoformat()})
        if not inserted:  # another process recorded it meanwhile: its columns hold
            return self.get_or_create_spine_group(name, version, dataframe=dataframe)
        return spine

    def spine_group_of(self, name: str, version: int) -> SpineGroup:
        """A recorded spine group, without rows (package-internal: stored queries rooted at a
        spine are rebuilt with it)."""
        row = self.catalog.spine_group_row(name, version)
        if row is None:
            raise NotFoundError(f"spine group '{name}' v{version} does not exist.")
        return self._spine_from_row(row)

    def _spine_from_row(self, row: Any) -> SpineGroup:
        return SpineGroup(self, row["name"], row["version"],
                          primary_key=loads(row["primary_key"]), event_time=row["event_time"],
                          description=row["description"], foreign_key=loads(row["foreign_key"]),
                          features=[Feature(**f) for f in loads(row["features"])],
                          sg_id=row["id"])

    def _versions(self, name: str) -> list[int]:
        return self.catalog.feature_group_versions(name)

    def _fg_names(self) -> list[str]:
        return self.catalog.feature_group_names()

    def _fg_row(self, name: str, version: int) -> Any:
        return self.catalog.feature_group_row(name, version)

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
            ingestion_time=row["ingestion_time"],
            online_enabled=bool(row["online_enabled"]),
        )


def _ingestion_time(owner: str, column: str | None, primary_key: list[str],
                    event_time: str | None) -> str | None:
    """The ``ingestion_time`` column of a new group, checked: a column name of its own, and
    only on a group with an event time (an as-known join needs one)."""
    if column is None:
        return None
    if not isinstance(column, str) or not column:
        raise InvalidArgumentError(
            f"{owner}: ingestion_time must name a timestamp column (when each row became "
            f"known). Got {column!r} instead."
        )
    name = normalize_feature_name(column, owner=owner)
    if event_time is None:
        raise InvalidArgumentError(
            f"{owner}: ingestion_time='{name}' needs an event_time (it says when a row of an "
            "event became known, for as-known point-in-time joins). Pass event_time= or drop "
            "ingestion_time."
        )
    if name == event_time or name in primary_key:
        role = "event_time" if name == event_time else "primary key"
        raise InvalidArgumentError(
            f"{owner}: ingestion_time='{name}' is also the group's {role}; it must be a "
            "column of its own (when the row became known, not which event it is)."
        )
    return name


def _online_enabled(owner: str, value: Any) -> bool:
    """``online_enabled`` as the SDK takes it (a bool): an online-enabled group is served by
    ``FeatureView.get_feature_vector(s)`` from its latest row per primary key."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(
            f"{owner}: online_enabled must be True or False. Got {value!r} instead."
        )
    return value


_IGNORED_HELP = {
    "features": "the schema is taken from the first insert; drop features= and insert a "
                "DataFrame with those columns",
    "embedding_index": "the local backend has no vector index; drop embedding_index=",
    "stream": "the local backend writes in batch; drop stream=True",
    "hudi_precombine_key": "local groups are Delta tables, deduplicated on primary key + "
                           "event_time; drop hudi_precombine_key=",
    "time_travel_format": "local groups are always Delta tables; pass None, 'DELTA' or 'HUDI' "
                          "(stored as Delta)",
}


#: time_travel_format values a local group takes: it is a Delta table either way (HUDI warns)
_TIME_TRAVEL_FORMATS = ("DELTA", "HUDI")


def _refuse_ignored(name: str, call: str, **options: Any) -> None:
    """Refuse options the local backend would otherwise accept and silently ignore."""
    for option, value in options.items():
        if option == "time_travel_format":
            given = value is not None and str(value).upper() not in _TIME_TRAVEL_FORMATS
        elif option == "stream":
            given = bool(value)
        else:
            given = value is not None
        if given:
            raise InvalidArgumentError(
                f"{call}('{name}'): {option}={value!r} is not supported: {_IGNORED_HELP[option]}."
            )
