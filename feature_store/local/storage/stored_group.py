"""What the storage layer reads of a feature group, as a protocol.

The write path (:mod:`~feature_store.local.storage.writer`) and the group's persistence
(:mod:`~feature_store.local.storage.group_storage`) take the group object the user holds
(:class:`~feature_store.local.objects.feature_group.FeatureGroup`) without importing it: they
read its identity, keys, settings and Delta table through these members, and the write path
drives the few steps the group keeps in its own state (:class:`WritableGroup`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from feature_store.feature import Feature
    from feature_store.local.storage.delta_table import DeltaFeatureTable


class StoredGroup(Protocol):
    """A feature group as storage sees it: name, version, keys, settings and its table."""

    name: str
    version: int
    description: str
    primary_key: list[str]
    event_time: str | None
    #: the column saying when a row became known (an fstrain extension), or None: its commit
    ingestion_time: str | None
    partition_key: list[str]
    foreign_key: list[str]
    statistics_config: dict[str, Any]
    online_enabled: bool
    id: int | None

    @property
    def owner(self) -> str:
        """How error messages name the group."""
        ...

    @property
    def features(self) -> list[Feature]:
        """Its features (columns); empty before the first insert."""
        ...

    @property
    def upsert_key(self) -> list[str]:
        """The columns that identify a row."""
        ...

    @property
    def delta_table(self) -> DeltaFeatureTable:
        """The Delta table holding the group version."""
        ...

    @property
    def expectation_suite(self) -> dict[str, Any] | None:
        """The attached expectation suite as a dict, or ``None``."""
        ...

    @property
    def validation_ingestion_policy(self) -> str:
        """``ALWAYS`` or ``STRICT``."""
        ...

    def require_saved(self) -> int:
        """The group's catalog id (raises before its first insert)."""
        ...

    def get_tags(self) -> dict[str, Any]:
        """The group's tags."""
        ...


class WritableGroup(StoredGroup, Protocol):
    """A feature group as the write path drives it: bind to a group created meanwhile, create
    the metadata on the first insert, recompute statistics and features after a commit."""

    def adopt_existing(self) -> None:
        """Bind to the group if another handle or process created it meanwhile."""
        ...

    def create_metadata(self, schema: pa.Schema) -> None:
        """Persist the new group (catalog row and empty Delta table)."""
        ...

    def compute_statistics(self, commit_id: int | None = None) -> dict[str, Any]:
        """Compute and store the statistics of a commit."""
        ...

    def refresh_features(self, descriptions: dict[str, str] | None = None) -> None:
        """Re-read the features from the Delta schema and store them."""
        ...
