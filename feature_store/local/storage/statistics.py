"""Descriptive statistics of a feature group version, computed in DuckDB.

Per feature: count, null count, and for numbers min/max/mean/stddev; for strings and booleans
the distinct count and the most frequent values; for timestamps/dates min/max. Statistics cover
the whole feature group at a commit (as Hopsworks recomputes them after each commit).

Floating columns also count their infinities apart (``posinf_count``, ``neginf_count``, numpy's
names) and their min/max/mean/stddev are those of the other values: one ``inf`` would make the
mean infinite and the deviation NaN, saying nothing of the rest. NaN is not left out (a column
holding one has no mean, deviation or max: ``None``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from feature_store.core import arrow_bits
from feature_store.core import moments as _moments
from feature_store.local.storage.engine import quote_ident

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
            if pa.types.is_floating(field.type):  # the figures leave the infinities out
                value = f"(CASE WHEN isinf({c}) THEN NULL ELSE {value} END)"
                selects += [f"count(*) FILTER (WHERE isinf({c}) AND {c} > 0) AS pinf{i}",
                            f"count(*) FILTER (WHERE isinf({c}) AND {c} < 0) AS ninf{i}"]
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
        if f"pinf{i}" in values:
            entry["posinf_count"] = int(values[f"pinf{i}"])
            entry["neginf_count"] = int(values[f"ninf{i}"])
        if f"d{i}" in values:
            entry["distinct_count"] = int(values[f"d{i}"])
            entry["top_values"] = _top_values(con, source_sql, field.name)
        features.append(entry)
    return {"row_count": rows, "features": features}


def _aliases(schema: pa.Schema) -> list[str]:
    out = []
    for i, field in enumerate(schema):
        out.append(f"n{i}")
        if pa.types.is_floating(field.type):
            out += [f"pinf{i}", f"ninf{i}"]
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


def _streamable(t: pa.DataType) -> bool:
    """Columns whose statistics :class:`StreamingStatistics` computes itself (numbers other than
    decimals, timestamps, dates); the others are left to DuckDB."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t)
            or pa.types.is_date(t))


#: Valid values of a column per block: statistics accumulate over consecutive blocks of this
#: many values whatever the batches' boundaries, so they depend on the row sequence only.
BLOCK = _moments.BLOCK


class _Moments(_moments.BlockMoments):
    """Count, extremes, exact sum and sum of squared deviations of one numeric column (as
    doubles, as DuckDB's ``CAST(c AS DOUBLE)``), over consecutive blocks of :data:`BLOCK` valid
    values whatever the batches' boundaries (see :mod:`feature_store.core.moments`): the result
    is a function of the values' sequence only."""

    def __init__(self, floating: bool = False) -> None:
        super().__init__(BLOCK)
        #: a floating column counts its infinities apart and leaves them out of the moments
        self.floating = floating
        self.posinf = self.neginf = 0

    def update(self, column: pa.Array) -> None:

        if not self.finite or len(column) == column.null_count:
            return
        values = column.cast(pa.float64(), safe=False)  # rounds as DuckDB's CAST does
        x = arrow_bits.raw_values(values, "<f8")
        if values.null_count:  # the valid values in order (numpy's compress: ~2x drop_null's)
            x = x[arrow_bits.validity(values)]
        if self.floating:
            infinite = np.isinf(x)
            if infinite.any():
                positive = int(np.count_nonzero(x[infinite] > 0))
                self.posinf += positive
                self.neginf += int(np.count_nonzero(infinite)) - positive
                x = x[~infinite]
        self.feed(x)

    def entry(self) -> dict[str, Any] | None:
        """min/max/mean/std of every finite value fed (the held partial block included, this
        object unchanged), and for a floating column the counts of ``+inf`` and ``-inf``; None
        where a value is NaN or the sums overflow."""
        found = self.result()
        if found is None:
            return None
        counts = {"posinf_count": self.posinf, "neginf_count": self.neginf} if self.floating else {}
        if not found.n:
            return {"min": None, "max": None, "mean": None, "std": None, **counts}
        std = math.sqrt(found.m2 / (found.n - 1)) if found.n > 1 else None
        return {"min": found.low, "max": found.high, "mean": found.mean, "std": std, **counts}


