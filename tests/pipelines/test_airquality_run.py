"""The airquality regression end to end through the real CLI: four pipelines, a registered
XGBoost regressor with RMSE/MAE/R² and bootstrap intervals, gates passed, month slices,
the naive-forecast (last value) baseline beaten and a residual plot."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app


@pytest.mark.slow
def test_fstrain_run_airquality(tmp_path) -> None:
    result = CliRunner().invoke(app, ["run", "airquality", "--root", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output[result.output.index("{"):])
    assert row["status"] == "passed" and row["key_metric"] == "rmse"
    card_dir = tmp_path / "model_registry" / "air_quality_ozone" / "1" / "history" / "0001"
    card = json.loads((card_dir / "scorecard.json").read_text())
    assert card["task"] == "regression"
    metrics = card["metrics"]
    assert {"rmse", "mae", "r2"} <= set(metrics) and metrics["r2"] > 0.3
    r2 = card["confidence_intervals"]["r2"]
    assert r2["lower"] < metrics["r2"] < r2["upper"]
    assert card["lineage"]["split"]["strategy"] == "time"
    assert card["lineage"]["split"]["gap"] == "P7DT0H0M0S"
    assert "month=" in json.dumps(card)  # errors by season (month helper column)
    naive = card["baselines"]["naive_forecast"]
    assert metrics["rmse"] < naive["rmse"] < card["baselines"]["mean_predictor"]["rmse"]
    assert (card_dir / "images" / "residuals.png").stat().st_size > 1000
    ablated = CliRunner().invoke(app, ["ablate", "airquality", "-t", "1", "--drop-group",
                                       "daily_weather", "--drop-feature", "ozone_last",
                                       "--root", str(tmp_path), "--json"])
    assert ablated.exit_code == 0, ablated.output
    table = json.loads(ablated.output[ablated.output.index("{"):])
    assert table["metric"] == "rmse" and not table["higher_is_better"]
    assert [r["item"] for r in table["items"]] == ["group daily_weather", "feature ozone_last"]
    assert table["items"][0]["dropped_columns"] == ["solar_r", "wind", "temp"]
    assert all(r["lower"] <= r["delta"] <= r["upper"] for r in table["items"])
