"""Turning user frames into Arrow tables that fit a feature group, or explaining why not.

Everything here is pure: it takes data and a schema and returns a normalised Arrow table or
raises a typed error naming the feature group, the column and the offending value. Nothing is
written until every check has passed.

Type rules (applied on the first insert, and when later inserts are conformed):

- signed/unsigned integers → ``int64``; floats → ``double``; strings → ``string``;
  ``bool``, ``date32`` and nested types are kept;
- timestamps → ``timestamp[us, UTC]`` following :mod:`fstrain.kernel.timeutil`
  (naive means UTC; a column mixing naive and aware values is refused);
- on later inserts a column may widen losslessly (int → double, any int width → int64) but
  never change family (string ↔ number, number ↔ timestamp, …).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from fstrain.kernel.errors import InvalidArgumentError, SchemaMismatchError
from fstrain.kernel.names import normalize_feature_name

TIMESTAMP = pa.timestamp("us", tz="UTC")


def type_name(t: pa.DataType) -> str:
    """The stored type string of an Arrow type (``int64``, ``double``, ``timestamp[us, tz=UTC]``…)."""
    return str(t)


def _family(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_null(t):
        return "null"
    return str(t)


def _canonical_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _canonical_type(t.value_type)
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_timestamp(t):
        return TIMESTAMP
    if pa.types.is_date64(t):
        return pa.date32()
    return t


def _first_value(column: pa.ChunkedArray) -> Any:
    for chunk in column.chunks:
        for value in chunk:
            if value.is_valid:
                return value.as_py()
    return None


def _check_mixed_timezones(frame: Any, owner: str) -> None:
    """Refuse pandas object columns that mix tz-naive and tz-aware datetimes.

    Only object columns whose first non-null value is a datetime are scanned (a column of
    strings or numbers cannot hold the mix without failing Arrow conversion anyway).
    """
    for col in frame.columns:
        if frame[col].dtype != object:
            continue
        first = frame[col].first_valid_index()
        if first is None or not isinstance(frame[col].loc[first], _dt.datetime):
            continue
        kinds = set()
        for value in frame[col]:
            if isinstance(value, _dt.datetime):
                kinds.add(value.tzinfo is not None)
                if len(kinds) > 1:
                    raise SchemaMismatchError(
                        f"{owner}: column '{col}' mixes tz-naive and tz-aware timestamps "
                        f"(e.g. {value!r}). fstrain reads naive timestamps as UTC; make the "
                        "column uniformly naive or uniformly aware."
                    )


def to_arrow(data: Any, owner: str) -> pa.Table:
    """Accept a pandas DataFrame, an Arrow table/record batch, or anything Arrow-exportable."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a hard dependency
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        _check_mixed_timezones(data, owner)
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowTypeError, pa.ArrowInvalid, OverflowError) as exc:
            column = str(exc).rsplit("column ", 1)[-1].split(" ", 1)[0] if "column" in str(exc) else "?"
            if column == "?":
                column = _failing_column(data)
            raise SchemaMismatchError(
                f"{owner}: column '{column}' could not be converted to a single type ({exc}). "
                "Give every value in a column the same type."
            ) from exc
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    raise InvalidArgumentError(
        f"{owner}: data must be a pandas DataFrame or a pyarrow Table. "
        f"Got {type(data).__name__} instead."
    )


def _failing_column(frame: Any) -> str:
    """The first column of ``frame`` that Arrow cannot convert (e.g. an int beyond 64 bits)."""
    for col in frame.columns:
        try:
            pa.array(frame[col], from_pandas=True)
        except (pa.ArrowTypeError, pa.ArrowInvalid, OverflowError):
            return str(col)
    return "?"


def normalize_table(data: Any, owner: str) -> pa.Table:
    """Normalise column names and types of incoming data (no schema to match yet)."""
    table = to_arrow(data, owner)
    if table.num_rows == 0:
        raise InvalidArgumentError(
            f"{owner}: the data to insert is empty (0 rows). Nothing was written."
        )
    names = [normalize_feature_name(n, owner=owner) for n in table.column_names]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SchemaMismatchError(
            f"{owner}: columns {dupes} appear more than once after lower-casing "
            f"(from {table.column_names}). Rename them."
        )
    table = table.replace_schema_metadata(None).rename_columns(names)
    columns = []
    for name, column in zip(names, table.columns, strict=True):
        target = _canonical_type(column.type)
        if column.type != target:
            try:
                column = column.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(
                    f"{owner}: column '{name}' of type {column.type} cannot be stored as "
                    f"{target}: {exc}"
                ) from exc
        columns.append(column)
    return pa.table(columns, names=names)


def infer_schema(table: pa.Table, owner: str) -> pa.Schema:
    """The schema a first insert creates; refuses columns whose type cannot be inferred."""
    for field in table.schema:
        if (pa.types.is_duration(field.type) or pa.types.is_time(field.type)
                or pa.types.is_interval(field.type)):
            raise SchemaMismatchError(
                f"{owner}: column '{field.name}' is {field.type}, which Delta Lake cannot store. "
                "Store durations as a number (e.g. seconds via .dt.total_seconds()) and times of "
                "day as a string or a number."
            )
        if pa.types.is_null(field.type):
            raise SchemaMismatchError(
                f"{owner}: column '{field.name}' holds only nulls, so its type cannot be "
                "inferred. Insert at least one non-null value or cast the column first."
            )
    return pa.schema([pa.field(f.name, f.type) for f in table.schema])


