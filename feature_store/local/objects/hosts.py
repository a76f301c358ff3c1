"""What the local backend's objects need of each other, as protocols.

The objects refer to one another: a feature group belongs to a store, a query reads groups, a
feature view reads a query and belongs to a store. Each module names the others here, by what
it uses of them, instead of importing them, so the objects import one way only: the store
builds groups and views, groups build queries, and nothing below imports what is above it.
:class:`~feature_store.local.objects.feature_store.FeatureStore` is the one
:class:`StoreHost`, :class:`~feature_store.local.objects.feature_group.FeatureGroup` the one
:class:`QueryGroup` (the type checker proves both where they are passed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.feature import Feature
    from feature_store.local.catalog import Catalog
    from feature_store.local.storage.writer import FeatureGroupWriter


class StoreHost(Protocol):
    """The feature store as the groups, views, logs and saved functions it holds use it."""

    root: Path
    catalog: Catalog
    sdk_objects: Any
    split_readers: Callable[[], Any] | None

    @property
    def writer(self) -> FeatureGroupWriter:
        """The write path of the store's feature groups."""
        ...

    def get_feature_group(self, name: str, version: int | None = None) -> Any:
        """An existing feature group version."""
        ...

    def get_or_create_feature_group(self, name: str, version: int | None = None,
                                    **options: Any) -> Any:
        """The feature group if it exists, else a new, lazily created one."""
        ...

    def spine_group_of(self, name: str, version: int) -> Any:
        """A recorded spine group, without rows."""
        ...

    def feature_views_reading(self, name: str, version: int) -> list[str]:
        """The feature views whose query reads group ``name`` v``version``."""
        ...

    def builtin_transformation_functions(self) -> list[Any]:
        """The SDK's built-in transformation functions."""
        ...


class QueryGroup(Protocol):
    """A feature group as a query reads it: identity, keys, features and its table."""

    name: str
    version: int
    primary_key: list[str]
    event_time: str | None
    partition_key: list[str]

    @property
    def owner(self) -> str:
        """How error messages name the group."""
        ...

    @property
    def features(self) -> list[Feature]:
        """The group's features (columns)."""
        ...

    @property
    def upsert_key(self) -> list[str]:
        """The columns that identify a row."""
        ...

    @property
    def table_path(self) -> Path:
        """Where the group's Delta table is."""
        ...

    def get_feature(self, name: str) -> Feature:
        """The feature called ``name``."""
        ...
