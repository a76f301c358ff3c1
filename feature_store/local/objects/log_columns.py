"""The columns of a feature view's log that are not its features: the log's own columns and
the extra columns ``enable_logging(extra_log_columns=...)`` declares (the SDK's shapes: Feature
objects or ``{"name", "type"}`` dicts). Shared by the view's logging methods
(:mod:`feature_store.local.objects.view_logging`) and its logger
(:mod:`feature_store.local.objects.feature_logging`); imports nothing heavy.
"""

from __future__ import annotations

from typing import Any

from fstrain.kernel.errors import InvalidArgumentError

META_COLUMNS = ["log_id", "log_time", "td_version", "model_name", "model_version", "request_id"]

#: log-column types: the SDK's (Hive) names and the embedded store's, as pandas dtypes
LOG_COLUMN_TYPES = {
    "string": "string", "varchar": "string", "int": "Int32", "integer": "Int32",
    "int32": "Int32", "bigint": "Int64", "int64": "Int64", "smallint": "Int16",
    "float": "float32", "double": "float64", "float64": "float64", "boolean": "boolean",
    "bool": "boolean", "timestamp": "datetime64[us, UTC]", "date": "datetime64[us, UTC]",
}


def merge_log_columns(owner: str, known: list[dict[str, str]], extra: Any) -> list[dict[str, str]]:
    """``known`` plus the extra log columns ``extra`` declares (Feature objects with ``name`` and
    ``type``, or ``{"name", "type"}`` dicts; one or a list), checked; duplicates ignored."""
    if extra is None:
        return list(known)
    items = extra if isinstance(extra, list | tuple) else [extra]
    out = list(known)
    for item in items:
        name, kind = ((item.get("name"), item.get("type", "string")) if isinstance(item, dict)
                      else (getattr(item, "name", None), getattr(item, "type", None)))
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(
                f"{owner}: extra_log_columns takes Feature objects or {{'name': ..., 'type': ...}} "
                f"dicts. Got {item!r} instead."
            )
        if str(kind).lower() not in LOG_COLUMN_TYPES:
            raise InvalidArgumentError(
                f"{owner}: extra log column '{name}' has type {kind!r}; supported types are "
                f"{sorted(LOG_COLUMN_TYPES)}."
            )
        if name in META_COLUMNS or name.startswith("predicted_"):
            raise InvalidArgumentError(
                f"{owner}: extra log column '{name}' clashes with the log's own columns "
                f"({META_COLUMNS} and predicted_<label>). Choose another name."
            )
        if all(c["name"] != name for c in out):
            out.append({"name": name, "type": str(kind).lower()})
    return out
