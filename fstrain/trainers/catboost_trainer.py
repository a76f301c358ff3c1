"""CatBoost trainer: categorical features go to CatBoost as they are (no one-hot encoding).

String/category/bool columns are passed as ``cat_features`` (missing values as the category
``"__missing__"``), numeric columns unchanged (CatBoost handles NaN itself). CatBoost's ordered
target statistics encode the categories on the train split while it builds trees, so nothing is
fitted outside the model. Class weights (``imbalance``) become per-row weights of the train
``Pool`` only; the validation ``Pool`` carries none, so early stopping and the reported metrics
are unweighted. Early stopping watches the selection metric on the validation split and keeps
the best iteration (``use_best_model``). The model is saved in CatBoost's own ``.cbm`` format
and explained with CatBoost's own SHAP values (``get_feature_importance(type="ShapValues")``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.config import TrainConfig
from fstrain.trainers.curves import from_history
from fstrain.trainers.data import FeatureSchema, LabelInfo, label_info
from fstrain.trainers.imbalance import plan_imbalance
from fstrain.trainers.metrics import classification_metrics, resolve_metric
from fstrain.trainers.predictor_base import ExplainTarget, PredictorBase, jsonable_params
from fstrain.trainers.result import TrainResult
from fstrain.trainers.tabular import Reporter
from fstrain.trainers import formats
from fstrain.trainers.calibration import calibrate, check_method

MISSING_CATEGORY = "__missing__"
EXTRA = "frameworks"

# our metric name -> (CatBoost eval metric for binary, for multi-class)
_CB_METRIC = {
    "auc": ("AUC", "AUC"),
    "pr_auc": ("PRAUC", "MultiClass"),
    "logloss": ("Logloss", "MultiClass"),
    "accuracy": ("Accuracy", "Accuracy"),
}
# CatBoost metric -> history key
_HISTORY = {"AUC": "val_auc", "PRAUC": "val_pr_auc", "Logloss": "val_logloss",
            "MultiClass": "val_logloss", "Accuracy": "val_accuracy"}
_ALIASES = {"n_estimators": "iterations", "max_depth": "depth", "reg_lambda": "l2_leaf_reg",
            "max_bin": "border_count", "n_jobs": "thread_count", "subsample": "subsample"}


def import_catboost() -> Any:
    """``catboost``, or a ConfigError naming the extra that installs it."""
    try:
        import catboost
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise ConfigError(
            "model 'catboost' needs the catboost package: pip install 'fstrain[catboost]'."
        ) from exc
    return catboost


def catboost_frame(schema: FeatureSchema, X: pd.DataFrame) -> pd.DataFrame:
    """The training columns in order: numbers as float, categories as ``str`` (missing →
    ``"__missing__"``), the form CatBoost takes ``cat_features`` in."""
    frame = schema.prepare(X)
    for col in schema.categorical:
        frame[col] = frame[col].where(pd.notna(frame[col]), MISSING_CATEGORY).astype(str)
    return frame[list(schema.names)]


def catboost_params(config: TrainConfig, n_classes: int, metric: str) -> dict[str, Any]:
    """Constructor parameters of ``CatBoostClassifier`` (our names mapped to CatBoost's)."""
    if metric == "f1":
        raise ConfigError(
            "metric='f1' (F1 at its best threshold) is not a CatBoost early-stopping metric; "
            "use metric='pr_auc' or 'logloss' for catboost."
        )
    user = {_ALIASES.get(k, k): v for k, v in config.params.items()}
    eval_metric = _CB_METRIC[metric][0 if n_classes == 2 else 1]
    loss = "Logloss" if n_classes == 2 else "MultiClass"
    params: dict[str, Any] = {
        "iterations": 500, "learning_rate": 0.1, "depth": 6,
        "loss_function": loss, "eval_metric": eval_metric,
        # the selection metric is scored on the train split too (learning curves)
        "custom_metric": list(dict.fromkeys([loss, "Accuracy",
                                             f"{eval_metric}:hints=skip_train~false"])),
        "random_seed": config.seed, "allow_writing_files": False, "verbose": False,
    }
    if config.early_stopping_rounds:
        params.update(od_type="Iter", early_stopping_rounds=config.early_stopping_rounds,
                      use_best_model=True)
    params.update(user)
    return params


class _History:
    """CatBoost callback: one history row per iteration from the validation metrics."""

    def __init__(self, report: Reporter | None) -> None:
        self.rows: list[dict[str, Any]] = []
        self.report = report

    def after_iteration(self, info: Any) -> bool:
        row: dict[str, Any] = {"round": int(info.iteration) - 1}
        for split, prefix in (("validation", "val_"), ("learn", "train_")):
            for name, values in (info.metrics.get(split) or {}).items():
                key = _HISTORY.get(name.split(":")[0])
                if key is not None and values:
                    row.setdefault(key.replace("val_", prefix, 1), float(values[-1]))
        self.rows.append(row)
        if self.report is not None:
            self.report(row)
        return True


def train_catboost(
    config: TrainConfig,
    X_train: pd.DataFrame,
    y_train: pd.DataFrame,
    X_val: pd.DataFrame,
    y_val: pd.DataFrame,
    *,
    workdir: Path | None = None,
    report: Reporter | None = None,
) -> TrainResult:
    """Fit a ``CatBoostClassifier`` with native categorical features and early stopping on the
    validation split; ``report`` gets each iteration's history row."""
    catboost = import_catboost()
    t0 = time.perf_counter()
    labels = label_info(y_train, config.task)
    y_tr, y_va = labels.encode(y_train, split="train"), labels.encode(y_val, split="validation")

    check_method(config.calibration, labels.classes)
    schema = FeatureSchema.infer(X_train)
    x_tr, x_va = catboost_frame(schema, X_train), catboost_frame(schema, X_val)
    plan = plan_imbalance(config.imbalance, y_tr, labels.classes, seed=config.seed, y_val=y_va,
                          framework="catboost")
    if plan.indices is not None:
        x_tr, y_tr = x_tr.iloc[plan.indices].reset_index(drop=True), y_tr[plan.indices]
    metric, mode = resolve_metric(config, labels.n_classes)
    params = catboost_params(config, labels.n_classes, metric)
    cats = list(schema.categorical)
    train_pool = catboost.Pool(x_tr, y_tr, cat_features=cats, weight=plan.sample_weight(y_tr))
    val_pool = catboost.Pool(x_va, y_va, cat_features=cats)
    history = _History(report)
    try:
        model = catboost.CatBoostClassifier(**params)
        model.fit(train_pool, eval_set=val_pool, callbacks=[history])
    except (TypeError, catboost.CatBoostError) as exc:
        raise ConfigError(f"model 'catboost' rejected params {config.params}: {exc}") from exc
    predictor = CatBoostPredictor(schema=schema, model=model, labels=labels,
                                  params=model.get_all_params())

    raw = predictor.raw_proba_matrix(x_va)
    proba = calibrate(predictor, config.calibration, lambda: raw, y_va, plan.record)
    proba = raw if proba is None else proba
    best = model.get_best_iteration()
    final = {**params, "trees": int(model.tree_count_)}
    best_step = int(best) if best is not None else int(model.tree_count_) - 1
    curves = from_history(
        history.rows, unit="round", loss="logloss", metric=metric, mode=mode, step_key="round",
        best_step=best_step,
        notes=["CatBoost's own metrics per round; the train values are weighted by the class "
               "weights when imbalance applies them, the validation values are unweighted"])
    return TrainResult(
        model=predictor, metrics=classification_metrics(y_va, proba, labels.n_classes),
        history=history.rows, params=jsonable_params(final), imbalance=plan.record,
        nondeterminism=["CatBoost on CPU: the same model for a fixed random_seed, data and "
                        "thread_count"],
        config=config, metric=metric, mode=mode,
        best_iteration=best_step, device="cpu", curves=curves,
        extra={"train_seconds": time.perf_counter() - t0, "rows_train": len(y_tr),
               "categorical_features": cats, "categorical_encoding": "CatBoost native"},
    )


class CatBoostPredictor(PredictorBase):
    """A ``CatBoostClassifier`` over the raw feature columns (categoricals passed natively)."""

    framework = "catboost"

    def __init__(self, *, schema: FeatureSchema, model: Any, labels: LabelInfo,
                 params: dict[str, Any] | None = None) -> None:
        self.kind = "catboost"
        self.schema = schema
        self.model = model
        self.labels = labels
        self.params = params or {}

    def _input(self, X: pd.DataFrame) -> pd.DataFrame:
        return catboost_frame(self.schema, X)

    def raw_proba_matrix(self, X: pd.DataFrame) -> np.ndarray:
        """``(n, K)`` class probabilities of an already prepared frame."""
        import catboost

        if len(X) == 0:
            return np.zeros((0, self.labels.n_classes))
        pool = catboost.Pool(X, cat_features=list(self.schema.categorical))
        return np.asarray(self.model.predict_proba(pool), dtype=np.float64)

    @property
    def explain_target(self) -> ExplainTarget:
        """The CatBoost model and the raw-column frame it takes (explained with its own SHAP)."""
        return ExplainTarget(kind=self.kind, model=self.model, transform=self._input,
                             feature_names=list(self.schema.names), classes=self.labels.classes)

    def save(self, directory: Path) -> dict[str, Any]:
        """``model/model.cbm`` (CatBoost's format) + ``predictor.json``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = formats.save_catboost(self.model, directory / "model")
        body = {"features": self.schema.to_json(), "params": jsonable_params(self.params)}
        return self._write_manifest(directory, body, files)


def load_catboost_predictor(directory: Path, info: dict[str, Any]) -> CatBoostPredictor:
    """Rebuild a :class:`CatBoostPredictor` from ``predictor.json`` ``info`` and its files."""
    import_catboost()
    if "features" not in info:
        raise InvalidArgumentError(f"predictor.json in {str(directory)!r} lacks 'features'.")
    return CatBoostPredictor(
        schema=FeatureSchema.from_json(info["features"]),
        model=formats.load_catboost(Path(directory) / "model"),
        labels=LabelInfo.from_json(info["labels"]), params=info.get("params"),
    )
