"""Split strategies for training datasets (``create_train_test_split`` and friends).

A :class:`SplitSpec` is built and validated by :func:`make_split_spec`, stored with the training
dataset version (:meth:`SplitSpec.to_dict`) and applied by :func:`assign_splits`, which returns the
split name of every row. Split names are ``train``, ``validation`` and ``test`` (Hopsworks).

Strategies:

* ``random`` — rows are shuffled with ``numpy.random.default_rng(seed)``; ``int(n*test_size)``
  rows go to test, ``int(n*validation_size)`` to validation, the remainder to train.
* ``stratified`` — the same per class of the label (or ``stratify_column``): each class is split
  in the same proportions, with per-class counts rounded by largest remainder so the totals are
  ``int(n*size)``. Every class gets at least one row in every split, so a class with fewer rows
  than splits is refused (and the totals may then exceed ``int(n*size)`` by a few rows).
* ``group`` — the unique values of ``group_column`` are shuffled by seed and whole groups fill
  test, then validation, until each reaches ``int(n*size)`` rows (it may overshoot by less than
  one group); the remaining groups go to train. No group is in two splits.
* ``time`` — half-open windows ``[start, end)`` on the event time (UTC; naive = UTC). A ``None``
  start or end is unbounded. With sizes instead of bounds, the cut points are event-time
  quantiles: train is the earliest part, test the latest, and rows that share the cut timestamp
  all go to the later split. Rows with a null event time or outside every window get ``None``.

**Relative windows** (time strategy). Instead of dates, ``test_window`` (and ``validation_window``,
optionally ``train_window``) give durations counted back from an *anchor*: the data's last event
time (``anchor=None``) or a timestamp (e.g. the scheduler's ``HOPS_END_TIME``; rows at or after it
are left out). The test split is the last ``test_window`` before the anchor, validation the
``validation_window`` before it, with ``gap`` between splits; train is everything earlier (or the
``train_window`` before validation). :func:`resolve_time_bounds` turns them into explicit bounds
at materialization, and the stored spec keeps both, so a daily schedule keeps working as new data
arrives while every version records the exact dates it used.

**Gap.** With ``gap`` (time strategy only), rows whose event time is in
``[train_end, train_end + gap)`` — and for three-way splits also in
``[validation_end, validation_end + gap)`` — are dropped (split ``None``), so rolling aggregates
computed up to the cut cannot leak into the next split.

Time bounds take priority over sizes, as in Hopsworks: sizes passed together with bounds are
ignored (and dropped from the spec). The result depends only on the row order, the values and the
seed; the caller sorts the frame deterministically first.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from feature_store.core.order_statistics import GATHER_LIMIT, select_key_ranks
from fstrain.kernel.errors import (
    ConfigError,
    InvalidArgumentError,
    SchemaMismatchError,
    did_you_mean,
)
from fstrain.kernel.timeutil import to_utc

__all__ = [
    "NO_SPLIT",
    "SPLIT_NAMES",
    "STRATEGIES",
    "SplitSpec",
    "assign_split_codes",
    "assign_splits",
    "kfold_indices",
    "make_split_spec",
    "relative_bounds",
    "resolve_time_bounds",
    "time_split_codes_streamed",
]

STRATEGIES = ("random", "stratified", "group", "time")
SPLIT_NAMES = ("train", "validation", "test")
_BOUNDS = ("train_start", "train_end", "validation_start", "validation_end", "test_start", "test_end")
_WINDOWS = ("gap", "test_window", "validation_window", "train_window")


@dataclass(frozen=True)
class SplitSpec:
    """A validated split definition; build it with :func:`make_split_spec`.

    Attributes:
        strategy: ``"random"``, ``"stratified"``, ``"group"`` or ``"time"``.
        seed: seed of ``numpy.random.default_rng`` (the caller draws one if the user gave none).
        test_size, validation_size: fractions in (0, 1); ``validation_size`` is ``None`` for a
            two-way split; both ``None`` for a time split with explicit bounds.
        train_start … test_end: UTC window bounds of a time split (``None`` = unbounded).
        gap: rows in ``[train_end, train_end+gap)`` (and ``[validation_end, …+gap)``) are dropped.
        group_column: column whose values must not straddle splits (``group`` strategy).
        stratify_column: column to stratify on (``stratified``; defaults to the label).
    """

    strategy: str
    seed: int
    test_size: float | None = None
    validation_size: float | None = None
    train_start: pd.Timestamp | None = None
    train_end: pd.Timestamp | None = None
    validation_start: pd.Timestamp | None = None
    validation_end: pd.Timestamp | None = None
    test_start: pd.Timestamp | None = None
    test_end: pd.Timestamp | None = None
    gap: pd.Timedelta | None = None
    group_column: str | None = None
    stratify_column: str | None = None
    three_way: bool = False
    test_window: pd.Timedelta | None = None
    validation_window: pd.Timedelta | None = None
    train_window: pd.Timedelta | None = None
    anchor: pd.Timestamp | None = None

    @property
    def is_relative(self) -> bool:
        """Whether the windows are durations back from an anchor (see the module docstring)."""
        return self.test_window is not None

    @property
    def splits(self) -> tuple[str, ...]:
        """``("train", "test")`` or ``("train", "validation", "test")``."""
        return SPLIT_NAMES if self.three_way else ("train", "test")

    @property
    def has_time_bounds(self) -> bool:
        """Whether windows are explicit (as opposed to size-based cuts)."""
        return any(getattr(self, b) is not None for b in _BOUNDS)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (ISO-8601 times, ISO-8601 duration for ``gap``)."""
        d = asdict(self)
        for b in _BOUNDS:
            d[b] = None if d[b] is None else d[b].isoformat()
        for w in _WINDOWS:
            d[w] = None if d[w] is None else d[w].isoformat()
        d["anchor"] = None if self.anchor is None else self.anchor.isoformat()
        d["splits"] = list(self.splits)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SplitSpec:
        """Rebuild (and re-validate) a spec stored with :meth:`to_dict`."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"A stored split spec must be a dict. Got {type(d).__name__} instead.")
        known = {f for f in cls.__dataclass_fields__} | {"splits"}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(
                f"Stored split spec {dict(d)!r} has unknown keys {unknown}; expected a subset of "
                f"{sorted(known)}."
            )
        if "seed" not in d or "strategy" not in d:
            raise ConfigError(
                f"Stored split spec {dict(d)!r} must have 'strategy' and 'seed'. Got keys "
                f"{sorted(d)} instead."
            )
        kwargs = {k: v for k, v in d.items() if k not in ("splits", "three_way")}
        three_way = bool(d.get("three_way", len(d.get("splits") or ()) == 3))
        resolved = d.get("test_window") is not None and any(d.get(b) for b in _BOUNDS)
        try:
            return make_split_spec(three_way=three_way, resolved=resolved, **kwargs)
        except InvalidArgumentError as exc:
            raise ConfigError(f"Stored split spec is invalid: {exc}") from exc


# --------------------------------------------------------------------------- construction


def _size(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(
            f"{what} must be a float in the open interval (0, 1). Got {value!r} instead."
        )
    v = float(value)
    if not 0.0 < v < 1.0:
        raise InvalidArgumentError(
            f"{what} must be a float in the open interval (0, 1). Got {value!r} instead."
        )
    return v


def _gap(value: Any, what: str = "gap") -> pd.Timedelta | None:
    if value is None:
        return None
    try:
        if isinstance(value, bool) or isinstance(value, (int, float)):
            raise TypeError("bare number")
        gap = pd.Timedelta(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"{what} must be a pandas.Timedelta, a datetime.timedelta or a duration string such "
            f"as '1D'. Got {value!r} instead."
        ) from exc
    if gap is pd.NaT or gap < pd.Timedelta(0) or (what != "gap" and gap == pd.Timedelta(0)):
        kind = "non-negative" if what == "gap" else "positive"
        raise InvalidArgumentError(f"{what} must be a {kind} duration. Got {value!r} instead.")
    return gap


def _window(name: str, start: pd.Timestamp | None, end: pd.Timestamp | None) -> str:
    lo = "-inf" if start is None else start.isoformat()
    hi = "+inf" if end is None else end.isoformat()
    return f"{name} window [{lo}, {hi})"


def make_split_spec(
    strategy: str | None = None,
    *,
    seed: int,
    three_way: bool = False,
    test_size: float | None = None,
    validation_size: float | None = None,
    train_start: Any = None,
    train_end: Any = None,
    validation_start: Any = None,
    validation_end: Any = None,
    test_start: Any = None,
    test_end: Any = None,
    gap: Any = None,
    group_column: str | None = None,
    stratify_column: str | None = None,
    test_window: Any = None,
    validation_window: Any = None,
    train_window: Any = None,
    anchor: Any = None,
    resolved: bool = False,
) -> SplitSpec:
    """Validate split arguments and return a :class:`SplitSpec`.

    Relative time windows: ``test_window`` (+ ``validation_window`` for three-way, optional
    ``train_window``) are durations counted back from ``anchor`` (a timestamp; ``None`` = the
    data's last event time); they exclude sizes and explicit bounds. ``resolved=True`` is for
    stored specs whose relative windows were already turned into bounds (they keep both).

    ``strategy=None`` is inferred: any time bound → ``"time"``; else ``group_column`` →
    ``"group"``; else ``stratify_column`` → ``"stratified"``; else ``"random"``. Time bounds
    (str, datetime, ``pandas.Timestamp`` or epoch ms; naive = UTC) take priority over sizes:
    sizes given with bounds are ignored with a ``UserWarning``. Missing inner bounds are filled as
    Hopsworks does: ``train_end = train_end or validation_start or test_start`` (two-way:
    ``or test_start``), ``validation_start = validation_start or train_end``,
    ``validation_end = validation_end or test_start``, ``test_start = test_start or
    validation_end`` (two-way: ``or train_end``).

    Raises:
        InvalidArgumentError: unknown strategy (did-you-mean), sizes outside (0, 1) or summing to
            1 or more, missing sizes/bounds, empty, reversed or overlapping windows, a gap outside
            the time strategy, ``group`` without ``group_column``, a bad seed.
    """
    _check_seed(seed)
    if strategy is not None and strategy not in STRATEGIES:
        raise InvalidArgumentError(
            f"strategy must be one of {STRATEGIES}. Got {strategy!r} instead."
            f"{did_you_mean(str(strategy), STRATEGIES)}"
        )
    bounds = {b: to_utc(v, what=b) for b, v in zip(_BOUNDS, (
        train_start, train_end, validation_start, validation_end, test_start, test_end))}
    has_bounds = any(v is not None for v in bounds.values())
    test = _size(test_size, "test_size")
    val = _size(validation_size, "validation_size")
    gap_td = _gap(gap)
    windows, anchor_ts = _relative_windows(test_window, validation_window, train_window, anchor)
    relative = windows["test_window"] is not None
    if relative:
        _check_relative(strategy, three_way, windows, has_bounds and not resolved, test, val)
        strategy = "time"
    strategy = strategy or _inferred_strategy(has_bounds, group_column, stratify_column)
    _check_strategy_options(strategy, bounds, group_column, stratify_column, gap, gap_td)
    if not (relative and not has_bounds):  # else resolved against the data later
        test, val, bounds = _bounds_or_sizes(strategy, three_way, bounds, test, val)
    return SplitSpec(
        strategy=strategy,
        seed=int(seed),
        test_size=test,
        validation_size=val,
        gap=gap_td,
        group_column=group_column,
        stratify_column=stratify_column,
        three_way=bool(three_way),
        anchor=anchor_ts,
        **windows,
        **bounds,
    )


def _bounds_or_sizes(strategy: str, three_way: bool, bounds: dict[str, pd.Timestamp | None],
                     test: float | None, val: float | None
                     ) -> tuple[float | None, float | None, dict[str, pd.Timestamp | None]]:
    """Time bounds (filled and checked; sizes given with them are ignored with a warning) or
    checked sizes: ``(test_size, validation_size, bounds)``."""
    if strategy == "time" and any(v is not None for v in bounds.values()):
        if test is not None or val is not None:
            warnings.warn(
                "Time bounds take priority over sizes: test_size/validation_size are ignored.",
                UserWarning,
                stacklevel=3,
            )
        bounds = _fill_bounds(bounds, three_way)
        _check_windows(bounds, three_way)
        return None, None, bounds
    _check_sizes(strategy, three_way, test, val)
    return test, val, bounds


def _relative_windows(test_window: Any, validation_window: Any, train_window: Any,
                      anchor: Any) -> tuple[dict[str, pd.Timedelta | None], pd.Timestamp | None]:
    """The relative windows as durations and the anchor in UTC; the other windows and the
    anchor need ``test_window``."""
    windows = {w: _gap(v, w) for w, v in (("test_window", test_window),
                                          ("validation_window", validation_window),
                                          ("train_window", train_window))}
    anchor_ts = to_utc(anchor, what="anchor")
    if windows["test_window"] is None and (
            any(v is not None for v in windows.values()) or anchor_ts is not None):
        given = [k for k, v in {**windows, "anchor": anchor_ts}.items() if v is not None]
        raise InvalidArgumentError(
            f"{given} need test_window, the duration of the test split counted back from the "
            "anchor. Got test_window=None instead."
        )
    return windows, anchor_ts


def _check_seed(seed: Any) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgumentError(
            f"seed must be a non-negative integer. Got {seed!r} instead. Draw one with "
            "numpy.random.default_rng().integers(2**31) when the user passes None."
        )


def _inferred_strategy(has_bounds: bool, group_column: str | None,
                       stratify_column: str | None) -> str:
    """Any time bound → time; else group_column → group; else stratify_column → stratified."""
    if has_bounds:
        return "time"
    if group_column is not None:
        return "group"
    if stratify_column is not None:
        return "stratified"
    return "random"


def _check_strategy_options(strategy: str, bounds: dict[str, Any], group_column: str | None,
                            stratify_column: str | None, gap: Any, gap_td: Any) -> None:
    """Each option belongs to one strategy: refuse it with another."""
    if any(v is not None for v in bounds.values()) and strategy != "time":
        given = [b for b, v in bounds.items() if v is not None]
        raise InvalidArgumentError(
            f"Time bounds {given} only apply to strategy='time'. Got strategy={strategy!r} "
            "instead. Drop the bounds or use strategy='time'."
        )
    if group_column is not None and strategy != "group":
        raise InvalidArgumentError(
            f"group_column={group_column!r} only applies to strategy='group'. Got "
            f"strategy={strategy!r} instead."
        )
    if stratify_column is not None and strategy != "stratified":
        raise InvalidArgumentError(
            f"stratify_column={stratify_column!r} only applies to strategy='stratified'. Got "
            f"strategy={strategy!r} instead."
        )
    if strategy == "group" and not (isinstance(group_column, str) and group_column):
        raise InvalidArgumentError(
            f"strategy='group' needs group_column, the column whose values must not straddle "
            f"splits. Got group_column={group_column!r} instead."
        )
    if gap_td is not None and strategy != "time":
        raise InvalidArgumentError(
            f"gap only applies to strategy='time'. Got strategy={strategy!r} with gap={gap!r} "
            "instead."
        )


def _check_sizes(strategy: str, three_way: bool, test: float | None, val: float | None) -> None:
    """A size-based split needs test_size (and validation_size for three ways), summing below 1."""
    if test is None:
        extra = " or time bounds (train_end/test_start)" if strategy == "time" else ""
        raise InvalidArgumentError(
            f"A {strategy} split needs test_size{extra}. Got test_size=None instead."
        )
    if three_way and val is None:
        raise InvalidArgumentError(
            "A train/validation/test split needs validation_size in (0, 1). "
            "Got validation_size=None instead."
        )
    if not three_way and val is not None:
        raise InvalidArgumentError(
            f"validation_size is only for train/validation/test splits. Got "
            f"validation_size={val!r} for a train/test split instead."
        )
    total = test + (val or 0.0)
    if total >= 1.0:
        raise InvalidArgumentError(
            f"test_size + validation_size must be below 1 so train keeps rows. Got "
            f"{test!r} + {val or 0.0!r} = {total!r} instead."
        )


def _check_relative(strategy: str | None, three_way: bool, windows: dict[str, Any],
                    has_bounds: bool, test: float | None, val: float | None) -> None:
    if strategy not in (None, "time"):
        raise InvalidArgumentError(
            f"test_window/validation_window/train_window only apply to strategy='time'. Got "
            f"strategy={strategy!r} instead."
        )
    if has_bounds or test is not None or val is not None:
        raise InvalidArgumentError(
            "Relative windows (test_window, validation_window) replace time bounds and sizes: "
            "give one or the other. Got both instead."
        )
    if three_way and windows["validation_window"] is None:
        raise InvalidArgumentError(
            "A train/validation/test split with relative windows needs validation_window (e.g. "
            "'30D'). Got validation_window=None instead."
        )
    if not three_way and windows["validation_window"] is not None:
        raise InvalidArgumentError(
            "validation_window is only for train/validation/test splits. Got validation_window="
            f"{windows['validation_window']} for a train/test split instead."
        )


def relative_bounds(spec: SplitSpec, data_end: pd.Timestamp | None) -> dict[str, pd.Timestamp | None]:
    """Explicit bounds of a relative spec: its anchor, else ``data_end`` (the last event time).

    With gap ``g``: test is ``[A - test_window, A)``, validation ``[… - validation_window, …)``
    ending ``g`` before test, train ends ``g`` before validation. In the stored bounds the gap
    sits at the start of the later split (the rows dropped by :func:`assign_splits`).
    """
    anchor = spec.anchor if spec.anchor is not None else data_end
    if anchor is None or spec.test_window is None:
        raise InvalidArgumentError(
            f"Relative time windows need an anchor: the data has no event time (spec: "
            f"{spec.to_dict()}). Pass anchor= or load data first."
        )
    gap = spec.gap or pd.Timedelta(0)
    test_start = anchor - spec.test_window - gap
    out: dict[str, pd.Timestamp | None] = dict.fromkeys(_BOUNDS)
    out["test_start"] = test_start
    out["test_end"] = spec.anchor  # None (data end): every row up to the last one is test
    if spec.three_way:
        assert spec.validation_window is not None
        out["validation_end"] = test_start
        out["validation_start"] = out["train_end"] = test_start - spec.validation_window - gap
    else:
        out["train_end"] = test_start
    if spec.train_window is not None:
        assert out["train_end"] is not None
        out["train_start"] = out["train_end"] - spec.train_window
    return out


def _first(*values: pd.Timestamp | None) -> pd.Timestamp | None:
    return next((v for v in values if v is not None), None)


def _fill_bounds(b: dict[str, pd.Timestamp | None], three_way: bool) -> dict[str, pd.Timestamp | None]:
    b = dict(b)
    if three_way:
        b["train_end"] = _first(b["train_end"], b["validation_start"], b["test_start"])
        b["validation_start"] = _first(b["validation_start"], b["train_end"])
        b["validation_end"] = _first(b["validation_end"], b["test_start"])
        b["test_start"] = _first(b["test_start"], b["validation_end"])
        need: tuple[str, ...] = ("train_end", "validation_start", "validation_end", "test_start")
    else:
        if b["validation_start"] is not None or b["validation_end"] is not None:
            raise InvalidArgumentError(
                "validation_start/validation_end are only for train/validation/test splits. "
                f"Got validation_start={b['validation_start']}, validation_end="
                f"{b['validation_end']} for a train/test split instead."
            )
        b["train_end"] = _first(b["train_end"], b["test_start"])
        b["test_start"] = _first(b["test_start"], b["train_end"])
        need = ("train_end", "test_start")
    missing = [k for k in need if b[k] is None]
    if missing:
        raise InvalidArgumentError(
            f"A time split needs the inner bounds {list(need)}; could not derive {missing} from "
            f"the given bounds ({ {k: str(v) for k, v in b.items() if v is not None} }). Pass "
            "train_end and test_start (and validation_start/validation_end for three-way)."
        )
    return b


def _check_windows(b: dict[str, pd.Timestamp | None], three_way: bool) -> None:
    names = SPLIT_NAMES if three_way else ("train", "test")
    windows = [(n, b[f"{n}_start"], b[f"{n}_end"]) for n in names]
    for name, start, end in windows:
        if start is not None and end is not None and not start < end:
            raise InvalidArgumentError(
                f"The {_window(name, start, end)} is empty or reversed: {name}_start must be "
                f"before {name}_end. Got {name}_start={start.isoformat()} and "
                f"{name}_end={end.isoformat()} instead."
            )
    for (n1, _s1, e1), (n2, s2, _e2) in zip(windows, windows[1:]):
        if e1 is not None and s2 is not None and s2 < e1:
            raise InvalidArgumentError(
                f"The {_window(n1, _s1, e1)} overlaps the {_window(n2, s2, _e2)}: windows must be "
                f"in time order ({' < '.join(names)}) and must not overlap. Got {n2}_start="
                f"{s2.isoformat()} before {n1}_end={e1.isoformat()} instead."
            )


# --------------------------------------------------------------------------- assignment


def _column(frame: pd.DataFrame, column: str, what: str) -> pd.Series:
    if column not in frame.columns:
        cols = [str(c) for c in frame.columns]
        raise SchemaMismatchError(
            f"{what} column '{column}' is not in the frame (columns: {', '.join(cols)})."
            f"{did_you_mean(str(column), cols)}"
        )
    return frame[column]


def _event_times(frame: pd.DataFrame, spec: SplitSpec, event_time_column: str | None,
                 cache: bool = True) -> pd.Series:
    if event_time_column is None:
        raise InvalidArgumentError(
            f"A time split needs the event time: event_time_column must name a column. Got None "
            f"instead (spec: {spec.to_dict()}). Give the root feature group an event_time."
        )
    col = _column(frame, event_time_column, "Event time")
    try:
        # epoch milliseconds (Hopsworks' bigint); a bigint column holding nulls reaches pandas
        # as floats, which pd.to_datetime would read as nanoseconds
        if (pd.api.types.is_integer_dtype(col.dtype) or pd.api.types.is_float_dtype(col.dtype)):
            return pd.to_datetime(col, unit="ms", utc=True, cache=cache)
        return pd.to_datetime(col, utc=True, cache=cache)
    except (TypeError, ValueError) as exc:
        raise SchemaMismatchError(
            f"Event time column '{event_time_column}' must hold timestamps. Got dtype {col.dtype} "
            "instead."
        ) from exc


def _cut_sizes(m: int, spec: SplitSpec, event_time_column: str) -> tuple[int, int]:
    """Rows of the test and validation windows of a size-based time split of ``m`` non-null
    event times (``int(m * size)``); refused when a split would be empty."""
    assert spec.test_size is not None
    n_test = int(m * spec.test_size)
    n_val = int(m * spec.validation_size) if spec.three_way and spec.validation_size else 0
    if m == 0 or n_test == 0 or (spec.three_way and n_val == 0) or n_test + n_val >= m:
        raise InvalidArgumentError(
            f"A time split of {m} rows with non-null event time '{event_time_column}' leaves a "
            f"split empty (spec: {spec.to_dict()}). Use larger sizes or more data."
        )
    return n_test, n_val


def resolve_time_bounds(
    frame: pd.DataFrame, spec: SplitSpec, *, event_time_column: str
) -> SplitSpec:
    """Turn a size-based time spec into explicit windows (to store with the dataset version).

    The cut points are event times at the sorted positions ``m - n_test`` (and
    ``m - n_test - n_validation``), ``m`` the number of non-null event times and
    ``n_x = int(m * x_size)``. A spec that already has bounds is returned unchanged.
    """
    if spec.strategy != "time":
        raise InvalidArgumentError(
            f"resolve_time_bounds needs strategy='time'. Got strategy={spec.strategy!r} instead."
        )
    if spec.has_time_bounds:
        return spec
    if spec.is_relative:
        times = _event_times(frame, spec, event_time_column).dropna()
        bounds: dict[str, Any] = relative_bounds(spec, None if times.empty else pd.Timestamp(times.max()))
        return replace(spec, **bounds)
    assert spec.test_size is not None
    times = _event_times(frame, spec, event_time_column).dropna()
    m = len(times)
    n_test, n_val = _cut_sizes(m, spec, event_time_column)
    test_start = _order_statistic(times, m - n_test)
    if spec.three_way:
        val_start = _order_statistic(times, m - n_test - n_val)
        return replace(
            spec, test_size=None, validation_size=None, train_end=val_start,
            validation_start=val_start, validation_end=test_start, test_start=test_start,
        )
    return replace(spec, test_size=None, validation_size=None, train_end=test_start,
                   test_start=test_start)


def _order_statistic(times: pd.Series, k: int) -> pd.Timestamp:
    """The ``k``-th smallest of ``times`` (no nulls), as the sorted series' ``iloc[k]`` would
    be, found by a partition in linear time instead of sorting every row."""
    at = int(np.argpartition(times.array.asi8, k)[k])
    return pd.Timestamp(times.iloc[at])


#: split codes: a row's split is ``spec.splits[code]``; :data:`NO_SPLIT` for a dropped row
NO_SPLIT = -1
_TRAIN = 0


def _code(spec: SplitSpec, name: str) -> int:
    return spec.splits.index(name)


def _time_assign(frame: pd.DataFrame, spec: SplitSpec, event_time_column: str | None) -> np.ndarray:
    t = _event_times(frame, spec, event_time_column)
    if not spec.has_time_bounds:
        spec = resolve_time_bounds(frame, spec, event_time_column=event_time_column or "")
    return _time_codes(t, spec)


def _time_codes(t: pd.Series, spec: SplitSpec) -> np.ndarray:
    """Each event time's split code under ``spec``'s explicit windows (row by row)."""
    out = np.full(len(t), NO_SPLIT, dtype=np.int8)
    valid = t.notna().to_numpy()
    for code, name in enumerate(spec.splits):
        start, end = getattr(spec, f"{name}_start"), getattr(spec, f"{name}_end")
        mask = valid.copy()
        if start is not None:
            mask &= (t >= start).to_numpy()
        if end is not None:
            mask &= (t < end).to_numpy()
        out[mask] = code
    if spec.gap is not None and spec.gap > pd.Timedelta(0):
        edges = [spec.train_end] + ([spec.validation_end] if spec.three_way else [])
        for edge in edges:
            if edge is not None:
                out[(valid & (t >= edge).to_numpy() & (t < edge + spec.gap).to_numpy())] = NO_SPLIT
    return out


#: rows a chunked step over an O(rows) array touches at a time (bounded temporaries)
_CHUNK = 1 << 16

#: ``alloc(n, dtype)``: a new (uninitialised) array of ``n`` values, e.g. ``np.empty`` or a
#: disk-backed ``np.memmap``; every O(rows) array of an assignment comes from it
Alloc = Callable[[int, Any], np.ndarray]


def _arange_into(a: np.ndarray) -> np.ndarray:
    """Fill ``a`` with ``0 … len(a)-1`` in chunks (no O(len) temporary); returns ``a``."""
    for lo in range(0, len(a), _CHUNK):
        hi = min(lo + _CHUNK, len(a))
        a[lo:hi] = np.arange(lo, hi, dtype=a.dtype)
    return a


def _scatter(out: np.ndarray, index: np.ndarray, value: int) -> None:
    """``out[index] = value`` in chunks of ``index`` (the cast of a narrow index to intp stays
    chunk-sized)."""
    for lo in range(0, len(index), _CHUNK):
        out[index[lo:lo + _CHUNK]] = value


def _permutation(rng: np.random.Generator, n: int, alloc: Alloc = np.empty) -> np.ndarray:
    """``rng.permutation(n)`` in an ``alloc``ated array, in half the memory below 2**31 rows:
    ``permutation`` shuffles an arange, and the shuffle draws the same random numbers whatever
    the array's dtype or kind (a memmap included), so the permutation is the same."""
    perm = alloc(n, np.int32 if n < 2**31 else np.int64)
    rng.shuffle(_arange_into(perm.view(np.ndarray)))
    return perm


def _random_assign(n: int, spec: SplitSpec, alloc: Alloc = np.empty) -> np.ndarray:
    """A random split's codes: ``int(n*test_size)`` rows of a seeded permutation go to test,
    the next ``int(n*validation_size)`` to validation, the rest to train. Its two O(rows)
    arrays (the permutation and the codes) come from ``alloc``."""
    rng = np.random.default_rng(spec.seed)
    perm = _permutation(rng, n, alloc).view(np.ndarray)
    n_test, n_val = _random_sizes(n, spec)
    out = alloc(n, np.int8)
    view = out.view(np.ndarray)
    view[:] = _TRAIN
    _scatter(view, perm[:n_test], _code(spec, "test"))
    if n_val:
        _scatter(view, perm[n_test:n_test + n_val], _code(spec, "validation"))
    return out


def _random_sizes(n: int, spec: SplitSpec) -> tuple[int, int]:
    """Rows of test and validation in a random split of ``n`` rows."""
    n_test = int(n * (spec.test_size or 0.0))
    n_val = int(n * (spec.validation_size or 0.0)) if spec.three_way else 0
    return n_test, n_val


def _allocate(counts: np.ndarray, size: float, capacity: np.ndarray) -> np.ndarray:
    """Per-class rows for one split: ≥1 each, totals ``int(sum(counts)*size)`` by largest remainder."""
    desired = counts * size
    alloc = np.maximum(np.floor(desired).astype(np.int64), 1)
    alloc = np.minimum(alloc, capacity)
    target = int(counts.sum() * size)
    remainder = desired - np.floor(desired)
    order = np.lexsort((np.arange(len(counts)), -remainder))  # largest remainder first, stable
    deficit = target - int(alloc.sum())
    while deficit > 0:
        progressed = False
        for k in order:
            if deficit == 0:
                break
            if alloc[k] < capacity[k]:
                alloc[k] += 1
                deficit -= 1
                progressed = True
        if not progressed:
            break
    return alloc


def _factorize(values: Any, *, use_na_sentinel: bool) -> tuple[np.ndarray, pd.Index]:
    """``pd.factorize`` with sorted uniques, or in first-appearance order for values that do
    not sort (mixed types)."""
    try:
        return pd.factorize(values, sort=True, use_na_sentinel=use_na_sentinel)
    except TypeError:
        return pd.factorize(values, sort=False, use_na_sentinel=use_na_sentinel)


def _class_quotas(counts: np.ndarray, uniques: Any, spec: SplitSpec,
                  column: str) -> tuple[np.ndarray, np.ndarray]:
    """Per class (``counts[k]`` rows of ``uniques[k]``): the rows of test and of validation;
    a class with fewer rows than splits is refused."""
    n_splits = len(spec.splits)
    small = np.flatnonzero(counts < n_splits)
    if small.size:
        k = small[0]
        raise InvalidArgumentError(
            f"Stratified split on '{column}': class {uniques[k]!r} has {counts[k]} row(s), fewer "
            f"than the {n_splits} splits {spec.splits}; every class needs at least one row per "
            "split. Merge rare classes, drop them or use strategy='random'."
        )
    # each split must leave >= 1 row per class for the splits still to fill
    n_test = _allocate(counts, spec.test_size or 0.0, counts - (n_splits - 1))
    if spec.three_way:
        n_val = _allocate(counts, spec.validation_size or 0.0, counts - n_test - 1)
    else:
        n_val = np.zeros_like(counts)
    return n_test, n_val


def _stratified_assign(labels: pd.Series, spec: SplitSpec, column: str) -> np.ndarray:
    n = len(labels)
    codes, uniques = _factorize(labels, use_na_sentinel=False)
    counts = np.bincount(codes, minlength=len(uniques))
    n_test, n_val = _class_quotas(counts, uniques, spec, column)
    rng = np.random.default_rng(spec.seed)
    out = np.full(n, _TRAIN, dtype=np.int8)
    test, validation = _code(spec, "test"), _code(spec, "validation") if spec.three_way else 0
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for k in range(len(uniques)):
        rows = order[starts[k]:starts[k] + counts[k]]
        rows = rows[rng.permutation(len(rows))]
        out[rows[:n_test[k]]] = test
        out[rows[n_test[k]:n_test[k] + n_val[k]]] = validation
    return out


def _refuse_null_groups(nulls: int, spec: SplitSpec) -> None:
    if nulls:
        raise InvalidArgumentError(
            f"Group split on '{spec.group_column}': the group column must not be null. Got "
            f"{nulls} null row(s) instead. Fill or drop them first."
        )


def _group_splits(sizes: np.ndarray, n: int, spec: SplitSpec) -> np.ndarray:
    """Each group's split code (``sizes[g]`` rows in group ``g``, ``n`` rows in all): groups
    in seeded random order fill test, then validation, each up to ``int(n*size)`` rows."""
    rng = np.random.default_rng(spec.seed)
    perm = rng.permutation(len(sizes))
    targets = [(_code(spec, "test"), int(n * (spec.test_size or 0.0)))]
    if spec.three_way:
        targets.append((_code(spec, "validation"), int(n * (spec.validation_size or 0.0))))
    group_split = np.full(len(sizes), _TRAIN, dtype=np.int8)
    i = 0
    for code, target in targets:
        filled = 0
        while filled < target and i < len(perm):
            group_split[perm[i]] = code
            filled += sizes[perm[i]]
            i += 1
    return group_split


def _group_assign(groups: pd.Series, spec: SplitSpec) -> np.ndarray:
    _refuse_null_groups(int(groups.isna().sum()), spec)
    codes, uniques = _factorize(groups, use_na_sentinel=True)
    sizes = np.bincount(codes, minlength=len(uniques))
    return _group_splits(sizes, len(groups), spec)[codes]


def assign_splits(
    frame: pd.DataFrame,
    spec: SplitSpec,
    *,
    event_time_column: str | None = None,
    label_column: str | None = None,
) -> np.ndarray:
    """The split name of every row of ``frame`` (``None`` for rows dropped by a gap or window).

    Args:
        frame: rows already sorted deterministically by the caller.
        spec: from :func:`make_split_spec`.
        event_time_column: the root feature group's event time (``time`` strategy).
        label_column: stratification column when ``spec.stratify_column`` is ``None``.

    Returns:
        An object array of ``"train"``/``"validation"``/``"test"``/``None``, one per row.

    Raises:
        InvalidArgumentError: a split comes out empty, a class is too small to stratify, the
            event time or stratification column is not given.
        SchemaMismatchError: a named column is not in ``frame``.
    """
    codes = assign_split_codes(frame, spec, event_time_column=event_time_column,
                               label_column=label_column)
    names = np.array([*spec.splits, None], dtype=object)  # NO_SPLIT (-1) picks the last
    return names[codes]


def assign_split_codes(
    frame: pd.DataFrame,
    spec: SplitSpec,
    *,
    event_time_column: str | None = None,
    label_column: str | None = None,
) -> np.ndarray:
    """:func:`assign_splits` as one byte per row: the index of the row's split in
    ``spec.splits``, :data:`NO_SPLIT` for a dropped row (what out-of-core creation holds for
    every row, instead of an object array)."""
    if not isinstance(spec, SplitSpec):
        raise InvalidArgumentError(
            f"spec must be a SplitSpec from make_split_spec(). Got {type(spec).__name__} instead."
        )
    if spec.strategy == "time":
        out = _time_assign(frame, spec, event_time_column)
    elif spec.strategy == "random":
        out = _random_assign(len(frame), spec)
    elif spec.strategy == "stratified":
        column = spec.stratify_column or label_column
        if column is None:
            raise InvalidArgumentError(
                "A stratified split needs a column: pass label_column or stratify_column. "
                "Got neither instead."
            )
        out = _stratified_assign(_column(frame, column, "Stratification"), spec, column)
    elif spec.strategy == "group":
        assert spec.group_column is not None
        out = _group_assign(_column(frame, spec.group_column, "Group"), spec)
    else:  # pragma: no cover - make_split_spec rejects it
        raise InvalidArgumentError(f"Unknown split strategy {spec.strategy!r}.")
    _check_nonempty(out, spec)
    return out


#: codes compared at a time when checking that no split is empty (the codes may be a mapped
#: file of 100M rows: a comparison of them whole would take a byte per row)
_CHECK_BLOCK = 1 << 20


def _check_nonempty(out: np.ndarray, spec: SplitSpec) -> None:
    seen = np.zeros(len(spec.splits), dtype=bool)
    for start in range(0, len(out), _CHECK_BLOCK):
        block = np.asarray(out[start:start + _CHECK_BLOCK])
        for missing in np.flatnonzero(~seen):
            seen[missing] = bool((block == missing).any())
        if seen.all():
            return
    _refuse_empty(seen.tolist(), len(out), spec)


def _refuse_empty(present: Sequence[bool], rows: int, spec: SplitSpec) -> None:
    """Refuse a split assignment of ``rows`` rows in which split ``k`` has no row
    (``present[k]`` false)."""
    for name, has_rows in zip(spec.splits, present):
        if not has_rows:
            raise InvalidArgumentError(
                f"Split '{name}' is empty for {rows} row(s) with spec {spec.to_dict()}. "
                "Widen its window, raise its size or use more data."
            )


# --------------------------------------------------------------------------- streamed time split

#: a size-based cut gathers its candidate event times once at most this many remain
_GATHER_LIMIT = GATHER_LIMIT


def time_split_codes_streamed(
    read: Callable[[], Iterable[pd.DataFrame]],
    spec: SplitSpec,
    *,
    event_time_column: str,
    gather_limit: int = _GATHER_LIMIT,
    rows: int | None = None,
    alloc: Callable[[int, Any], np.ndarray] | None = None,
) -> tuple[SplitSpec, np.ndarray]:
    """:func:`assign_split_codes` of a time split from batches, without holding the event-time
    column whole: ``read()`` yields the rows' batches (frames holding ``event_time_column``) in
    the same order on every call. The cut times are found in a few passes (the maximum for a
    relative spec; for a size-based one a radix selection of the order statistics that
    :func:`resolve_time_bounds` takes, gathering a cut's candidates once at most
    ``gather_limit`` remain), then the codes batch by batch. Returns the spec the codes used
    (a relative one resolved to dates, as :func:`resolve_time_bounds` gives) and the codes:
    with ``rows`` (how many ``read()`` yields) and ``alloc(n, dtype)``, written batch by batch
    into ``alloc(rows, int8)`` (for example an array mapped from a file), else concatenated."""
    if spec.strategy != "time":
        raise InvalidArgumentError(
            f"time_split_codes_streamed needs strategy='time'. Got strategy={spec.strategy!r} "
            "instead."
        )

    def times() -> Iterator[pd.Series]:
        for batch in read():
            # no cache of unique values: its sampling costs each batch what it costs a column
            yield _event_times(batch, spec, event_time_column, cache=False)

    resolved, whole = spec, None
    if not spec.has_time_bounds:
        m, lo, hi, last, whole = _time_range(times(), gather_limit)
        if spec.is_relative:
            bounds: dict[str, Any] = relative_bounds(spec, last)
            resolved = replace(spec, **bounds)
        else:
            kept = whole
            resolved = _streamed_size_bounds(times if kept is None else lambda: iter([kept]),
                                             spec, event_time_column, (m, lo, hi, last),
                                             gather_limit)
    out = _coded(times() if whole is None else iter([whole]), resolved, rows, alloc)
    _check_nonempty(out, resolved if spec.is_relative else spec)  # the spec creation passes
    return resolved, out


def _refuse_row_count(got: str, rows: int) -> None:
    raise InvalidArgumentError(
        f"A streamed time split of {rows} row(s) got {got} row(s) from read()'s codes pass. "
        "read() must give the same rows on every pass."
    )


def _coded(times: Iterator[pd.Series], spec: SplitSpec, rows: int | None,
           alloc: Callable[[int, Any], np.ndarray] | None) -> np.ndarray:
    """The codes of every batch of ``times`` under ``spec``'s explicit windows: into
    ``alloc(rows, int8)`` when given, else concatenated."""
    if rows is None or alloc is None:
        parts = [_time_codes(t, spec) for t in times]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int8)
    out = alloc(rows, np.int8)
    offset = 0
    for t in times:
        if offset + len(t) > rows:
            _refuse_row_count(f"more than {rows}", rows)
        out[offset:offset + len(t)] = _time_codes(t, spec)
        offset += len(t)
    if offset != rows:
        _refuse_row_count(str(offset), rows)
    return out