def conform(table: pa.Table, schema: pa.Schema, owner: str) -> pa.Table:
    """Reorder and cast ``table`` to ``schema``; refuse missing/extra columns and type changes."""
    expected = schema.names
    missing = [c for c in expected if c not in table.column_names]
    extra = [c for c in table.column_names if c not in expected]
    if extra:
        raise SchemaMismatchError(
            f"{owner}: columns {extra} are not in the feature group (it has {expected}). "
            "To add columns, call fg.append_features([...]) first."
        )
    if missing:
        raise SchemaMismatchError(
            f"{owner}: columns {missing} are missing from the data (the feature group has "
            f"{expected}). Add them (nulls are fine for non-key columns)."
        )
    columns = []
    for field in schema:
        column = table.column(field.name)
        if column.type != field.type:
            column = _cast_column(column, field, owner)
        columns.append(column)
    return pa.table(columns, schema=schema)


def _cast_column(column: pa.ChunkedArray, field: pa.Field, owner: str) -> pa.ChunkedArray:
    got, want = _family(column.type), _family(field.type)
    compatible = got == "null" or got == want
    if not compatible:
        raise SchemaMismatchError(
            f"{owner}: column '{field.name}' must be {field.type} (as stored). Got "
            f"{column.type} instead (first value {_first_value(column)!r}). Convert the column "
            "or create a new feature group version."
        )
    try:
        return column.cast(field.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(
            f"{owner}: column '{field.name}' cannot be stored as {field.type} without losing "
            f"data ({exc}). Round or convert the values first."
        ) from exc


def check_keys(
    table: pa.Table,
    owner: str,
    primary_key: Sequence[str],
    event_time: str | None,
    upsert_key: Sequence[str],
) -> None:
    """Keys present, typed and non-null; no duplicate upsert key inside one batch."""
    for col in list(primary_key) + ([event_time] if event_time else []):
        role = "event_time" if col == event_time else "primary key"
        if col not in table.column_names:
            raise SchemaMismatchError(
                f"{owner}: {role} column '{col}' is missing from the data "
                f"(columns: {table.column_names})."
            )
        column = table.column(col)
        nulls = column.null_count
        if pa.types.is_floating(column.type):
            nulls += pc.sum(pc.is_nan(column)).as_py() or 0
        if nulls:
            raise SchemaMismatchError(
                f"{owner}: {role} column '{col}' has {nulls} null/NaN value(s). Keys must be "
                "complete: drop or fill those rows."
            )
    if event_time:
        et_type = table.column(event_time).type
        if not (pa.types.is_timestamp(et_type) or pa.types.is_date(et_type)
                or pa.types.is_int64(et_type)):
            raise SchemaMismatchError(
                f"{owner}: event_time column '{event_time}' must be a timestamp, a date or "
                f"epoch milliseconds (int64, as Hopsworks). Got {et_type} instead (first value "
                f"{_first_value(table.column(event_time))!r}). Convert it with "
                "pandas.to_datetime(..., utc=True) or .astype('int64')."
            )
    _check_unique(table, owner, upsert_key)


def check_ingestion_time(table: pa.Table, owner: str, column: str | None) -> None:
    """A group's ``ingestion_time`` column (an fstrain extension) is in every insert, a
    timestamp, and complete: a row with no ingestion time could never be known."""
    if column is None:
        return
    if column not in table.column_names:
        raise SchemaMismatchError(
            f"{owner}: ingestion_time column '{column}' is missing from the data (columns: "
            f"{table.column_names}). Every insert says when its rows became known."
        )
    values = table.column(column)
    if not pa.types.is_timestamp(values.type):
        raise SchemaMismatchError(
            f"{owner}: ingestion_time column '{column}' must be a timestamp. Got {values.type} "
            f"instead (first value {_first_value(values)!r}). Convert it with "
            "pandas.to_datetime(..., utc=True)."
        )
    if values.null_count:
        raise SchemaMismatchError(
            f"{owner}: ingestion_time column '{column}' has {values.null_count} null value(s); "
            "a row with no ingestion time would never be known to an as-known join. Fill them "
            "(e.g. with the load time)."
        )


def _check_unique(table: pa.Table, owner: str, upsert_key: Sequence[str]) -> None:
    """No upsert key twice in one batch (Arrow's hash aggregate; as fast as DuckDB's here)."""
    counts = table.group_by(list(upsert_key)).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts.column("count_all"), 1))
    if dup.num_rows:
        example = {k: dup.column(k)[0].as_py() for k in upsert_key}
        raise SchemaMismatchError(
            f"{owner}: {dup.num_rows} key(s) appear more than once in this batch on "
            f"{list(upsert_key)}, e.g. {example} ({dup.column('count_all')[0].as_py()} rows). "
            "Each primary key + event_time may appear once per insert: deduplicate first."
        )

