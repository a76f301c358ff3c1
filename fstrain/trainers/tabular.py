"""Tabular trainers: preprocessing (fitted on train only) + XGBoost or a scikit-learn estimator.

XGBoost uses ``tree_method="hist"``, ``device="cuda"`` when a GPU and a CUDA build of XGBoost
are present (or the config asks), and early stopping on the validation split, whose features go
through the preprocessor fitted on the train split. Imbalance handling touches the train split
only (see :mod:`fstrain.trainers.imbalance`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError
from fstrain.trainers.config import TrainConfig
from fstrain.trainers.curves import LearningCurves, from_history
from fstrain.trainers.data import FeatureSchema, LabelInfo, label_info
from fstrain.trainers.imbalance import ImbalancePlan, plan_imbalance
from fstrain.trainers.metrics import (
    best_f1,
    classification_metrics,
    regression_metrics,
    resolve_metric,
)
from fstrain.trainers.preprocessing import fit_transform, transform
from fstrain.trainers.result import TrainResult
from fstrain.trainers.tabular_predictor import TabularPredictor
from fstrain.trainers.calibration import calibrate, check_method

Reporter = Callable[[dict[str, Any]], None]

# our metric name -> (xgboost eval_metric binary, multiclass)
_XGB_METRIC = {
    "auc": ("auc", "auc"),
    "pr_auc": ("aucpr", "aucpr"),
    "logloss": ("logloss", "mlogloss"),
    "accuracy": ("error", "merror"),
    "f1": (None, None),  # a custom metric (xgboost_f1), computed after every round
}


def xgboost_f1(predt: np.ndarray, dmatrix: Any) -> tuple[str, float]:
    """XGBoost ``custom_metric``: binary F1 at its best threshold on the evaluation set."""
    return "f1", best_f1(dmatrix.get_label(), predt)


def xgboost_device(requested: str) -> tuple[str, list[str]]:
    """Resolve ``auto|cpu|cuda`` for XGBoost; returns the device and notes for the record."""
    import xgboost as xgb

    cuda_build = bool(xgb.build_info().get("USE_CUDA", False))
    if requested == "cpu":
        return "cpu", []
    if requested == "cuda":
        if not cuda_build:
            raise ConfigError(
                "device='cuda' but the installed XGBoost has no CUDA support (xgboost-cpu); "
                "install the 'xgboost' wheel or set device: auto/cpu."
            )
        return "cuda", []
    if not cuda_build:
        return "cpu", []
    import torch

    return ("cuda", []) if torch.cuda.is_available() else ("cpu", [])


class BoosterInputs(Protocol):
    """What :func:`finish_booster` needs of the fitted data: :class:`Prepared` (the splits in
    memory) or the streamed fit of distributed boosting
    (:class:`fstrain.trainers.ray_boosting.StreamedFit`, which holds no split)."""

    schema: FeatureSchema
    preprocessor: Any
    labels: LabelInfo
    plan: ImbalancePlan
    numeric_mode: str

    @property
    def rows_train(self) -> int:
        """Train rows the booster was fitted on."""
        ...

    def validation_scores(self, predictor: Any) -> tuple[np.ndarray, np.ndarray]:
        """``predictor``'s raw validation probabilities and the encoded validation labels."""
        ...