def _time_range(batches: Iterable[pd.Series], gather_limit: int
                ) -> tuple[int, int, int, pd.Timestamp | None, pd.Series | None]:
    """The count, smallest and largest (as int64) and the largest (as a timestamp) of the
    non-null times; and every time (nulls included) when there are at most ``gather_limit``
    (no further pass is needed), else None."""
    m, lo, hi, last = 0, 0, 0, None
    kept: list[pd.Series] | None = []
    rows = 0
    for t in batches:
        rows += len(t)
        if kept is not None and rows > gather_limit:
            kept = None
        elif kept is not None:
            kept.append(t)
        t = t.dropna()
        if t.empty:
            continue
        v = t.array.asi8
        top = int(v.argmax())
        if m == 0 or int(v[top]) > hi:
            hi, last = int(v[top]), pd.Timestamp(t.iloc[top])
        lo = int(v.min()) if m == 0 else min(lo, int(v.min()))
        m += len(v)
    return m, lo, hi, last, pd.concat(kept) if kept else None


def _streamed_size_bounds(times: Callable[[], Iterator[pd.Series]], spec: SplitSpec,
                          event_time_column: str,
                          span: tuple[int, int, int, pd.Timestamp | None],
                          gather_limit: int) -> SplitSpec:
    """:func:`resolve_time_bounds` of a size-based spec from streamed times; ``span`` is
    :func:`_time_range`'s count, smallest and largest (as int64) and largest time."""
    assert spec.test_size is not None
    m, lo, hi, last = span
    n_test, n_val = _cut_sizes(m, spec, event_time_column)
    assert last is not None  # m > 0, or _cut_sizes refuses
    ks = [m - n_test] + ([m - n_test - n_val] if spec.three_way else [])
    test_start, *rest = _streamed_order_statistics(times, ks, m, lo, hi, gather_limit, last)
    if spec.three_way:
        (val_start,) = rest
        return replace(
            spec, test_size=None, validation_size=None, train_end=val_start,
            validation_start=val_start, validation_end=test_start, test_start=test_start,
        )
    return replace(spec, test_size=None, validation_size=None, train_end=test_start,
                   test_start=test_start)


