"""What a training-dataset split is: the :class:`SplitSpec` value (strategy, sizes or
half-open time bounds, relative windows, gap, seed), validated once by :func:`make_split_spec`
and stored with every version, and :func:`relative_bounds`, which turns relative windows into
dates. The strategies' semantics are documented in :mod:`feature_store.core.splits`."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import (
    ConfigError,
    InvalidArgumentError,
    did_you_mean,
)
from fstrain.kernel.timeutil import to_utc


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

    def setting_of(self, split: str) -> str:
        """The setting that decides how many rows ``split`` gets, as the user wrote it:
        ``test_size=0.001``, ``test_start=2030-01-01 00:00:00+00:00``, ``test_window=30 days``
        (an error message names it instead of the whole spec)."""
        if self.is_relative:
            window = {"test": self.test_window, "validation": self.validation_window,
                      "train": self.train_window}[split]
            if window is None:  # train: what is left before validation (and the gap)
                return (f"test_window={self.test_window}"
                        + (f", validation_window={self.validation_window}"
                           if self.validation_window is not None else "")
                        + (f", gap={self.gap}" if self.gap is not None else ""))
            return f"{split}_window={window}"
        if self.has_time_bounds:
            start, end = getattr(self, f"{split}_start"), getattr(self, f"{split}_end")
            return f"{split}_start={start or 'unbounded'}, {split}_end={end or 'unbounded'}"
        if split == "train":
            sizes = [f"test_size={self.test_size}"]
            if self.three_way:
                sizes.append(f"validation_size={self.validation_size}")
            return " + ".join(sizes)
        size = self.test_size if split == "test" else self.validation_size
        grouped = f" (whole groups of '{self.group_column}')" if self.group_column else ""
        return f"{split}_size={size}{grouped}"

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


def empty_split_message(spec: SplitSpec, split: str, rows: int) -> str:
    """``Split 'test' is empty for 60 row(s): test_size=0.001 gives it none. ...``: the one
    setting that emptied ``split`` and what to change."""
    setting = spec.setting_of(split)
    if spec.is_relative or spec.has_time_bounds:
        fix = f"Widen the {split} window or use more data."
    elif split == "train":
        fix = "Lower the sizes or use more data."
    else:
        one_row = f" (one row is {1 / rows:.2g} of {rows})" if rows else ""
        fix = f"Raise {split}_size{one_row} or use more data."
    return f"Split '{split}' is empty for {rows} row(s): {setting} gives it none. {fix}"


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
            f"Relative time windows ({spec.setting_of('test')}) need an anchor, and the data "
            "has no event time to end at. Pass anchor= or load data first."
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
