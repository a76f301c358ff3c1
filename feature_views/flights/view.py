"""Flights (nycflights13): will a flight arrive more than 15 minutes late?

Root ``flights`` (event time = scheduled departure). ``weather`` is joined point-in-time on
``origin`` (the latest hourly observation at or before the scheduled departure), ``planes`` on
``tailnum`` and ``airlines`` on ``carrier`` (plain joins: they have no event time).
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
        .join(weather.select_features(), on=["origin"])
        .join(planes.select_features(), on=["tailnum"])
        .join(airlines.select(["name"]), on=["carrier"], prefix="airline_")
    )
    return fs.get_or_create_feature_view(
        NAME, VERSION, query, labels=["is_delayed"],
        description="Flight arrival delay > 15 min; weather joined point-in-time by origin.",
    )


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
