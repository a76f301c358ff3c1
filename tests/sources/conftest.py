"""Shared checks for the offline-source tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pandas as pd
import pytest

from feature_views.source_spec import FeatureGroupSpec, check_frame


def _assert_follows_rules(frames: dict[str, pd.DataFrame], specs: Iterable[FeatureGroupSpec]) -> None:
    specs = tuple(specs)
    assert set(frames) == {s.name for s in specs}, "load() must return exactly the module's groups"
    for spec in specs:
        frame = frames[spec.name]
        assert isinstance(frame, pd.DataFrame)
        assert check_frame(frame, spec) == [], spec.name
        for column in spec.primary_key:
            assert column in frame.columns
        if spec.event_time is not None:
            assert str(frame[spec.event_time].dtype) == "datetime64[ns, UTC]"
        assert set(spec.feature_tags) <= set(spec.columns), spec.name
        for expectation in spec.expectations:
            columns = expectation.kwargs.get("column_list") or [expectation.kwargs.get("column")]
            assert set(columns) <= set(spec.columns), (spec.name, expectation)


@pytest.fixture
def assert_follows_rules() -> Callable[[dict[str, pd.DataFrame], Iterable[FeatureGroupSpec]], None]:
    """``assert_follows_rules(frames, specs)``: every frame obeys the source rules and its spec."""
    return _assert_follows_rules
