"""The feature-store contract: protocols both backends implement, and the value types they share.

``feature_store/local`` (Delta Lake + DuckDB) and ``feature_store/hopsworks`` (the SDK adapter)
each provide a :class:`Project`, :class:`FeatureStore`, :class:`FeatureGroup`, :class:`Query` and
:class:`FeatureView`; pipelines and use-case views are written against these protocols only. The
protocols name what the pipelines rely on (a faithful subset of the Hopsworks Python API); a
backend may offer more. ``tests/typing/conformance.py`` makes the type checker prove that both
backends satisfy them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "FeatureGroup",
    "FeatureStore",
    "FeatureView",
    "ModelRegistryHandle",
    "Project",
    "Query",
    "TrainingDataset",
]


@dataclass
class TrainingDataset:
    """Metadata of one training-dataset version (what is stored for reproducibility)."""

    version: int
    feature_view_name: str
    feature_view_version: int
    type: str  # "IN_MEMORY" or "MATERIALIZED"
    data_format: str | None
    state: str  # "ok" or "purged"
    description: str
    seed: int
    split_spec: dict[str, Any]
    splits: dict[str, dict[str, Any]]
    event_start_time: str | None
    event_end_time: str | None
    extra_filter: dict[str, Any] | None
    feature_group_commits: dict[str, int]
    query_sql: str
    columns: list[dict[str, str]]
    root_columns: dict[str, str]
    transformation_statistics: dict[str, Any]
    created_at: str
    location: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    content_hash: str | None = None  # the algorithm of the splits' sha256 (None: before v2)

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able metadata (lineage for the model registry)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingDataset:
        # the catalog stores JSON with sorted keys: restore the canonical split order
        order = {"train": 0, "validation": 1, "test": 2}
        splits = dict(sorted(data["splits"].items(), key=lambda kv: order.get(kv[0], 3)))
        return cls(**{**data, "splits": splits})


class Query(Protocol):
    """A selection of features from one root group, with joins (``hsfs.constructor.query.Query``)."""

    def join(self, sub_query: Any, on: list[str] | None = None, left_on: list[str] | None = None,
             right_on: list[str] | None = None, join_type: str = "left",
             prefix: str | None = None) -> Query: ...

    def filter(self, f: Any) -> Query: ...

    def read(self, online: bool = False, dataframe_type: str = "default",
             read_options: dict[str, Any] | None = None) -> Any: ...

    def to_string(self) -> str: ...

    @property
    def features(self) -> list[Any]: ...


class FeatureGroup(Protocol):
    """A versioned table of features with a primary key and optional event time."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def primary_key(self) -> list[str]: ...

    @property
    def event_time(self) -> str | None: ...

    @property
    def features(self) -> list[Any]: ...

    def insert(self, features: Any, overwrite: bool = False, operation: str = "upsert",
               storage: str | None = None, write_options: dict[str, Any] | None = None,
               validation_options: dict[str, Any] | None = None, wait: bool = False) -> Any: ...

    def read(self, wallclock_time: Any = None, online: bool = False,
             dataframe_type: str = "default", read_options: dict[str, Any] | None = None) -> Any: ...

    def commit_details(self, wallclock_time: Any = None, limit: int | None = None) -> Any: ...

    def latest_commit_id(self) -> int: ...

    def select_all(self) -> Query: ...

    def select(self, features: list[Any]) -> Query: ...

    def select_except(self, features: list[Any] | None = None) -> Query: ...

    def select_features(self) -> Query: ...

    def add_tag(self, name: str, value: Any) -> None: ...

    def get_tag(self, name: str) -> Any: ...

    def get_tags(self) -> dict[str, Any]: ...

    def add_feature_tag(self, feature: str, name: str, value: Any) -> None: ...

    def get_feature_tags(self, feature: str) -> dict[str, Any]: ...


class FeatureView(Protocol):
    """Features, labels and helper columns selected from a query, with training datasets."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def labels(self) -> list[str]: ...

    @property
    def training_helper_columns(self) -> list[str]: ...

    @property
    def features(self) -> list[Any]: ...

    def get_training_dataset(self, version: int) -> TrainingDataset: ...

    def get_training_datasets(self) -> list[TrainingDataset]: ...

    def streams_split_files(self, training_dataset_version: int) -> bool:
        """Whether the streamed dataframe types (``arrow_batches``, ``ray``, ``torch``) of the
        ``get_*_split`` reads hand out this version's split files on this machine. False means
        read the version as frames: a caller asks this instead of trying a streamed read."""
        ...

    def init_batch_scoring(self, training_dataset_version: int | None = None) -> None: ...


class FeatureStore(Protocol):
    """A project's feature store: feature groups and feature views by name and version."""

    def get_feature_group(self, name: str, version: int | None = None) -> Any: ...

    def get_feature_groups(self, name: str | None = None) -> list[Any]: ...

    def get_or_create_feature_view(
        self,
        name: str,
        version: int,
        query: Any,
        description: str = "",
        labels: list[str] | None = None,
        inference_helper_columns: list[str] | None = None,
        training_helper_columns: list[str] | None = None,
        transformation_functions: list[Any] | None = None,
        tags: dict[str, Any] | None = None,
        label_fill_values: dict[str, Any] | None = None,
        prohibited_tags: list[str] | None = None,
    ) -> Any: ...

    def create_feature_view(
        self,
        name: str,
        query: Any,
        version: int | None = None,
        description: str = "",
        labels: list[str] | None = None,
        inference_helper_columns: list[str] | None = None,
        training_helper_columns: list[str] | None = None,
        transformation_functions: list[Any] | None = None,
        *,
        tags: dict[str, Any] | None = None,
        label_fill_values: dict[str, Any] | None = None,
        prohibited_tags: list[str] | None = None,
    ) -> Any: ...

    def get_feature_view(self, name: str, version: int | None = None) -> Any: ...


class ModelRegistryHandle(Protocol):
    """What a project hands out as its model registry (see ``model_registry.api``)."""

    def get_model(self, name: str, version: int | None = None) -> Any: ...


@runtime_checkable
class Project(Protocol):
    """A logged-in project (``hopsworks.project.Project``): the store and registry of one backend."""

    backend: str
    name: str
    root: Path  # a local folder: the store itself (local) or a cache of downloads (Hopsworks)

    def get_feature_store(self, name: str | None = None) -> Any: ...

    def get_model_registry(self) -> Any: ...
