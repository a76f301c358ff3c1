"""The one cache of committed Delta versions: the loaded table and what DuckDB learnt of its files.

A committed version never changes, so its :class:`Snapshot` is shared by every reader in the
process: the ``DeltaTable`` loaded at that version, and, filled in lazily by the engine, the
column names its parquet files hold and the Arrow schema of a scan over them. The cache keeps the
most recently used :data:`MAX_SNAPSHOTS` versions; :func:`forget` drops all of them (a dropped
table's path may be reused by a new table).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from deltalake import DeltaTable

MAX_SNAPSHOTS = 256


@dataclass
class Snapshot:
    """One committed version of one table."""

    table: DeltaTable
    file_columns: tuple[str, ...] | None = None
    scan_schema: pa.Schema | None = None


_cache: OrderedDict[tuple[str, int], Snapshot] = OrderedDict()
_lock = threading.Lock()


def snapshot(path: str, version: int) -> Snapshot:
    """The cached snapshot of ``path`` at ``version`` (loaded on first use)."""
    key = (path, version)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    from deltalake import DeltaTable

    table = DeltaTable(path)
    table.load_as_version(version)
    with _lock:
        found = _cache.setdefault(key, Snapshot(table))
        _cache.move_to_end(key)
        while len(_cache) > MAX_SNAPSHOTS:
            _cache.popitem(last=False)
    return found


def forget() -> None:
    """Drop every cached snapshot."""
    with _lock:
        _cache.clear()
