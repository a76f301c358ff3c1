"""Descriptive statistics of a feature group version, computed in DuckDB.

Per feature: count, null count, and for numbers min/max/mean/stddev; for strings and booleans
the distinct count and the most frequent values; for timestamps/dates min/max. Statistics cover
the whole feature group at a commit (as Hopsworks recomputes them after each commit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from feature_store.local.engine import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

TOP_K = 5


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _is_categorical(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t)


def compute_statistics(
    con: duckdb.DuckDBPyConnection, source_sql: str, schema: pa.Schema
) -> dict[str, Any]:
    """Statistics of every column of ``source_sql`` (a table expression) with ``schema``."""
    selects = ["count(*) AS __rows"]
    for i, field in enumerate(schema):
        c = quote_ident(field.name)
        selects.append(f"count({c}) AS n{i}")
        if _is_number(field.type):
            value = f"CAST({c} AS DOUBLE)"
            selects += [
                f"min({value}) AS min{i}",
                f"max({value}) AS max{i}",
                f"avg({value}) AS mean{i}",
                f"stddev_samp({value}) AS std{i}",
            ]
        elif pa.types.is_timestamp(field.type) or pa.types.is_date(field.type):
            selects += [f"CAST(min({c}) AS VARCHAR) AS min{i}", f"CAST(max({c}) AS VARCHAR) AS max{i}"]
        if _is_categorical(field.type):
            selects.append(f"count(DISTINCT {c}) AS d{i}")
    row = con.execute(f"SELECT {', '.join(selects)} FROM {source_sql}").fetchall()[0]
    names = ["__rows"] + [d for d in _aliases(schema)]
    values = dict(zip(names, row, strict=True))
    rows = int(values["__rows"])
    features = []
    for i, field in enumerate(schema):
        count = int(values[f"n{i}"])
        entry: dict[str, Any] = {
            "feature": field.name,
            "type": str(field.type),
            "count": count,
            "null_count": rows - count,
            "completeness": (count / rows) if rows else None,
        }
        for key in ("min", "max", "mean", "std"):
            if f"{key}{i}" in values:
                entry[key] = _clean(values[f"{key}{i}"])
        if f"d{i}" in values:
            entry["distinct_count"] = int(values[f"d{i}"])
            entry["top_values"] = _top_values(con, source_sql, field.name)
        features.append(entry)
    return {"row_count": rows, "features": features}


def _aliases(schema: pa.Schema) -> list[str]:
    out = []
    for i, field in enumerate(schema):
        out.append(f"n{i}")
        if _is_number(field.type):
            out += [f"min{i}", f"max{i}", f"mean{i}", f"std{i}"]
        elif pa.types.is_timestamp(field.type) or pa.types.is_date(field.type):
            out += [f"min{i}", f"max{i}"]
        if _is_categorical(field.type):
            out.append(f"d{i}")
    return out


def _top_values(con: duckdb.DuckDBPyConnection, source_sql: str, column: str) -> list[dict[str, Any]]:
    c = quote_ident(column)
    rows = con.sql(
        f"SELECT {c} AS v, count(*) AS n FROM {source_sql} WHERE {c} IS NOT NULL "
        f"GROUP BY 1 ORDER BY n DESC, v LIMIT {TOP_K}"
    ).fetchall()
    return [{"value": v, "count": int(n)} for v, n in rows]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None  # NaN and ±inf → None keeps the stored JSON valid
    return value