class Prepared:
    """Train/validation matrices after label encoding, preprocessing and imbalance handling."""

    def __init__(
        self,
        config: TrainConfig,
        X_train: pd.DataFrame,
        y_train: pd.DataFrame,
        X_val: pd.DataFrame,
        y_val: pd.DataFrame,
        *,
        framework: str,
    ) -> None:
        self.labels: LabelInfo = label_info(y_train, config.task)
        self.y_train_raw = self.labels.encode(y_train, split="train")
        if self.labels.task != "regression":
            check_method(config.calibration, self.labels.classes)
        self.y_val = self.labels.encode(y_val, split="validation")
        self.schema = FeatureSchema.infer(X_train)
        # Fit on the original train rows (unbiased imputation/scaling), resample afterwards.
        self.numeric_mode = config.numeric_mode
        self.preprocessor, x_train = fit_transform(
            self.schema, X_train, max_categories=config.max_categories,
            numeric=self.numeric_mode,
        )
        self.X_val = transform(self.preprocessor, self.schema, X_val)
        if self.labels.task == "regression":  # no classes to balance
            self.plan: ImbalancePlan = ImbalancePlan(
                strategy="none", record={"strategy": "none", "task": "regression"})
            self.X_train, self.y_train = x_train, self.y_train_raw
            self.sample_weight = None
            return
        self.plan = plan_imbalance(
            config.imbalance,
            self.y_train_raw,
            self.labels.classes,
            seed=config.seed,
            y_val=self.y_val,
            framework=framework,
        )
        if self.plan.indices is not None:
            self.X_train = x_train[self.plan.indices]
            self.y_train = self.y_train_raw[self.plan.indices]
        else:
            self.X_train, self.y_train = x_train, self.y_train_raw
        self.sample_weight = self.plan.sample_weight(self.y_train)

    @property
    def rows_train(self) -> int:
        """Train rows the model is fitted on (after any resampling)."""
        return len(self.y_train)

    def validation_scores(self, predictor: Any) -> tuple[np.ndarray, np.ndarray]:
        """``predictor``'s raw validation probabilities and the encoded validation labels."""
        return predictor.raw_proba_matrix(self.X_val), self.y_val


#: Above this many bytes of train matrix, CPU training also builds a QuantileDMatrix.
QUANTILE_DMATRIX_MIN_BYTES = 1 << 30


def use_quantile_dmatrix(device: str, X_train: np.ndarray) -> bool:
    """QuantileDMatrix on GPU (it keeps only the quantised matrix in device memory) and for large
    CPU data (same reason, host memory); a plain DMatrix otherwise, where building the sketch up
    front costs more than the hist sketch inside the first round (≈0.17 s vs 0.02 s at 80k×20)."""
    return device == "cuda" or X_train.nbytes >= QUANTILE_DMATRIX_MIN_BYTES


def xgboost_params(
    config: TrainConfig, n_classes: int, metric: str, device: str
) -> tuple[dict[str, Any], int]:
    """Native XGBoost params and number of rounds from the config."""
    user = dict(config.params)
    rounds = int(user.pop("n_estimators", user.pop("num_boost_round", 200)))
    if "n_jobs" in user:
        user["nthread"] = user.pop("n_jobs")
    params: dict[str, Any] = {
        "tree_method": "hist",
        "device": device,
        "seed": config.seed,
        "learning_rate": 0.1,
        "max_depth": 6,
        "verbosity": 0,
    }
    if n_classes == 0:  # regression
        params["objective"] = "reg:squarederror"
        eval_metrics = ["mae", "rmse"] if metric == "rmse" else ["rmse", "mae"]
        params["eval_metric"] = eval_metrics  # the last one drives early stopping
        params.update(user)
        return params, rounds
    eval_metrics = ["logloss" if n_classes == 2 else "mlogloss"]
    xgb_metric = _XGB_METRIC[metric][0 if n_classes == 2 else 1]
    if xgb_metric is not None and xgb_metric not in eval_metrics:
        eval_metrics.append(xgb_metric)  # the last one drives early stopping
    if n_classes == 2:
        params["objective"] = "binary:logistic"
    else:
        params.update(objective="multi:softprob", num_class=n_classes)
    params["eval_metric"] = eval_metrics
    params.update(user)
    return params, rounds


