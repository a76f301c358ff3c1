"""Air quality (New York 1973): how much ozone will there be today? A regression.

Root ``air_quality`` (event time = the day) carries the label ``ozone`` and its lagged and
rolling values from strictly earlier days; ``daily_weather`` is joined point-in-time on ``city``
(the same day's weather, standing in for a forecast). ``month`` is a training helper column:
the scorecard's errors by season, never a feature. Time split with a 7-day gap, as long as the
longest rolling window, so no validation or test day's features overlap the training labels.
"""

from __future__ import annotations

from typing import Any

from feature_views import UseCase

NAME = "air_quality_ozone"
VERSION = 1
HELPERS = ["month"]


def build(fs: Any) -> Any:
    """Get or create the ``air_quality_ozone`` feature view."""
    air = fs.get_feature_group("air_quality", 1)
    weather = fs.get_feature_group("daily_weather", 1)
    query = air.select_except(["city"]).join(weather.select_except(["city", "date", "known_at"]), on=["city"])
    return fs.get_or_create_feature_view(
        NAME, VERSION, query, labels=["ozone"], training_helper_columns=HELPERS,
        description="Daily ozone (ppb) from past ozone and the day's weather; a regression.",
    )


USE_CASE = UseCase(
    name="airquality",
    description=__doc__.splitlines()[0],
    feature_view_name=NAME,
    feature_view_version=VERSION,
    build_feature_view=build,
    # the last 30 days are the test set, the 21 before validation, 7 days apart
    split={"split": "time", "test_window": "30D", "validation_window": "21D", "gap": "7D"},
    model={"model": "xgboost", "task": "regression", "metric": "rmse",
           "params": {"n_estimators": 200, "max_depth": 3, "learning_rate": 0.05}},
    gates=("r2 >= 0.3", "better_than_baseline"),
    model_name="air_quality_ozone",
    task="regression",
    naive_forecast="ozone_last",
    demo={"model": {"params": {"n_estimators": 120}}},
)
