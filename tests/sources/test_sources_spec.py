"""spec.check_frame, Expectation, get_source and the shared parameter checks."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError, NotFoundError
from feature_views import USE_CASES, get_source
from feature_views.source_common import check_window, in_window
from feature_views.source_spec import Expectation, FeatureGroupSpec, check_frame

SPEC = FeatureGroupSpec(
    name="things",
    version=1,
    primary_key=("thing_id",),
    event_time="ts",
    description="test",
    feature_descriptions={"thing_id": "id", "ts": "time", "value": "value"},
    tags={},
    feature_tags={},
    expectations=(Expectation("ExpectColumnValuesToNotBeNull", {"column": "value"}),),
)


def _frame(**overrides: object) -> pd.DataFrame:
    data = {
        "thing_id": [1, 2, 3],
        "ts": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"], utc=True),
        "value": [1.0, 2.0, 3.0],
    }
    data.update(overrides)
    return pd.DataFrame(data)


def test_check_frame_accepts_valid_frame() -> None:
    assert check_frame(_frame(), SPEC) == []
    assert SPEC.columns == ("thing_id", "ts", "value")
    assert SPEC.key_columns == ("thing_id", "ts")
    hash(SPEC)  # dict fields are excluded from the hash


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"thing_id": [1.0, None, 3.0]}, "null"),
        ({"thing_id": [1, 1, 3], "ts": pd.to_datetime(["2024-01-01"] * 3, utc=True)}, "duplicate"),
        ({"ts": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"])}, "UTC"),
        ({"value": pd.array([1, 2, 3], dtype="int32")}, "int64 or float64"),
    ],
)
def test_check_frame_reports_problems(overrides: dict, fragment: str) -> None:
    problems = check_frame(_frame(**overrides), SPEC)
    assert any(fragment in p for p in problems), problems


def test_check_frame_reports_bad_column_names() -> None:
    problems = check_frame(_frame().rename(columns={"value": "Value"}), SPEC)
    assert any("lower-case" in p for p in problems)
    assert any("differ from spec" in p for p in problems)


def test_expectation_to_gx_builds_and_rejects_unknown_type() -> None:
    built = Expectation("ExpectColumnValuesToNotBeNull", {"column": "x"}).to_gx()
    assert type(built).__name__ == "ExpectColumnValuesToNotBeNull"
    with pytest.raises(InvalidArgumentError, match="ExpectNothing"):
        Expectation("ExpectNothing", {}).to_gx()


def test_get_source_returns_modules_and_suggests_names() -> None:
    for name in USE_CASES:
        module = get_source(name)
        assert callable(module.load)
        assert module.FEATURE_GROUPS
    with pytest.raises(NotFoundError, match="Did you mean 'flights'"):
        get_source("flight")


def test_window_must_be_ordered_datetimes() -> None:
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(InvalidArgumentError, match="'start'"):
        check_window(t0, t0)
    with pytest.raises(InvalidArgumentError, match="'end'"):
        check_window(None, "2024-01-01")  # type: ignore[arg-type]
    lo, hi = check_window(datetime(2024, 1, 1), t0 + timedelta(hours=1))  # naive → UTC
    assert str(lo.tz) == "UTC" and lo == t0 and hi == t0 + timedelta(hours=1)


def test_in_window_is_half_open() -> None:
    frame = _frame()
    lo, hi = check_window(datetime(2024, 1, 1, tzinfo=timezone.utc), datetime(2024, 1, 3, tzinfo=timezone.utc))
    assert in_window(frame, "ts", lo, hi)["thing_id"].tolist() == [1, 2]
