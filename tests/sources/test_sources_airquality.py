"""airquality: the R table read as two groups; ozone features see only strictly earlier days,
and a windowed feature run equals a full run on the window's rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipelines import feature
from pipelines.feature.engineering import engineer
from feature_views.airquality import source as airquality

ENGINEERED = list(airquality.ENGINEERED)


def test_load_follows_rules(assert_follows_rules) -> None:
    frames = airquality.load()
    assert_follows_rules(frames, airquality.FEATURE_GROUPS)
    assert len(frames["air_quality"]) == len(frames["daily_weather"]) == 153
    assert int(frames["air_quality"]["ozone"].isna().sum()) == 37  # the R table's NAs


def test_engineering_drops_unlabelled_days_and_uses_only_earlier_days() -> None:
    out = engineer("airquality", airquality.load())["air_quality"].set_index("date")
    assert len(out) == 116 and out["ozone"].notna().all()
    may = lambda d: pd.Timestamp(f"1973-05-{d:02d}", tz="UTC")  # noqa: E731
    # May 9: the 7 days before are May 2..8 (41 on May 1 is out, May 5 unmeasured)
    assert out.loc[may(9), "ozone_count_7d"] == 6
    assert out.loc[may(9), "ozone_max_7d"] == 36.0
    assert out.loc[may(9), "ozone_lag_1d"] == out.loc[may(8), "ozone"]
    assert np.isnan(out.loc[may(6), "ozone_lag_1d"])  # May 5 was not measured
    assert out.loc[may(1), "ozone_count_7d"] == 0


def test_changing_a_day_never_changes_that_day_or_earlier_features() -> None:
    frames = airquality.load()
    changed = {k: v.copy() for k, v in frames.items()}
    day = pd.Timestamp("1973-07-12", tz="UTC")  # July 12 and 13 are both measured
    changed["air_quality"].loc[changed["air_quality"]["date"] == day, "ozone"] = 999.0
    a = engineer("airquality", frames)["air_quality"].set_index("date")
    b = engineer("airquality", changed)["air_quality"].set_index("date")
    upto = a.index <= day
    pd.testing.assert_frame_equal(a.loc[upto, ENGINEERED], b.loc[upto, ENGINEERED])
    assert b.loc[day + pd.Timedelta(days=1), "ozone_lag_1d"] == 999.0


def _read(project, name):
    fg = project.get_feature_store().get_feature_group(name, version=1)
    return fg.read().sort_values("date").reset_index(drop=True)


@pytest.mark.parametrize("window", [("1973-08-01", "1973-09-01"), ("1973-09-15", None)])
def test_windowed_run_equals_a_full_run_on_the_window_rows(tmp_path, window) -> None:
    import feature_store

    full_project = feature_store.login(root=tmp_path / "full")
    windowed_project = feature_store.login(root=tmp_path / "windowed")
    feature.run(full_project, feature.FeaturePipelineConfig(use_case="airquality"))
    start, end = window
    feature.run(windowed_project, feature.FeaturePipelineConfig(use_case="airquality",
                                                                start=start, end=end))
    for name in ("air_quality", "daily_weather"):
        full = _read(full_project, name)
        mask = full["date"] >= pd.Timestamp(start, tz="UTC")
        if end is not None:
            mask &= full["date"] < pd.Timestamp(end, tz="UTC")
        got = _read(windowed_project, name)
        assert len(got) == int(mask.sum()) > 0
        pd.testing.assert_frame_equal(got, full[mask].reset_index(drop=True))
    # the window's first day still has its lags (history was loaded before the window)
    assert _read(windowed_project, "air_quality")["ozone_count_7d"].iloc[0] > 0


def test_options_the_source_does_not_take_are_refused() -> None:
    with pytest.raises(ValueError, match="sample does not apply"):
        feature.FeaturePipelineConfig(use_case="airquality", sample=10)


def test_ozone_last_is_the_latest_measurement_before_the_day() -> None:
    out = engineer("airquality", airquality.load())["air_quality"].set_index("date")
    day = lambda s: pd.Timestamp(s, tz="UTC")  # noqa: E731
    assert np.isnan(out.loc[day("1973-05-01"), "ozone_last"])
    assert out.loc[day("1973-05-06"), "ozone_last"] == out.loc[day("1973-05-04"), "ozone"]  # skips May 5
    assert out.loc[day("1973-07-12"), "ozone_last"] == 85.0  # July 11 unmeasured, July 10 = 85
