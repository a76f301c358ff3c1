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

from feature_store.errors import (
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

BACKENDS = ("local", "hopsworks")


def login(
    backend: str | None = None,
    root: str | os.PathLike[str] | None = None,
    **hopsworks_options: Any,
) -> Any:
    """Connect to a backend and return a project handle.

    Args:
        backend: ``"local"`` (default; embedded Delta Lake + DuckDB store under ``root``) or
            ``"hopsworks"``. Defaults to ``$FSTRAIN_BACKEND`` or ``"local"``.
        root: local store root; defaults to ``$FSTRAIN_HOME`` or ``./.fstrain``.
        **hopsworks_options: ``host``, ``project``, ``api_key_value``, ``api_key_file`` for the
            Hopsworks backend.

    Returns:
        A project with ``get_feature_store()`` and ``get_model_registry()``.
    """
    chosen = backend or os.environ.get("FSTRAIN_BACKEND") or "local"
    if chosen == "local":
        if hopsworks_options:
            raise ConfigError(
                f"login(backend='local') does not take {sorted(hopsworks_options)}; "
                "those options are for backend='hopsworks'."
            )
        from feature_store.project import Project, resolve_root

        return Project(resolve_root(root))
    if chosen == "hopsworks":
        from feature_store.hopsworks.connection import login as hopsworks_login

        return hopsworks_login(**hopsworks_options)
    raise ConfigError(f"login(): backend must be one of {BACKENDS}. Got {chosen!r} instead.")
