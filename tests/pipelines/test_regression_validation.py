"""A regression model through training (XGBoost) and the model-validation pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines import model_validation
from fstrain.trainers import train


@pytest.fixture
def regression_model(project, tmp_path):
    rng = np.random.default_rng(3)
    n = 1200
    fs = project.get_feature_store()
    fg = fs.get_or_create_feature_group("houses", version=1, primary_key=["hid"])
    area = rng.uniform(30, 200, n)
    region = rng.choice(["north", "south"], n)
    fg.insert(pd.DataFrame({
        "hid": np.arange(n), "area": area, "rooms": rng.integers(1, 6, n), "region": region,
        "price": 2.0 * area + (region == "north") * 40 + rng.normal(0, 5, n),
    }))
    fv = fs.create_feature_view("house_prices", query=fg.select_all(), labels=["price"],
                                training_helper_columns=["region"])
    version, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=1)
    X_tr, X_va, _, y_tr, y_va, _ = fv.get_train_validation_test_split(version)
    result = train({"model": "xgboost", "task": "regression", "params": {"n_estimators": 80}},
                   X_tr, y_tr, X_va, y_va, workdir=tmp_path / "run")
    model_dir = tmp_path / "model"
    result.model.save(model_dir)
    model = project.get_model_registry().python.create_model(
        "house_prices", metrics={"rmse": result.metrics["rmse"]}, feature_view=fv,
        training_dataset_version=version)
    model.save(str(model_dir))
    return model


def test_regression_scorecard(project, regression_model):
    ref = model_validation.run(project, model_validation.ModelValidationConfig(
        model_name="house_prices", gates=["rmse <= 30", "r2 >= 0.9", "better_than_baseline"],
        bootstrap_resamples=30, shap_samples=40))
    assert ref.status == "passed" and ref.key_metric == "rmse" and ref.key_value < 30  # region (+40) is a helper: unseen
    card = json.loads(Path(ref.scorecard_html).with_name("scorecard.json").read_text())
    sources = {g["gate"]: g["source"] for g in card["gate_selection"]["gates"]}
    assert sources == {"explanation_available": "fstrain standard", "rmse <= 30": "config file",
                       "r2 >= 0.9": "config file", "better_than_baseline": "config file"}
    assert card["task"] == "regression"
    assert "threshold_chosen_on" not in card["evaluation"]  # a regression has no threshold
    assert {"mae", "mse", "rmse", "r2"} <= set(card["metrics"])
    assert card["baselines"]["mean_predictor"]["rmse"] > card["metrics"]["rmse"]
    assert card["confidence_intervals"]["rmse"]["lower"] <= card["metrics"]["rmse"]
    assert any("region=north" in note for note in card["notes"])
    assert card["explanation"]["global_importance"][0]["feature"].endswith("area")
    failed = model_validation.run(project, model_validation.ModelValidationConfig(
        model_name="house_prices", version=1, gates=["rmse <= 0.01"], bootstrap_resamples=20,
        shap_samples=10))
    assert failed.status == "failed"
    assert failed.verdict.startswith("FAILED: rmse <= 0.01 (value ") and "required <= 0.01" in failed.verdict
    assert "r2" not in failed.verdict  # only the failing gate is named
