"""The tuning metric is selectable (F1 at its best threshold, PR-AUC, log-loss) and the XGBoost
space regularises (reg_lambda, reg_alpha)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from fstrain.cli.app import app
from fstrain.trainers.metrics import best_f1, classification_metrics
from fstrain.trainers.tuning import default_search_space


def test_best_f1_is_the_f1_of_the_best_threshold():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    s = np.round(np.clip(y * 0.3 + rng.random(300) * 0.8, 0, 1), 2)  # ties on purpose
    brute = max(
        2 * ((s >= t) & (y == 1)).sum() / ((s >= t).sum() + y.sum()) for t in np.unique(s)
    )
    assert best_f1(y, s) == pytest.approx(brute)
    assert classification_metrics(y, s, 2)["f1"] == pytest.approx(brute)


def test_xgboost_space_includes_regularisation():
    space = default_search_space("xgboost")
    assert {"reg_lambda", "reg_alpha"} <= set(space)


def test_lightgbm_refuses_f1_by_name(tmp_path):
    from fstrain.trainers.config import load_config
    from fstrain.trainers.lightgbm_trainer import lightgbm_params
    from fstrain.kernel.errors import ConfigError

    with pytest.raises(ConfigError, match="pr_auc"):
        lightgbm_params(load_config({"model": "lightgbm", "metric": "f1"}), 2, "f1")


def test_unknown_tune_metric_is_a_cli_error(tmp_path):
    result = CliRunner().invoke(app, ["train", "ccfraud", "-t", "1", "--tune", "--tune-metric",
                                      "f2", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "f1" in result.output


@pytest.mark.slow
def test_tune_on_f1_from_the_cli(tmp_path):
    root = tmp_path / "store"
    runner = CliRunner()
    assert runner.invoke(app, ["features", "ccfraud", "--n-transactions", "20000",
                               "--root", str(root)]).exit_code == 0
    assert runner.invoke(app, ["dataset", "ccfraud", "--root", str(root)]).exit_code == 0
    config = tmp_path / "tune.yaml"
    config.write_text(yaml.safe_dump({"tune": {"num_samples": 2, "max_concurrent": 2,
                                               "search_space": {
                                                   "n_estimators": {"type": "randint", "low": 5, "high": 20},
                                                   "reg_lambda": {"type": "loguniform", "low": 0.01, "high": 1.0}}}}))
    result = runner.invoke(app, ["train", "ccfraud", "-t", "latest", "--tune", "--tune-metric",
                                 "f1", "--config", str(config), "--json", "--root", str(root)])
    assert result.exit_code == 0, result.output
    ref = json.loads(result.stdout)  # stdout is the JSON answer alone (Ray logs to stderr)
    import feature_store

    model = feature_store.login(root=root).get_model_registry().get_model(ref["name"], ref["version"])
    tuning = model.manifest["training_config"]["tuning"]
    assert tuning["metric"] == "val_f1" and tuning["mode"] == "max"
    assert set(model.training_metrics) == {"validation_f1"}
    assert 0.0 < model.training_metrics["validation_f1"] <= 1.0
