"""Spine groups of the local backend (mirrors ``hsfs.feature_group.SpineGroup``).

A spine group is the metadata of a label or entity dataframe: its name, version, primary key,
event time and columns are stored in the catalog, its rows are not (as in Hopsworks: the
dataframe lives on the object, ``spine_group.dataframe = df`` replaces it, and a view created
over a spine must be given one on every read through ``spine=``). It can only be the root (the
left side) of a query: ``spine.select_all().join(fg.select([...]))``, and each joined group
contributes its latest row at or before each spine row's event time (the point-in-time join).

Locally the rows are checked when they are set (keys present and complete, event time typed,
columns those the group records) and, when a query reads them, stored once as a
content-addressed Delta table (:mod:`feature_store.local.storage.spine_table`), which is what
lets a training-dataset version built from a spine re-read its rows bit for bit.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.feature import Feature
from feature_store.local.objects.query import Query
from fstrain.kernel.errors import NotFoundError, UnknownFeatureError, did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from feature_store.local.objects.hosts import StoreHost


class SpineGroup:
    """A spine group: metadata in the catalog, rows on the object (``dataframe``)."""

    #: what queries and stored views check to tell a spine from a feature group
    spine = True

    def __init__(
        self, store: StoreHost, name: str, version: int, *, primary_key: list[str],
        event_time: str | None, description: str = "", foreign_key: list[str] | None = None,
        features: list[Feature] | None = None, sg_id: int | None = None,
    ) -> None:
        self._store = store
        self.name = name
        self.version = version
        self.primary_key = list(primary_key)
        self.event_time = event_time
        self.description = description
        self.foreign_key = list(foreign_key or [])
        self.partition_key: list[str] = []
        self.id = sg_id
        self._features = list(features or [])
        for f in self._features:
            f.feature_group = self
        self._dataframe: Any = None
        self._rows: pa.Table | None = None
        self._stored: tuple[Path, str] | None = None

    @classmethod
    def from_rows(cls, store: StoreHost, name: str, version: int, *, primary_key: list[str],
                  event_time: str | None, dataframe: Any, description: str = "",
                  foreign_key: list[str] | None = None) -> SpineGroup:
        """A spine group whose columns are those of ``dataframe`` (checked first), with it as
        its rows; nothing is recorded in the catalog."""
        from feature_store.local.storage import spine_table

        owner = f"spine group '{name}' v{version}"
        rows = spine_table.spine_rows(dataframe, owner, primary_key, event_time)
        features = [Feature(name=f.name, type=str(f.type), primary=f.name in primary_key,
                            event_time=f.name == event_time) for f in rows.schema]
        spine = cls(store, name, version, primary_key=primary_key, event_time=event_time,
                    description=description, foreign_key=foreign_key, features=features)
        spine.dataframe = dataframe
        return spine

    def __repr__(self) -> str:
        return (f"SpineGroup({self.name!r}, {self.version}, primary_key={self.primary_key}, "
                f"event_time={self.event_time!r})")

    @property
    def owner(self) -> str:
        """How error messages name this spine group."""
        return f"spine group '{self.name}' v{self.version}"

    @property
    def feature_store(self) -> StoreHost:
        """The feature store holding this spine group's metadata."""
        return self._store

    @property
    def features(self) -> list[Feature]:
        """The columns of the spine group (from its first dataframe)."""
        return list(self._features)

    @property
    def schema(self) -> list[Feature]:
        return self.features

    @property
    def upsert_key(self) -> list[str]:
        """Columns that identify a spine row: primary key + event_time."""
        return self.primary_key + ([self.event_time] if self.event_time
                                   and self.event_time not in self.primary_key else [])

    # -- the rows ----------------------------------------------------------------------------

    @property
    def dataframe(self) -> Any:
        """The spine dataframe, as it was given (None until one is set)."""
        return self._dataframe

    @dataframe.setter
    def dataframe(self, dataframe: Any) -> None:
        """Replace the spine's rows; they are checked now (nothing is stored when they fail)."""
        if dataframe is None:
            self._dataframe, self._rows, self._stored = None, None, None
            return
        self._rows = self.check_rows(dataframe)
        self._dataframe = dataframe
        self._stored = None

    def check_rows(self, dataframe: Any) -> pa.Table:
        """``dataframe`` as the spine's normalised rows (package-internal), or a
        :class:`~fstrain.kernel.errors.SchemaMismatchError` naming the spine, the column and
        the value."""
        from feature_store.local.storage import spine_table

        schema = (spine_table.recorded_schema([(f.name, f.type) for f in self._features])
                  if self._features else None)
        return spine_table.spine_rows(dataframe, self.owner, self.primary_key, self.event_time,
                                      schema)

    @property
    def table_path(self) -> Path:
        """The content-addressed Delta table of the current rows (written on first use; a
        group without a dataframe reads as no rows)."""
        return self._store_rows()[0]

    @property
    def content_hash(self) -> str:
        """The sha256 of the current rows (what a training-dataset version records)."""
        return self._store_rows()[1]

    @property
    def row_count(self) -> int:
        """How many rows the current dataframe has (0 without one)."""
        return 0 if self._rows is None else int(self._rows.num_rows)

    def _store_rows(self) -> tuple[Path, str]:
        from feature_store.local.storage import spine_table

        if self._stored is None or not self._stored[0].exists():  # or vacuumed since
            rows = self._rows
            if rows is None:
                schema = spine_table.recorded_schema([(f.name, f.type) for f in self._features])
                if schema is None:  # pragma: no cover - spine types always parse
                    raise NotFoundError(f"{self.owner} has no dataframe; set spine.dataframe.")
                rows = schema.empty_table()
            self._stored = spine_table.store_spine(Path(self._store.root), rows)
        return self._stored

    # -- features and queries ----------------------------------------------------------------

    def get_feature(self, name: str) -> Feature:
        """The column called ``name``."""
        for f in self._features:
            if f.name == name:
                return f
        names = [f.name for f in self._features]
        raise UnknownFeatureError(
            f"{self.owner} has no feature '{name}' (features: {names}).{did_you_mean(name, names)}"
        )

    def __getitem__(self, name: str) -> Feature:
        return self.get_feature(name)

    def __getattr__(self, name: str) -> Feature:
        if name.startswith("_"):
            raise AttributeError(name)
        features = self.__dict__.get("_features", [])
        for f in features:
            if f.name == name:
                return f
        names = [f.name for f in features]
        raise UnknownFeatureError(
            f"{type(self).__name__} has no attribute or feature '{name}' (features: {names})."
            f"{did_you_mean(name, names)}"
        )

    def select_all(self, include_primary_key: bool = True, include_foreign_key: bool = True,
                   include_partition_key: bool = True, include_event_time: bool = True) -> Query:
        """A query rooted at the spine selecting every column (keys unless excluded)."""
        names = [f.name for f in self._features
                 if (include_primary_key or f.name not in self.primary_key)
                 and (include_foreign_key or f.name not in self.foreign_key)
                 and (include_event_time or f.name != self.event_time)]
        return Query(self, names)

    def select(self, features: list[str | Feature]) -> Query:
        """A query rooted at the spine selecting the given columns."""
        names = [f.name if isinstance(f, Feature) else f for f in features]
        for n in names:
            self.get_feature(n)
        return Query(self, names)

    def select_except(self, features: str | Feature | list[str | Feature] | None = None) -> Query:
        """Every column except the given ones."""
        if isinstance(features, str | Feature):
            features = [features]
        drop = {f.name if isinstance(f, Feature) else f for f in features or []}
        for n in drop:
            self.get_feature(n)
        return self.select([f.name for f in self._features if f.name not in drop])

    def select_features(self) -> Query:
        """Every column except the primary key, foreign key and event time."""
        return self.select_all(False, False, False, False)
