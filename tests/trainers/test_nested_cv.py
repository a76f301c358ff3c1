"""Nested cross-validation: refused where it cannot mean anything; on real Ray Tune it scores
the tune-then-refit procedure on outer rows the search never saw."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from pipelines.training import TrainingPipelineConfig


@pytest.mark.parametrize("options,message", [
    ({"cv": 3, "nested": True}, "needs --tune and --cv K"),
    ({"tune": True, "nested": True}, "needs --tune and --cv K"),
    ({"tune": True, "cv": 3, "nested": True, "workers": 2}, "drop --workers or --nested"),
])
def test_incompatible_combinations_are_refused(options, message):
    from fstrain.kernel.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        TrainingPipelineConfig(use_case="adult", training_dataset_version=1, **options)


def test_the_cli_refuses_nested_without_tune_and_with_smoke(tmp_path):
    from fstrain.cli.app import app

    runner = CliRunner()
    out = runner.invoke(app, ["train", "adult", "-t", "1", "--cv", "3", "--nested",
                              "--root", str(tmp_path)])
    assert out.exit_code == 2 and "needs --tune and --cv K" in out.output
    out = runner.invoke(app, ["train", "adult", "-t", "1", "--smoke", "--nested",
                              "--root", str(tmp_path)])
    assert out.exit_code == 2 and "--nested would be ignored" in out.output


@pytest.mark.slow
def test_outer_folds_score_the_tuning_procedure(binary_data, tmp_path):
    from fstrain.trainers.nested_cv import nested_cross_validate

    X_tr, y_tr, _X_va, _y_va = binary_data
    cfg = {"model": "xgboost", "params": {"n_estimators": 15},
           "tune": {"num_samples": 2, "max_t": 15}}
    result = nested_cross_validate(cfg, X_tr, y_tr, k=2, workdir=tmp_path, num_cpus=2)
    assert result.metric == "auc" and len(result.folds) == 2
    assert sum(f["held_out_rows"] for f in result.folds) == len(X_tr)  # every row held out once
    for fold in result.folds:
        assert fold["inner_train_rows"] + fold["inner_validation_rows"] == fold["fit_rows"]
        assert fold["fit_rows"] + fold["held_out_rows"] == len(X_tr)
        assert fold["best_params"] and 0.5 < fold["auc"] <= 1.0
    stats = result.summary["auc"]
    assert stats["min"] <= stats["mean"] <= stats["max"] and np.isfinite(stats["std"])
    assert result.to_dict()["procedure"].startswith("outer k-fold")
