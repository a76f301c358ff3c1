"""The local catalog repository: every SQL statement against the catalog lives in this package.

One transactional SQLite file holds all feature-store metadata (feature groups, their tags,
statistics and validation reports; feature views, training datasets and saved transformation
functions). :class:`Catalog` offers one named, typed method per read or write; entities and the
store call those and never write SQL (``tests/test_layering.py`` checks it).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from feature_store.local.catalog.database import Database, dumps, loads
from feature_store.local.catalog.groups import GroupRecords
from feature_store.local.catalog.views import ViewRecords
from fstrain.kernel.errors import BackendError


class Catalog(GroupRecords, ViewRecords):
    """The catalog of one local store: the records of :mod:`.groups` and :mod:`.views`."""


def open_catalog(root: Path) -> Catalog:
    """The catalog of the store at ``root``; a root that is a file, read-only or not a real
    folder is a :class:`BackendError` naming it (not an OSError traceback)."""

    try:
        root.mkdir(parents=True, exist_ok=True)
        return Catalog(root / "catalog.sqlite")
    except (OSError, sqlite3.Error) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise BackendError(
            f"feature store at {root} cannot be opened ({type(exc).__name__}: {reason}). Point "
            "--root or FSTRAIN_HOME at a writable folder."
        ) from exc


__all__ = ["Catalog", "Database", "dumps", "loads", "open_catalog"]