def xgboost_history_row(round_: int, evals_log: dict[str, Any]) -> dict[str, Any]:
    """One round's ``val_<metric>`` (and ``train_<metric>``) values in our metric names."""
    row: dict[str, Any] = {"round": round_}
    for split in ("val", "train"):
        for name, values in evals_log.get(split, {}).items():
            value = float(values[-1])
            if name in ("error", "merror"):
                row[f"{split}_accuracy"] = 1.0 - value
            elif name in ("logloss", "mlogloss"):
                row[f"{split}_logloss"] = value
            elif name == "aucpr":
                row[f"{split}_pr_auc"] = value
            else:
                row[f"{split}_{name}"] = value
    return row


def train_xgboost(
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
    """Fit preprocessing + an XGBoost booster with early stopping on the validation split.

    ``report`` is called after every boosting round with the history row (Ray Tune uses it so
    ASHA can stop a trial early).
    """
    import xgboost as xgb

    t0 = time.perf_counter()
    data = Prepared(config, X_train, y_train, X_val, y_val, framework="xgboost")
    t_prep = time.perf_counter()
    k = data.labels.n_classes
    metric, mode = resolve_metric(config, k)
    device, notes = xgboost_device(config.device)
    params, rounds = xgboost_params(config, k, metric, device)
    if data.plan.scale_pos_weight is not None:
        params["scale_pos_weight"] = data.plan.scale_pos_weight
    if nthread is not None:
        params["nthread"] = nthread
    dtrain: xgb.DMatrix  # a QuantileDMatrix is one
    dval: xgb.DMatrix
    if use_quantile_dmatrix(device, data.X_train):
        dtrain = xgb.QuantileDMatrix(
            data.X_train, label=data.y_train, weight=data.sample_weight,
            max_bin=params.get("max_bin", 256),
        )
        dval = xgb.QuantileDMatrix(data.X_val, label=data.y_val, ref=dtrain)
    else:
        dtrain = xgb.DMatrix(data.X_train, label=data.y_train, weight=data.sample_weight)
        dval = xgb.DMatrix(data.X_val, label=data.y_val)
    history: list[dict[str, Any]] = []

    class _Record(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: dict[str, Any]) -> bool:
            row = xgboost_history_row(epoch, evals_log)
            history.append(row)
            if report is not None:
                report(row)
            return False

    callbacks: list[Any] = [_Record()]
    custom = xgboost_f1 if metric == "f1" and k == 2 else None
    watched = "f1" if custom is not None else params["eval_metric"][-1]
    if config.early_stopping_rounds:
        callbacks.append(
            xgb.callback.EarlyStopping(
                rounds=config.early_stopping_rounds,
                metric_name=watched,
                data_name="val",
                maximize=watched in ("auc", "aucpr", "f1"),
                save_best=True,
            )
        )
    booster = xgb.train(
        params, dtrain, num_boost_round=rounds, evals=[(dtrain, "train"), (dval, "val")],
        callbacks=callbacks,
        verbose_eval=False, custom_metric=custom,
    )
    t_fit = time.perf_counter()
    best = int(getattr(booster, "best_iteration", booster.num_boosted_rounds() - 1))
    notes += [
        f"XGBoost hist on {device}: deterministic for a fixed seed, data and nthread on CPU; "
        "GPU histogram sums use atomics and can differ in the last bits",
    ]
    final = {**params, "n_estimators": booster.num_boosted_rounds(), "requested_rounds": rounds}
    return finish_booster(
        "xgboost", booster, data, config, params=final, history=history, notes=notes,
        metric=(metric, mode), best_iteration=best, device=device,
        timings=(t0, t_prep, t_fit),
    )


def finish_booster(
    kind: str,
    booster: Any,
    data: BoosterInputs,
    config: TrainConfig,
    *,
    params: dict[str, Any],
    history: list[dict[str, Any]],
    notes: list[str],
    metric: tuple[str, str],
    best_iteration: int,
    device: str,
    timings: tuple[float, float, float],
) -> TrainResult:
    """Wrap a fitted XGBoost/LightGBM booster: predictor, validation metrics and the record.

    ``timings`` are the ``perf_counter`` values at start, after preprocessing and after boosting.
    """
    t0, t_prep, t_fit = timings
    k = data.labels.n_classes
    predictor = TabularPredictor(
        kind=kind, schema=data.schema, preprocessor=data.preprocessor, model=booster,
        labels=data.labels, params=params,
    )
    raw, y_val = data.validation_scores(predictor)
    proba = _calibrated(predictor, config, raw, y_val, data.plan.record)
    metrics = (regression_metrics(y_val, proba) if k == 0
               else classification_metrics(y_val, proba, k))
    curves = from_history(
        history, unit="round", loss="rmse" if k == 0 else "logloss", metric=metric[0],
        mode=metric[1], step_key="round", best_step=best_iteration,
        notes=["train values are on the rows the booster was fitted on (after any "
               "resampling, with the imbalance weights)"])
    return TrainResult(
        model=predictor, metrics=metrics, history=history, params=params,
        imbalance=data.plan.record, nondeterminism=notes, config=config, metric=metric[0],
        mode=metric[1], best_iteration=best_iteration, device=device,
        extra={"train_seconds": time.perf_counter() - t0, "rows_train": data.rows_train,
               "preprocess_seconds": t_prep - t0, "booster_seconds": t_fit - t_prep,
               "numeric_preprocessing": data.numeric_mode},
        curves=curves,
    )


def calibrated_validation(predictor: Any, config: TrainConfig, data: Prepared) -> np.ndarray:
    """Fit the probability correction ``config.calibration`` asks for (on the validation split
    only; see :mod:`fstrain.trainers.calibration`), attach it to ``predictor``, and return the
    validation predictions the saved predictor will give."""
    raw, y_val = data.validation_scores(predictor)
    return _calibrated(predictor, config, raw, y_val, data.plan.record)


def _calibrated(predictor: Any, config: TrainConfig, raw: np.ndarray, y_val: np.ndarray,
                record: dict[str, Any]) -> np.ndarray:
    corrected = calibrate(predictor, config.calibration, lambda: raw, y_val, record)
    return raw if corrected is None else corrected


def sklearn_estimator(config: TrainConfig) -> Any:
    """The unfitted scikit-learn estimator for ``sklearn_logreg`` / ``sklearn_rf``."""
    params = dict(config.params)
    if config.model == "sklearn_logreg":
        from sklearn.linear_model import LogisticRegression

        params.setdefault("max_iter", 1000)
        return LogisticRegression(random_state=config.seed, **params)
    from sklearn.ensemble import RandomForestClassifier

    params.setdefault("n_estimators", 200)
    params.setdefault("n_jobs", 1)
    return RandomForestClassifier(random_state=config.seed, **params)


def train_sklearn(
    config: TrainConfig,
    X_train: pd.DataFrame,
    y_train: pd.DataFrame,
    X_val: pd.DataFrame,
    y_val: pd.DataFrame,
    *,
    workdir: Path | None = None,
    report: Reporter | None = None,
) -> TrainResult:
    """Fit preprocessing + logistic regression or a random forest (class weights as sample
    weights, so every imbalance strategy works the same way)."""
    t0 = time.perf_counter()
    data = Prepared(config, X_train, y_train, X_val, y_val, framework="sklearn")
    k = data.labels.n_classes
    metric, mode = resolve_metric(config, k)
    estimator = sklearn_estimator(config)
    try:
        estimator.fit(data.X_train, data.y_train, sample_weight=data.sample_weight)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"model {config.model!r} rejected params {config.params}: {exc}") from exc
    predictor = TabularPredictor(
        kind=config.model, schema=data.schema, preprocessor=data.preprocessor, model=estimator,
        labels=data.labels, params=estimator.get_params(),
    )
    proba = calibrated_validation(predictor, config, data)
    metrics = (regression_metrics(data.y_val, proba) if k == 0
               else classification_metrics(data.y_val, proba, k))
    curves = sklearn_curves(config.model, estimator, data, (metric, mode), metrics)
    row = {"round": 0, **{f"val_{k_}": v for k_, v in metrics.items() if k_ != "n"},
           "train_logloss": curves.train_loss[-1], f"train_{metric}": curves.train_metric[-1]}
    if report is not None:
        report(row)
    params = {k_: v for k_, v in estimator.get_params().items() if _jsonable(v)}
    return TrainResult(
        model=predictor, metrics=metrics, history=[row], params=params,
        imbalance=data.plan.record,
        nondeterminism=[
            f"scikit-learn {config.model}: deterministic for a fixed random_state "
            f"({config.seed}) and n_jobs"
        ],
        config=config, metric=metric, mode=mode, best_iteration=0, device="cpu",
        extra={"train_seconds": time.perf_counter() - t0, "rows_train": len(data.y_train),
               "numeric_preprocessing": data.numeric_mode},
        curves=curves,
    )


