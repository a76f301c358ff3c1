"""Spine rows as a content-addressed Delta table: what a spine group's dataframe is stored as.

A spine (``fs.get_or_create_spine_group(..., dataframe=df)``, or a dataframe passed as
``spine=``) is checked and normalised like a feature group's first insert (column names, types,
complete keys, no duplicate key + event time; ``±inf`` kept, as a group keeps them), then
written once as a one-commit
Delta table under ``<store>/spines/<sha256>``, named by the sha256 of its content
(:func:`~feature_store.core.content_hash.table_sha256`). The same rows always land in the same
table, a table is never changed after it is written, and a training-dataset version records the
hash it was built from, so the version re-reads the very rows it was made of.

The table is written into a scratch folder beside its final place and renamed into it, so a
killed write leaves no half table under the hash.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from feature_store.core.content_hash import table_sha256
from feature_store.local.storage import schema as schema_rules
from fstrain.kernel.errors import SchemaMismatchError

SPINES_DIR = "spines"


def spine_rows(data: Any, owner: str, primary_key: Sequence[str], event_time: str | None,
               schema: pa.Schema | None = None) -> pa.Table:
    """``data`` (a pandas DataFrame or Arrow table) as the normalised rows of a spine.

    Refused, naming the spine, the column and the value: no rows, a missing or incomplete
    primary-key or event-time column, an event time that is not a timestamp, date or epoch
    milliseconds, a key + event time given twice, and (with ``schema``, the spine group's
    recorded columns) a column missing or of another type.
    """
    table = schema_rules.normalize_table(data, owner)
    upsert_key = list(primary_key) + ([event_time] if event_time else [])
    if schema is not None:
        table = _conform(table, schema, owner)
    else:
        schema_rules.infer_schema(table, owner)
    schema_rules.check_keys(table, owner, primary_key, event_time, upsert_key)
    return table


def _conform(table: pa.Table, schema: pa.Schema, owner: str) -> pa.Table:
    """The rows with the recorded columns and types (extra columns are refused, as a feature
    group refuses them)."""
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise SchemaMismatchError(
            f"{owner}: the spine dataframe lacks column(s) {missing} of the spine group "
            f"(it has {table.column_names}; the group has {schema.names}). Add them."
        )
    return schema_rules.conform(table, schema, owner)


def recorded_schema(columns: Sequence[tuple[str, str]]) -> pa.Schema | None:
    """The Arrow schema of a spine group's recorded ``(name, type)`` columns (None when a type
    is not one a spine stores: its rows are then checked without a schema)."""
    fields = []
    for name, type_name in columns:
        if type_name.startswith("timestamp"):
            fields.append(pa.field(name, schema_rules.TIMESTAMP))
            continue
        try:
            fields.append(pa.field(name, pa.type_for_alias(type_name)))
        except ValueError:
            return None
    return pa.schema(fields)


def store_spine(store_root: Path, table: pa.Table) -> tuple[Path, str]:
    """Write ``table`` (checked by :func:`spine_rows`) as a one-commit Delta table named by its
    content hash, unless that table exists; returns its path and the hash."""
    from deltalake import DeltaTable, write_deltalake

    digest = table_sha256(table)
    final = spine_path(store_root, digest)
    if DeltaTable.is_deltatable(str(final)):
        os.utime(final)  # used now: vacuum keeps it for another day (remove_unused)
        return final, digest
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = final.parent / f".{digest}.writing"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        write_deltalake(str(scratch), table, mode="error")
        try:
            scratch.rename(final)
        except OSError:  # another writer placed the same rows first
            if not DeltaTable.is_deltatable(str(final)):
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final, digest


def spine_path(store_root: Path, digest: str) -> Path:
    """Where the spine table of content hash ``digest`` is."""
    return Path(store_root) / SPINES_DIR / digest


def remove_unused(store_root: Path, recorded: set[str], older_than_s: float,
                  dry_run: bool) -> list[Path]:
    """Remove the spine tables no training-dataset version records (``recorded``: their
    hashes) that were last written or used more than ``older_than_s`` ago (a batch read's
    spine, kept that long for the reads still running on it); returns them (``dry_run``: the
    ones it would remove). Killed writes' scratch folders of that age go too."""
    folder = Path(store_root) / SPINES_DIR
    if not folder.is_dir():
        return []
    cutoff = time.time() - older_than_s
    unused = sorted(p for p in folder.iterdir()
                    if p.is_dir() and p.name not in recorded and p.stat().st_mtime <= cutoff)
    if not dry_run:
        for path in unused:
            shutil.rmtree(path, ignore_errors=True)
    return unused
