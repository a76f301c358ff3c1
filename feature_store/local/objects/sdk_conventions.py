"""Conventions of the Hopsworks SDK that every local object follows: the dataframe types a read
returns, the warning when no version is given, and refusing options the local backend does not
implement (never ignoring them silently)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from fstrain.kernel.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

DATAFRAME_TYPES = ("default", "pandas", "pyarrow", "arrow", "numpy", "python", "polars")


def convert_result(table: pa.Table, dataframe_type: str) -> Any:
    """Convert an Arrow result to the requested dataframe type (Hopsworks names)."""
    kind = dataframe_type.lower()
    if kind in ("default", "pandas"):
        return table.to_pandas()
    if kind in ("pyarrow", "arrow"):
        return table
    if kind == "numpy":
        return table.to_pandas().to_numpy()
    if kind == "python":
        return table.to_pandas().values.tolist()
    if kind == "polars":
        import polars as pl  # optional dependency

        return pl.from_arrow(table)
    raise InvalidArgumentError(
        f"dataframe_type must be one of {DATAFRAME_TYPES}. Got {dataframe_type!r} instead."
    )


def warn_default_version(kind: str, name: str) -> None:
    """Hopsworks warns and uses version 1 when no version is given."""
    warnings.warn(
        f"No version provided for getting {kind} '{name}', defaulting to version 1.",
        UserWarning,
        stacklevel=3,
    )


def refuse_unsupported(options: dict[str, Any], call: str) -> None:
    """Refuse Hopsworks options the local backend does not implement (never ignore silently)."""
    if options:
        raise InvalidArgumentError(
            f"{call}() got options the local backend does not support: {sorted(options)}."
        )
