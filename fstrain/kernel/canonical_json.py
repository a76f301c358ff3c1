"""Turning user values (numpy/pandas scalars, dates, paths) into strict JSON, or refusing."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError


def to_jsonable(value: Any, *, what: str) -> Any:
    """Return ``value`` as plain JSON types; raise :class:`InvalidArgumentError` if impossible.

    numpy scalars and arrays, pandas timestamps, ``datetime``, ``Decimal`` and paths are
    converted; non-finite floats become ``None`` (strict JSON has no NaN).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, what=what) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v, what=what) for v in items]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return to_jsonable(float(value), what=what)
    if isinstance(value, PurePath):
        return str(value)
    module = type(value).__module__.split(".")[0]
    if module in ("numpy", "pandas"):
        if type(value).__name__ in ("NAType", "NaTType"):
            return None
        if hasattr(value, "isoformat"):  # pandas.Timestamp
            return value.isoformat()
        if hasattr(value, "tolist"):  # numpy arrays and scalars
            return to_jsonable(value.tolist(), what=what)
        if hasattr(value, "item"):
            return to_jsonable(value.item(), what=what)
    raise InvalidArgumentError(
        f"{what} must be JSON-serialisable (numbers, strings, lists, dicts, numpy/pandas "
        f"values). Got a value of type {type(value).__name__} ({value!r:.80}) instead."
    )


def dumps(value: Any) -> str:
    """Deterministic, strict JSON text (sorted keys, 2-space indent, no NaN)."""
    return json.dumps(value, indent=2, sort_keys=True, allow_nan=False) + "\n"


def canonical_bytes(value: Any) -> bytes:
    """The one byte form of a JSON value that signatures and hashes cover: sorted keys, no
    whitespace, UTF-8, strict (no NaN). Equal values always give equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")
