"""Helpers shared by the offline sources: parameter checks, time windows, package data paths."""

from __future__ import annotations

import importlib.util
import numbers
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from fstrain.kernel.errors import InvalidArgumentError, NotFoundError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd


def package_dir(package: str) -> Path:
    """Return the folder of an installed package without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise NotFoundError(
            f"Package {package!r} is not installed; install it (see the Makefile) to read its data."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def data_file(package: str, *parts: str) -> Path:
    """Return the path of a data file shipped inside an installed package; it must exist."""
    path = package_dir(package).joinpath(*parts)
    if not path.is_file():
        raise NotFoundError(f"Data file {str(path)!r} of package {package!r} does not exist.")
    return path


def to_utc(value: datetime | None, name: str) -> pd.Timestamp | None:
    """Turn a window bound into a UTC timestamp; naive datetimes are taken as UTC."""
    import pandas as pd

    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidArgumentError(
            f"Parameter {name!r} must be a datetime or None, got {type(value).__name__} {value!r}."
        )
    stamp = pd.Timestamp(value)
    if stamp.tzinfo is None:
        return stamp.tz_localize(timezone.utc).as_unit("ns")
    return stamp.tz_convert("UTC").as_unit("ns")


def check_window(
    start: datetime | None, end: datetime | None
) -> tuple[pd.Timestamp | None, pd.Timestamp | None]:
    """Validate a half-open ``[start, end)`` window and return it as UTC timestamps."""
    lo, hi = to_utc(start, "start"), to_utc(end, "end")
    if lo is not None and hi is not None and lo >= hi:
        raise InvalidArgumentError(
            f"Parameter 'start' ({lo.isoformat()}) must be before 'end' ({hi.isoformat()}); "
            "the window [start, end) would be empty."
        )
    return lo, hi


def in_window(
    frame: pd.DataFrame, column: str, start: pd.Timestamp | None, end: pd.Timestamp | None
) -> pd.DataFrame:
    """Return the rows of ``frame`` with ``start <= frame[column] < end`` (index reset)."""
    if start is None and end is None:
        return frame
    mask = None
    if start is not None:
        mask = frame[column] >= start
    if end is not None:
        upper = frame[column] < end
        mask = upper if mask is None else mask & upper
    return frame.loc[mask].reset_index(drop=True)


def check_positive_int(value: object, name: str, *, minimum: int = 1, allow_none: bool = True) -> None:
    """Raise InvalidArgumentError unless ``value`` is an int >= ``minimum`` (or None if allowed)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidArgumentError(
            f"Parameter {name!r} must be an integer >= {minimum}"
            f"{' or None' if allow_none else ''}, got {value!r}."
        )


def check_seed(seed: object) -> None:
    """Raise InvalidArgumentError unless ``seed`` is a non-negative int."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InvalidArgumentError(f"Parameter 'seed' must be a non-negative integer, got {seed!r}.")