def _streamed_order_statistics(times: Callable[[], Iterator[pd.Series]], ks: list[int], m: int,
                               lo: int, hi: int, gather_limit: int,
                               like: pd.Timestamp) -> list[pd.Timestamp]:
    """The ``k``-th smallest non-null time for each of ``ks``, as :func:`_order_statistic` on
    the whole column gives: the :func:`~feature_store.core.order_statistics.select_key_ranks`
    of the times' int64 ticks (``lo`` and ``hi`` their smallest and largest), as timestamps of
    ``like``'s unit and zone (the times' own)."""
    found = select_key_ranks(lambda: (t.dropna().array.asi8 for t in times()), ks, m, lo, hi,
                             gather_limit)
    return [pd.Timestamp(np.datetime64(found[k], like.unit)).tz_localize(like.tz) for k in ks]


# --------------------------------------------------------------------------- k-fold


def kfold_indices(
    n_rows: int, k: int, seed: int, stratify: Sequence[Any] | np.ndarray | pd.Series | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Deterministic (stratified) k-fold: ``k`` pairs ``(train_idx, val_idx)`` of sorted indices.

    Every row is in exactly one validation fold; fold sizes differ by at most one. With
    ``stratify`` the rows of each class are shuffled and dealt round-robin over the folds, so every
    fold holds each class's count ``±1``; a class with fewer than ``k`` rows is refused.
    """
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 0:
        raise InvalidArgumentError(f"n_rows must be a non-negative integer. Got {n_rows!r} instead.")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise InvalidArgumentError(f"k must be an integer of at least 2. Got {k!r} instead.")
    if k > n_rows:
        raise InvalidArgumentError(
            f"k must be at most the number of rows ({n_rows}) so no fold is empty. Got {k} instead."
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgumentError(f"seed must be a non-negative integer. Got {seed!r} instead.")
    rng = np.random.default_rng(seed)
    fold = np.empty(n_rows, dtype=np.int64)
    if stratify is None:
        perm = rng.permutation(n_rows)
        fold[perm] = np.arange(n_rows) % k
    else:
        labels = pd.Series(np.asarray(stratify, dtype=object) if not isinstance(stratify, pd.Series)
                           else stratify.to_numpy())
        if len(labels) != n_rows:
            raise InvalidArgumentError(
                f"stratify must have one value per row ({n_rows}). Got {len(labels)} instead."
            )
        try:
            codes, uniques = pd.factorize(labels, sort=True, use_na_sentinel=False)
        except TypeError:
            codes, uniques = pd.factorize(labels, sort=False, use_na_sentinel=False)
        counts = np.bincount(codes, minlength=len(uniques))
        small = np.flatnonzero(counts < k)
        if small.size:
            c = small[0]
            raise InvalidArgumentError(
                f"Stratified k-fold: class {uniques[c]!r} has {counts[c]} row(s), fewer than "
                f"k={k}; every class must appear in every fold. Lower k or merge rare classes."
            )
        order = np.argsort(codes, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        dealt = np.concatenate([
            rng.permutation(order[starts[c]:starts[c] + counts[c]]) for c in range(len(uniques))
        ])
        fold[dealt] = np.arange(n_rows) % k
    idx = np.arange(n_rows)
    return [(idx[fold != f], idx[fold == f]) for f in range(k)]
