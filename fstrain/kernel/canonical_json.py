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
    converted; ``±inf`` become the strings ``"inf"``/``"-inf"`` (strict JSON has no infinity;
    :func:`float_from_json` reads them back) and NaN becomes ``None``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _float(value)
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


#: how strict JSON holds a double's infinities (read back by :func:`float_from_json`)
INFINITIES = {"inf": math.inf, "-inf": -math.inf}


def _float(value: float) -> float | str | None:
    """A float as strict JSON holds it: finite as is, ``±inf`` as ``"inf"``/``"-inf"``, NaN as
    ``None``."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return None
    return "inf" if value > 0 else "-inf"


def finite_floats(value: Any, *, nan: bool = True) -> Any:
    """``value`` (JSON types) with every ``±inf`` written as :func:`to_jsonable` writes it
    (``"inf"``, ``"-inf"``) and, with ``nan``, every NaN as ``None``; other values unchanged."""
    if isinstance(value, float) and not math.isfinite(value):
        return value if math.isnan(value) and not nan else _float(value)
    if isinstance(value, Mapping):
        return {k: finite_floats(v, nan=nan) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_floats(v, nan=nan) for v in value]
    return value


def float_from_json(value: Any) -> float | None:
    """A double written by :func:`to_jsonable` read back: ``"inf"``/``"-inf"`` as ``±inf``,
    numbers as floats, ``None`` as ``None`` (NaN was written as ``None``).

    Raises:
        InvalidArgumentError: ``value`` is no such number (another string, a bool, a list).
    """
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value in INFINITIES:
        return INFINITIES[value]
    raise InvalidArgumentError(
        f"a JSON double must be a number, 'inf', '-inf' or null. Got {value!r:.80} instead."
    )


def _strict(value: Any, **options: Any) -> str:
    """``json.dumps`` refusing NaN, ``±inf`` written as ``"inf"``/``"-inf"`` (looked for only
    when the strict dump refuses, so finite values cost nothing more)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(finite_floats(value, nan=False), allow_nan=False, **options)


def dumps(value: Any) -> str:
    """Deterministic, strict JSON text (sorted keys, 2-space indent; ``±inf`` as the strings
    ``"inf"``/``"-inf"``; NaN refused with ``ValueError``: :func:`to_jsonable` makes it null)."""
    return _strict(value, indent=2, sort_keys=True) + "\n"


def canonical_bytes(value: Any) -> bytes:
    """The one byte form of a JSON value that signatures and hashes cover: sorted keys, no
    whitespace, UTF-8, strict (``±inf`` as ``"inf"``/``"-inf"``, NaN refused). Equal values
    always give equal bytes."""
    return _strict(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
