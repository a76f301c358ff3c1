"""Row filters of a query (``hsfs`` ``Filter``/``Logic`` JSON) evaluated on the query's rows.

A ``Logic`` is ``{"type": "AND"|"OR"|"SINGLE", "leftFilter", "rightFilter", "leftLogic",
"rightLogic"}``; a ``Filter`` is ``{"feature": {...}, "condition": "GREATER_THAN_OR_EQUAL"|...,
"value": "<string>"}`` (the SDK sends every value as a string). A value is read in the type of
its column: a timestamp column takes epoch milliseconds or a date string. ``LIKE`` and
filters on a column the rows do not have are refused (``ValueError``), never ignored.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

_CONDITIONS = {
    "EQUALS": lambda s, v: s == v, "NOT_EQUALS": lambda s, v: s != v,
    "GREATER_THAN": lambda s, v: s > v, "GREATER_THAN_OR_EQUAL": lambda s, v: s >= v,
    "LESS_THAN": lambda s, v: s < v, "LESS_THAN_OR_EQUAL": lambda s, v: s <= v,
    "IN": lambda s, v: s.isin(v),
}


def _value(series: pd.Series, raw: Any) -> Any:
    if raw is None:
        return None
    if pd.api.types.is_datetime64_any_dtype(series):
        text = str(raw)
        stamp = pd.Timestamp(int(text), unit="ms") if text.lstrip("-").isdigit() else pd.Timestamp(text)
        tz = series.dt.tz
        if tz is not None:
            return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        return stamp.tz_convert(None) if stamp.tzinfo is not None else stamp
    if pd.api.types.is_bool_dtype(series):
        return str(raw).lower() == "true"
    if pd.api.types.is_numeric_dtype(series):
        return float(raw)
    return str(raw)


def _single(frame: pd.DataFrame, flt: dict[str, Any]) -> pd.Series:
    name = flt["feature"]["name"]
    condition = flt["condition"]
    if name not in frame.columns:
        raise ValueError(f"filter on '{name}', which the query's rows do not have")
    if condition not in _CONDITIONS:
        raise ValueError(f"filter condition {condition} is not evaluated by the fake server")
    series = frame[name]
    if condition == "IN":
        values = json.loads(flt["value"]) if str(flt["value"]).startswith("[") else [flt["value"]]
        return _CONDITIONS["IN"](series, [_value(series, v) for v in values])
    return _CONDITIONS[condition](series, _value(series, flt["value"])).fillna(False)


def mask(frame: pd.DataFrame, logic: dict[str, Any] | None) -> pd.Series:
    """Which rows of ``frame`` the filter keeps (all rows without one)."""
    if not logic:
        return pd.Series(True, index=frame.index)
    if "condition" in logic:  # a bare Filter
        return _single(frame, logic)
    parts = [mask(frame, logic[k]) for k in ("leftLogic", "rightLogic") if logic.get(k)]
    parts += [_single(frame, logic[k]) for k in ("leftFilter", "rightFilter") if logic.get(k)]
    if not parts:
        return pd.Series(True, index=frame.index)
    out = parts[0]
    for part in parts[1:]:
        out = (out | part) if logic.get("type") == "OR" else (out & part)
    return out.astype(bool)


def and_filter(logic: dict[str, Any] | None, flt: dict[str, Any]) -> dict[str, Any]:
    """``logic AND flt`` as ``Logic`` JSON."""
    if not logic:
        return {"type": "SINGLE", "leftFilter": flt, "rightFilter": None, "leftLogic": None,
                    "rightLogic": None}
    return {"type": "AND", "leftFilter": flt, "rightFilter": None, "leftLogic": logic,
                "rightLogic": None}
