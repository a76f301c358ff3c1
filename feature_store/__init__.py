"""fstrain's feature store: a Hopsworks-compatible API over an embedded Delta Lake + DuckDB store.

>>> import feature_store
>>> project = feature_store.login(root="/tmp/fs")          # local, embedded backend
>>> fs = project.get_feature_store()
>>> fg = fs.get_or_create_feature_group("trips", version=1, primary_key=["trip_id"],
...                                     event_time="pickup_time")

Heavy libraries (pandas, pyarrow, deltalake, duckdb, great_expectations) load lazily, so
``import feature_store`` stays fast.
"""

from __future__ import annotations

import os
from typing import Any

# the module, not its login: fstrain.project imports this package's backends, so whichever of
# the two is imported first, the other's names may not exist yet while it runs
from fstrain import project
from fstrain.kernel.errors import (
    AlreadyExistsError,
    BackendError,
    CommitConflictError,
    ConfigError,
    DataValidationError,
    FeatureStoreError,
    IntegrityError,
    InvalidArgumentError,
    InvalidNameError,
    ModelAlreadyExistsError,
    NotFoundError,
    SchemaMismatchError,
    UnsafeFormatError,
)

__all__ = [
    "AlreadyExistsError",
    "BackendError",
    "CommitConflictError",
    "ConfigError",
    "DataValidationError",
    "FeatureStoreError",
    "IntegrityError",
    "InvalidArgumentError",
    "InvalidNameError",
    "ModelAlreadyExistsError",
    "NotFoundError",
    "SchemaMismatchError",
    "UnsafeFormatError",
    "login",
]



def login(
    backend: str | None = None,
    root: str | os.PathLike[str] | None = None,
    *,
    create: bool = True,
    **hopsworks_options: Any,
) -> Any:
    """Alias of :func:`fstrain.login` (the composition root), kept for ``feature_store.login``."""
    return project.login(backend, root, create=create, **hopsworks_options)