class StreamingStatistics:
    """:func:`compute_statistics` of a table fed batch by batch, for a split while it is written:
    counts, and min/max/mean/stddev of numbers and min/max of timestamps and dates, are
    accumulated here (infinities counted apart); the other columns (strings and booleans:
    distinct counts and top values, decimals) and numbers holding NaN are computed by DuckDB
    over the written file (:meth:`result`), reading those columns only.

    Numbers are accumulated over consecutive blocks of :data:`BLOCK` valid values, whatever the
    batches' boundaries, and the blocks combined in order (see :class:`_Moments`): the recorded
    statistics are a function of the rows and their order only, bit for bit, whatever the
    batching (another memory limit, bucket count or ``batch_rows``); the same rows in another
    order may differ in the last digits. They agree with DuckDB's to ~1e-13 relative; DuckDB's
    own differ that much from run to run (its threads combine partial sums in any order).
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows = 0
        self.valid = [0] * len(schema)
        self.moments = {i: _Moments(pa.types.is_floating(f.type)) for i, f in enumerate(schema)
                        if _streamable(f.type) and _is_number(f.type)}
        #: timestamps and dates: the smallest and largest value so far (an empty array: none)
        self.extremes = {i: pa.array([], f.type) for i, f in enumerate(schema)
                         if _streamable(f.type) and not _is_number(f.type)}

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Feed the next rows (in this statistics' schema)."""

        for i, column in enumerate(batch.columns):
            self.valid[i] += len(column) - column.null_count
            if i in self.moments:
                for chunk in _chunks(column):
                    self.moments[i].update(chunk)
            elif i in self.extremes and len(column) > column.null_count:
                both = pc.min_max(pa.chunked_array([self.extremes[i], *_chunks(column)]))
                self.extremes[i] = pa.array([both["min"], both["max"]], self.extremes[i].type)
        self.rows += batch.num_rows

    def result(self, con: duckdb.DuckDBPyConnection, source_sql: str) -> dict[str, Any]:
        """The statistics of every row fed, as :func:`compute_statistics` gives them for the same
        rows; ``source_sql`` (the written rows as a table expression) is read only for the
        columns not accumulated here."""
        numbers = {i: m.entry() for i, m in self.moments.items()}
        rest = [f for i, f in enumerate(self.schema)
                if i not in self.extremes and numbers.get(i) is None]
        computed = {}
        if rest:
            computed = {e["feature"]: e for e in
                        compute_statistics(con, source_sql, pa.schema(rest))["features"]}
        formatted = self._temporal(con)
        features = []
        for i, field in enumerate(self.schema):
            if field.name in computed:
                features.append(computed[field.name])
                continue
            count = self.valid[i]
            entry: dict[str, Any] = {
                "feature": field.name, "type": str(field.type), "count": count,
                "null_count": self.rows - count,
                "completeness": (count / self.rows) if self.rows else None,
            }
            values = numbers.get(i) or formatted[field.name]
            entry.update({k: _clean(v) for k, v in values.items()})
            features.append(entry)
        return {"row_count": self.rows, "features": features}

    def _temporal(self, con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
        """Timestamps' and dates' min and max, formatted by DuckDB as it formats them over the
        whole column (the same expression over a table of the two extremes)."""
        if not self.extremes:
            return {}
        fields = [self.schema.field(i).with_nullable(True) for i in self.extremes]
        table = pa.table([found if len(found) else pa.nulls(2, found.type)
                          for found in self.extremes.values()], schema=pa.schema(fields))
        name = "__fstrain_extremes"
        con.register(name, table)
        try:
            entries = compute_statistics(con, name, table.schema)["features"]
        finally:
            con.unregister(name)
        return {e["feature"]: {"min": e["min"], "max": e["max"]} for e in entries}



def _chunks(column: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]
