"""Declarative descriptions of the feature groups that the offline sources produce.

A :class:`FeatureGroupSpec` says what a source frame looks like (primary key, event time, one
description per column, tags) and which Great Expectations 1.x expectations it must pass.
:func:`check_frame` checks a frame against the rules every source frame follows:

* column names are lower-case ``[a-z0-9_]`` and are exactly the spec's columns, in order;
* primary-key and event-time columns have no nulls, and (primary key + event time) is unique;
* event-time columns are ``datetime64[ns, UTC]``;
* numeric columns are int64/float64, strings object/str, booleans bool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fstrain.kernel.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

_COLUMN_NAME = re.compile(r"^[a-z0-9_]+$")


@dataclass(frozen=True)
class Expectation:
    """One Great Expectations 1.x expectation, by class name and keyword arguments.

    ``Expectation("ExpectColumnValuesToNotBeNull", {"column": "amount"})`` stands for
    ``great_expectations.expectations.ExpectColumnValuesToNotBeNull(column="amount")``.
    """

    type: str
    kwargs: dict = field(hash=False)

    def to_gx(self) -> object:
        """Build the Great Expectations expectation object (imports great_expectations)."""
        import great_expectations as gx

        try:
            cls = getattr(gx.expectations, self.type)
        except AttributeError as exc:
            raise InvalidArgumentError(
                f"Expectation type {self.type!r} is not a Great Expectations 1.x expectation class."
            ) from exc
        return cls(**self.kwargs)


@dataclass(frozen=True)
class FeatureGroupSpec:
    """What one source feature group contains.

    ``feature_descriptions`` describes every column of the frame (primary key and event time
    included), in frame column order; :attr:`columns` is derived from it. ``tags`` are group-level
    tags (``{"pii": True}``), ``feature_tags`` per-column tags (``{"sex": {"pii": True}}``).
    """

    name: str
    version: int
    primary_key: tuple[str, ...]
    event_time: str | None
    description: str
    feature_descriptions: dict[str, str] = field(hash=False)
    tags: dict[str, object] = field(default_factory=dict, hash=False)
    feature_tags: dict[str, dict] = field(default_factory=dict, hash=False)
    expectations: tuple[Expectation, ...] = field(default=(), hash=False)
    #: the column saying when each row became known (fstrain's ``ingestion_time`` extension),
    #: declared on the local backend for history loaded after the fact; never a model feature
    ingestion_time: str | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The frame's columns, in order."""
        return tuple(self.feature_descriptions)

    @property
    def key_columns(self) -> tuple[str, ...]:
        """Primary key plus event time (when the group has one): the row identity."""
        return self.primary_key + ((self.event_time,) if self.event_time else ())


def _dtype_problem(column: str, dtype: object) -> str | None:
    """Return a problem string if ``dtype`` is not one the rules allow, else None."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(dtype):
        return None if str(dtype) == "bool" else f"column {column!r} has dtype {dtype}, expected bool"
    if isinstance(dtype, pd.DatetimeTZDtype):
        if str(dtype.tz) != "UTC" or dtype.unit != "ns":
            return f"column {column!r} has dtype {dtype}, expected datetime64[ns, UTC]"
        return None
    if pd.api.types.is_datetime64_dtype(dtype):
        return f"column {column!r} is a naive datetime ({dtype}), expected datetime64[ns, UTC]"
    if pd.api.types.is_numeric_dtype(dtype):
        if str(dtype) in ("int64", "float64"):
            return None
        return f"column {column!r} has dtype {dtype}, expected int64 or float64"
    if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
        return None
    return f"column {column!r} has unsupported dtype {dtype}"


def check_frame(frame: pd.DataFrame, spec: FeatureGroupSpec) -> list[str]:
    """Return every way ``frame`` breaks the source-frame rules for ``spec`` (empty if none)."""
    import pandas as pd

    problems: list[str] = []
    columns = [str(c) for c in frame.columns]
    bad_names = [c for c in columns if not _COLUMN_NAME.match(c)]
    if bad_names:
        problems.append(f"{spec.name}: column names not lower-case [a-z0-9_]: {bad_names}")
    if tuple(columns) != spec.columns:
        problems.append(f"{spec.name}: columns {columns} differ from spec columns {list(spec.columns)}")
    missing_keys = [c for c in spec.key_columns if c not in frame.columns]
    if missing_keys:
        problems.append(f"{spec.name}: key columns missing: {missing_keys}")
        return problems
    for column in spec.key_columns:
        nulls = int(frame[column].isna().sum())
        if nulls:
            problems.append(f"{spec.name}: key column {column!r} has {nulls} null(s)")
    duplicated = int(frame.duplicated(list(spec.key_columns)).sum())
    if duplicated:
        problems.append(f"{spec.name}: {duplicated} duplicate row(s) on {list(spec.key_columns)}")
    if spec.event_time is not None:
        dtype = frame[spec.event_time].dtype
        if not (isinstance(dtype, pd.DatetimeTZDtype) and str(dtype.tz) == "UTC"):
            problems.append(f"{spec.name}: event time {spec.event_time!r} has dtype {dtype}, expected UTC")
    if spec.ingestion_time is not None:
        dtype = frame[spec.ingestion_time].dtype
        if not (isinstance(dtype, pd.DatetimeTZDtype) and str(dtype.tz) == "UTC"):
            problems.append(f"{spec.name}: ingestion time {spec.ingestion_time!r} has dtype {dtype}, "
                            "expected UTC")
    for column, dtype in frame.dtypes.items():
        problem = _dtype_problem(str(column), dtype)
        if problem:
            problems.append(f"{spec.name}: {problem}")
    return problems
