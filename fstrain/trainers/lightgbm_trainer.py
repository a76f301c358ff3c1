"""LightGBM trainer: the same preprocessing, imbalance handling and record as the XGBoost one.

Numeric columns reach LightGBM unchanged (``numeric_preprocessing: auto``), categoricals one-hot
encoded by the train-fitted preprocessor. Early stopping watches the selection metric on the
validation split (it is listed first, and ``first_metric_only`` is set) and the returned model
keeps only the trees up to the best iteration, as XGBoost's ``save_best`` does. Training runs
with ``deterministic=True`` and ``force_row_wise=True``, so a fixed seed, data and thread count
give the same model.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

from fstrain.trainers.config import TrainConfig
from fstrain.trainers.metrics import resolve_metric
from fstrain.trainers.result import TrainResult
from fstrain.trainers.tabular import Prepared, Reporter, finish_booster
from fstrain.kernel.errors import ConfigError

# our metric name -> (LightGBM metric for binary, for multi-class)
_LGB_METRIC = {
    "auc": ("auc", "auc_mu"),
    "pr_auc": ("average_precision", "multi_logloss"),
    "logloss": ("binary_logloss", "multi_logloss"),
    "accuracy": ("binary_error", "multi_error"),
}
# LightGBM metric -> (history key, transform of the value)
_HISTORY_NAMES = {
    "binary_logloss": ("val_logloss", float),
    "multi_logloss": ("val_logloss", float),
    "binary_error": ("val_accuracy", lambda v: 1.0 - v),
    "multi_error": ("val_accuracy", lambda v: 1.0 - v),
    "auc": ("val_auc", float),
    "auc_mu": ("val_auc", float),
    "average_precision": ("val_pr_auc", float),
    "rmse": ("val_rmse", float),
    "l1": ("val_mae", float),
}


def lightgbm_params(
    config: TrainConfig, n_classes: int, metric: str
) -> tuple[dict[str, Any], int]:
    """Native LightGBM params (selection metric first) and the number of boosting rounds."""
    user = dict(config.params)
    rounds = int(user.pop("n_estimators", user.pop("num_boost_round", 200)))
    if "n_jobs" in user:
        user["num_threads"] = user.pop("n_jobs")
    params: dict[str, Any] = {
        "learning_rate": 0.1,
        "num_leaves": 31,
        "seed": config.seed,
        "deterministic": True,
        "force_row_wise": True,
        "verbosity": -1,
    }
    if n_classes == 0:
        params["objective"] = "regression"
        params["metric"] = ["l1", "rmse"] if metric == "mae" else ["rmse", "l1"]
    elif n_classes == 2:
        if metric == "f1":
            raise ConfigError(
                "metric='f1' is computed for xgboost, scikit-learn and torch models; LightGBM's "
                "early stopping takes its own metrics. Use metric='pr_auc' (or 'logloss') for "
                "lightgbm, or tune an xgboost model on f1."
            )
        params["objective"] = "binary"
        first = _LGB_METRIC[metric][0]
        params["metric"] = list(dict.fromkeys([first, "binary_logloss"]))
    else:
        params.update(objective="multiclass", num_class=n_classes)
        first = _LGB_METRIC[metric][1]
        params["metric"] = list(dict.fromkeys([first, "multi_logloss"]))
    params.update(user)
    return params, rounds


def lightgbm_history_row(iteration: int, results: list[tuple[Any, ...]]) -> dict[str, Any]:
    """One round's ``val_<metric>`` (and ``train_<metric>``) values of LightGBM's evaluation
    results in our metric names."""
    row: dict[str, Any] = {"round": iteration}
    for data_name, name, value, _higher_better, *_ in results:
        if data_name not in ("val", "train") or name not in _HISTORY_NAMES:
            continue
        key, convert = _HISTORY_NAMES[name]
        row[key.replace("val_", f"{data_name}_", 1)] = convert(float(value))
    return row


def train_lightgbm(
    config: TrainConfig,
    X_train: pd.DataFrame,
    y_train: pd.DataFrame,
    X_val: pd.DataFrame,
    y_val: pd.DataFrame,
    *,
    workdir: Path | None = None,
    report: Reporter | None = None,
    nthread: int | None = None,
) -> TrainResult:
    """Fit preprocessing + a LightGBM booster with early stopping on the validation split.

    ``report`` is called after every boosting round with the history row (for Ray Tune/ASHA).
    """
    import lightgbm as lgb

    t0 = time.perf_counter()
    data = Prepared(config, X_train, y_train, X_val, y_val, framework="lightgbm")
    t_prep = time.perf_counter()
    k = data.labels.n_classes
    metric, mode = resolve_metric(config, k)
    params, rounds = lightgbm_params(config, k, metric)
    if data.plan.scale_pos_weight is not None:
        params["scale_pos_weight"] = data.plan.scale_pos_weight
    if nthread is not None:
        params["num_threads"] = nthread
    dataset_params = {"max_bin": params.get("max_bin", 255), "verbosity": -1}
    dtrain = lgb.Dataset(data.X_train, label=data.y_train, weight=data.sample_weight,
                         params=dataset_params)
    dval = lgb.Dataset(data.X_val, label=data.y_val, reference=dtrain, params=dataset_params)
    history: list[dict[str, Any]] = []

    def record(env: Any) -> None:
        row = lightgbm_history_row(env.iteration, env.evaluation_result_list)
        history.append(row)
        if report is not None:
            report(row)

    callbacks: list[Any] = [record]
    if config.early_stopping_rounds:
        callbacks.append(lgb.early_stopping(config.early_stopping_rounds,
                                            first_metric_only=True, verbose=False))
    # the train set is scored too (learning curves); early stopping skips it
    booster = lgb.train(params, dtrain, num_boost_round=rounds, valid_sets=[dtrain, dval],
                        valid_names=["train", "val"], callbacks=callbacks)
    best_rounds = booster.best_iteration or booster.current_iteration()
    if best_rounds < booster.current_iteration():  # keep the best trees only (save_best)
        booster = lgb.Booster(model_str=booster.model_to_string(num_iteration=best_rounds))
    t_fit = time.perf_counter()
    notes = [
        "LightGBM with deterministic=True and force_row_wise=True: the same model for a fixed "
        "seed, data and num_threads",
    ]
    if k > 2 and metric == "auc":
        notes.append("LightGBM's multi-class validation AUC during boosting is AUC-mu; the "
                     "reported metrics use one-vs-rest macro AUC")
    final = {**params, "n_estimators": best_rounds, "requested_rounds": rounds}
    return finish_booster(
        "lightgbm", booster, data, config, params=final, history=history, notes=notes,
        metric=(metric, mode), best_iteration=best_rounds - 1, device="cpu",
        timings=(t0, t_prep, t_fit),
    )
