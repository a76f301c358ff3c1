"""Ray Tune (ASHA + Optuna) and Ray Train data-parallel runs, kept tiny for 2 cores."""

from __future__ import annotations

import numpy as np
import pytest

from fstrain.kernel.errors import ConfigError
from fstrain.trainers import deepspeed_config, train_distributed, tune


@pytest.mark.slow
@pytest.mark.parametrize("model, size", [("xgboost", "max_depth"), ("lightgbm", "num_leaves")])
def test_tune_asha_stops_bad_trials_early(model, size, binary_data, short_tmp, capsys):
    X_tr, y_tr, X_va, y_va = binary_data
    config = {
        "model": model, "seed": 0, "early_stopping_rounds": None,
        "params": {"n_estimators": 16},
        "tune": {
            "num_samples": 4, "max_concurrent": 1, "metric": "val_logloss",
            "grace_period": 2, "reduction_factor": 2,
            "search_space": {
                "learning_rate": {"type": "loguniform", "low": 1e-4, "high": 0.5},
                size: {"type": "randint", "low": 2, "high": 4},
            },
        },
    }
    result = tune(config, X_tr, y_tr, X_va, y_va, workdir=short_tmp)
    assert "View detailed results" not in capsys.readouterr().out  # stdout stays for --json
    trials = result.trials
    assert len(trials) == 4 and result.max_t == 16
    assert (trials["iterations"] < 16).any(), trials  # ASHA cut at least one trial
    assert trials["stopped_early"].any() and (trials["iterations"] == 16).any()
    assert trials["best_val_logloss"].min() == pytest.approx(result.best_metric)
    assert set(result.best_params) == {"learning_rate", size}
    assert 2 <= result.best_params[size] <= 4
    best = result.best_config
    assert best.params["learning_rate"] == result.best_params["learning_rate"]
    assert 1 <= best.params["n_estimators"] <= 16
    assert (short_tmp / "ray_results" / "tune").is_dir()


def test_tune_rejects_bad_search_space_before_starting_ray(binary_data, short_tmp):
    X_tr, y_tr, X_va, y_va = binary_data
    with pytest.raises(ConfigError, match=r"search_space\.lr.*not a tunable option.*xgboost"):
        tune({"model": "xgboost", "tune": {"search_space": {"lr": {"type": "uniform", "low": 0,
                                                                   "high": 1}}}},
             X_tr, y_tr, X_va, y_va, workdir=short_tmp)
    with pytest.raises(ConfigError,
                       match=r"tune\.metric.*'val_acuracy'.*Did you mean 'val_accuracy'"):
        tune({"model": "xgboost", "tune": {"metric": "val_acuracy"}}, X_tr, y_tr, X_va, y_va,
             workdir=short_tmp)


def test_default_search_spaces_are_valid():
    from fstrain.trainers.config import validate_search_space
    from fstrain.trainers.tuning import default_search_space

    for model in ("xgboost", "lightgbm", "mlp", "cnn", "sklearn_logreg", "sklearn_rf"):
        validate_search_space(default_search_space(model), model)
    assert {"max_depth", "learning_rate", "subsample", "colsample_bytree", "min_child_weight",
            "n_estimators", "reg_lambda", "reg_alpha"} == set(default_search_space("xgboost"))
    assert {"hidden_sizes", "dropout", "lr", "weight_decay", "batch_size"} == set(
        default_search_space("mlp"))


@pytest.mark.slow
def test_two_worker_data_parallel_run(binary_data, short_tmp):
    X_tr, y_tr, X_va, y_va = binary_data
    result = train_distributed(
        {"model": "mlp", "torch": {"epochs": 3, "batch_size": 32, "lr": 0.01}},
        X_tr, y_tr, X_va, y_va, workdir=short_tmp, num_workers=2, use_gpu=False,
    )
    assert result.extra["world_size"] == 2 and result.extra["global_batch"] == 64
    assert result.extra["rank_metrics_agree"], result.extra["rank_metrics"]
    assert len(result.extra["rank_metrics"]) == 2
    assert result.metrics["auc"] > 0.7 and len(result.history) == 3
    # every rank saw half the rows per epoch: 900 train rows / 2 ranks / 32 = 15 steps
    assert result.history[-1]["global_step"] == 3 * 15
    # the registry's "distributed" record (the boosting runs' schema): no timings in it
    record = result.extra["distributed"]
    assert record["world_size"] == 2 and record["backend"] == "gloo"
    assert record["rows"] == len(X_tr) == 900 and record["each_row_once"] is True
    assert [(s["rank"], s["rows"]) for s in record["shards"]] == [(0, 450), (1, 450)]
    assert record["resumed_mid_epoch"] is False
    assert not [k for s in record["shards"] for k in s if k.endswith("_seconds")]
    proba = result.model.predict_proba(X_va)
    assert proba.shape == (len(X_va),) and np.isfinite(proba).all()
    assert (short_tmp / "checkpoints" / "best" / "model.safetensors").is_file()


def test_deepspeed_config_maps_our_options():
    ds = deepspeed_config({"model": "mlp", "torch": {"batch_size": 16, "grad_accum_steps": 4,
                                                     "lr": 3e-4, "amp": "bf16",
                                                     "grad_clip": 0.5, "warmup_steps": 10}},
                          world_size=8, steps_per_epoch=100)
    assert ds["zero_optimization"]["stage"] == 2
    assert ds["train_batch_size"] == 16 * 4 * 8 and ds["train_micro_batch_size_per_gpu"] == 16
    assert ds["bf16"]["enabled"] and not ds["fp16"]["enabled"]
    assert ds["optimizer"]["type"] == "AdamW" and ds["optimizer"]["params"]["lr"] == 3e-4
    assert ds["gradient_clipping"] == 0.5
    assert ds["scheduler"]["type"] == "WarmupCosineLR"
    assert ds["scheduler"]["params"]["total_num_steps"] == 20 * 100
    fp16 = deepspeed_config({"model": "mlp", "torch": {"amp": "fp16", "scheduler": "plateau"}})
    assert fp16["fp16"]["enabled"] and "scheduler" not in fp16
