"""Regression scorecard parts: the naive-forecast (last value) baseline and the residual plot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import ConfigError
from validation.evaluate import EvaluationData
from validation.evaluate_tasks import naive_forecast_baseline
from validation.plots import residuals_png


def _data(last):
    X = pd.DataFrame({"last": last, "x": [0.0] * len(last)})
    return EvaluationData(X_validation=X, X_test=X, y_train=pd.Series([10.0, 30.0]),
                          y_validation=pd.Series([1.0] * len(last)),
                          y_test=pd.Series([5.0, 7.0, 9.0]), helpers=pd.DataFrame(index=X.index))


def test_naive_forecast_scores_the_last_value_and_fills_missing_with_train_mean() -> None:
    out = naive_forecast_baseline(_data([4.0, np.nan, 9.0]), "last")
    # predictions 4, 20 (train mean), 9 against 5, 7, 9
    assert out["mae"] == pytest.approx((1 + 13 + 0) / 3)
    assert out["baseline"] == "naive_forecast" and "1 row(s)" in out["prior_source"]


def test_naive_forecast_column_must_be_a_feature() -> None:
    with pytest.raises(ConfigError, match="'ozone_last'.*features: last, x"):
        naive_forecast_baseline(_data([1.0, 2.0, 3.0]), "ozone_last")


def test_residuals_png_is_a_png() -> None:
    png = residuals_png([1.0, 2.0, 3.0, 4.0], [1.5, 1.5, 3.5, 3.0])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