#: at most this many points on a random forest's curve (tree counts spread over the forest)
FOREST_CURVE_POINTS = 20


def sklearn_curves(kind: str, estimator: Any, data: Prepared, metric: tuple[str, str],
                   val_metrics: dict[str, float]) -> LearningCurves:
    """Learning curves of a fitted scikit-learn classifier.

    A random forest is scored with its first 1..n trees (unit ``trees``). Logistic regression
    (lbfgs) reports no per-iteration loss, so its curve is one point after ``n_iter_``
    iterations (unit ``fit``): the final train and validation loss, still enough to see a gap.
    """
    k = data.labels.n_classes
    name, mode = metric
    train_scores = estimator.predict_proba(data.X_train)
    if kind != "sklearn_rf":
        iterations = int(np.max(getattr(estimator, "n_iter_", [0])))
        curves = LearningCurves(unit="fit", loss="logloss", metric=name, mode=mode, best_step=
                                iterations, notes=[
            "logistic regression (lbfgs) reports no loss per iteration: one point, after "
            f"{iterations} iterations, with the final train and validation loss"])
        train = classification_metrics(data.y_train, _proba(train_scores, k), k)
        curves.add(iterations, train_loss=train["logloss"], val_loss=val_metrics["logloss"],
                   train_metric=train.get(name), val_metric=val_metrics.get(name))
        return curves
    trees = estimator.estimators_
    counts = sorted({int(c) for c in np.linspace(1, len(trees), FOREST_CURVE_POINTS)})
    curves = LearningCurves(unit="trees", loss="logloss", metric=name, mode=mode,
                            best_step=len(trees), notes=[
        "a random forest's train values are in-sample (each tree saw most train rows), so a "
        "train/validation gap is expected: read the validation curve"])
    x_tr, x_va = data.X_train.astype(np.float32), data.X_val.astype(np.float32)
    sum_tr = np.zeros((len(x_tr), len(estimator.classes_)))
    sum_va = np.zeros((len(x_va), len(estimator.classes_)))
    for i, tree in enumerate(trees, start=1):
        sum_tr += tree.predict_proba(x_tr)
        sum_va += tree.predict_proba(x_va)
        if i in counts:
            train = classification_metrics(data.y_train, _proba(sum_tr / i, k), k)
            val = classification_metrics(data.y_val, _proba(sum_va / i, k), k)
            curves.add(i, train_loss=train["logloss"], val_loss=val["logloss"],
                       train_metric=train.get(name), val_metric=val.get(name))
    return curves


def _proba(matrix: np.ndarray, k: int) -> np.ndarray:
    return matrix[:, 1] if k == 2 and matrix.ndim == 2 else matrix


def _jsonable(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str, list, dict))


def matrix_for(predictor: Any, X: pd.DataFrame) -> np.ndarray:
    """The transformed feature matrix a tabular predictor feeds its model."""
    return transform(predictor.preprocessor, predictor.schema, X)
