"""The one timestamp rule, applied everywhere (inserts, windows, ``as_of``, splits).

**Rule:** every timestamp is stored and compared in UTC. A tz-aware value is converted to UTC;
a tz-naive value is *interpreted as UTC* (it is never shifted by the machine's local zone).
Strings are parsed as ISO-8601 with the same rule; ints are epoch milliseconds (as Hopsworks).
A single column may not mix naive and aware values: that is refused with
:class:`~fstrain.kernel.errors.SchemaMismatchError`.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any

from fstrain.kernel.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

TimeLike = "str | int | datetime.datetime | datetime.date | pandas.Timestamp | None"


def to_utc(value: Any, *, what: str = "time") -> pd.Timestamp | None:
    """Convert a user-supplied time bound to a UTC ``pandas.Timestamp`` (``None``/"" → ``None``)."""
    import pandas as pd

    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    try:
        if isinstance(value, bool):
            raise TypeError("bool")
        if isinstance(value, int):
            ts = pd.Timestamp(value, unit="ms")
        elif isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
            ts = pd.Timestamp(value.year, value.month, value.day)
        else:
            ts = pd.Timestamp(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"{what} must be an ISO-8601 string, a datetime, a date or epoch milliseconds. "
            f"Got {value!r} instead."
        ) from exc
    if ts is pd.NaT:
        raise InvalidArgumentError(f"{what} must be a valid time. Got {value!r} instead.")
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def required_utc(value: Any, *, what: str = "time") -> pd.Timestamp:
    """:func:`to_utc` for a time that must be given: ``None`` or "" is refused by name."""
    ts = to_utc(value, what=what)
    if ts is None:
        raise InvalidArgumentError(f"{what} must be a time. Got {value!r} instead.")
    return ts


def utc_now() -> pd.Timestamp:
    """The current time as a UTC ``pandas.Timestamp``."""
    import pandas as pd

    return pd.Timestamp.now(tz="UTC")


def utc_now_iso(timespec: str = "microseconds") -> str:
    """The current UTC time as ISO-8601 text with a ``+00:00`` offset (no pandas needed)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec=timespec)


def iso(ts: pd.Timestamp | None) -> str | None:
    """ISO-8601 text of a UTC timestamp (``None`` stays ``None``)."""
    return None if ts is None else ts.isoformat()
