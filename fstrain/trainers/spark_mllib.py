"""Spark MLlib trainers (``spark_gbt``, ``spark_lr``) over a training dataset's Parquet files.

Spark reads the version's pinned split files itself (the caller verified their bytes against
the version's recorded hashes; no pandas round trip) and fits one MLlib ``Pipeline``:

- numeric columns (integers, floats, booleans as 0/1, timestamps as epoch seconds) → ``double``,
  missing values filled by an ``Imputer`` (train means);
- string columns → ``StringIndexer`` (``handleInvalid="keep"``: unseen values and nulls get
  their own index); ``spark_lr`` one-hot encodes the indices (``OneHotEncoder``, the unseen
  bucket dropped), ``spark_gbt`` splits on them as categories;
- ``VectorAssembler`` → ``GBTClassifier`` (binary) or ``LogisticRegression``.

Early stopping (``spark_gbt``): MLlib's own per-round validation loss
(``evaluateEachIteration``) picks the best round with ``early_stopping_rounds`` patience; if
it is not the last one, the booster is refitted with that many rounds (the same seed gives the
same first trees) — MLlib's built-in ``validationIndicatorCol`` stops at the first round that
does not improve, which is a patience of one. Class weights (``imbalance``) go in a weight
column of the train rows only. The fitted ``PipelineModel`` is written with MLlib's writer; the
predictor scores from those files without Spark (:mod:`fstrain.trainers.spark_predictor`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.config import TrainConfig
from fstrain.trainers.result import TrainResult
from fstrain.trainers.curves import from_history
from fstrain.trainers.imbalance import plan_imbalance
from fstrain.trainers.metrics import classification_metrics, resolve_metric
from fstrain.trainers.spark_session import spark_session

Reporter = Callable[[dict[str, Any]], None]
MLLIB_DIR = "mllib"
WEIGHT = "__fstrain_weight"
LABEL_INDEX = "__fstrain_label"
FEATURES = "__fstrain_features"


@dataclass(frozen=True)
class SparkSource:
    """The verified split files of one training-dataset version.

    Attributes:
        train, validation: Parquet files (or folders of Parquet parts) of the two splits.
        features: the view's model features (helper columns and keys are not features).
        label: the label column.
    """

    train: str
    validation: str
    features: tuple[str, ...]
    label: str


def check_view(fv: Any, model: str) -> None:
    """Refuse a feature view Spark cannot train from, before its files are read: Spark reads
    the untransformed files (no model-dependent transformations) with one label column."""
    if getattr(fv, "transformation_functions", None):
        raise ConfigError(
            f"feature view {fv.name} v{fv.version} has model-dependent transformations, which "
            "are applied to pandas frames; Spark reads the untransformed files. Train it with a "
            "non-Spark model, or move the transformations into the feature pipeline.")
    if len(fv.labels) != 1:
        raise ConfigError(f"{model} needs exactly one label; feature view {fv.name} has "
                          f"{list(fv.labels)}.")


def _column_kinds(schema: Any, features: tuple[str, ...]) -> tuple[list[str], list[str], dict]:
    """``(numeric, categorical, dtypes)`` from a Spark schema; other types are refused."""
    from pyspark.sql import types as T

    fields = {f.name: f.dataType for f in schema.fields}
    numeric, categorical, dtypes = [], [], {}
    for name in features:
        if name not in fields:
            raise InvalidArgumentError(
                f"Spark trainer: feature column {name!r} is not in the split files "
                f"(columns: {sorted(fields)})."
            )
        dtype = fields[name]
        dtypes[name] = dtype.simpleString()
        if isinstance(dtype, T.StringType):
            categorical.append(name)
        elif isinstance(dtype, (T.NumericType, T.BooleanType, T.TimestampType,
                                T.TimestampNTZType)):
            numeric.append(name)
        else:
            raise InvalidArgumentError(
                f"Spark trainer: feature column {name!r} has type {dtype.simpleString()}, which "
                "the MLlib pipeline does not encode (numbers, booleans, timestamps and strings "
                "are supported). Drop it from the feature view or cast it in the feature pipeline."
            )
    return numeric, categorical, dtypes


def _as_double(name: str, dtype: str) -> Any:
    """Spark expression of a numeric feature as double (timestamps as epoch seconds)."""
    from pyspark.sql import functions as F

    column = F.col(f"`{name}`")
    if dtype.startswith("timestamp"):
        column = F.unix_micros(column.cast("timestamp")) / F.lit(1e6)
    return column.cast("double").alias(name)


def _prepare(frame: Any, numeric: list[str], categorical: list[str], dtypes: dict[str, str],
             label: str, classes: tuple[Any, ...]) -> Any:
    """Feature columns as double/string and the label as its class index (a double)."""
    from pyspark.sql import functions as F

    index = None
    for i, value in enumerate(classes):
        cond = F.col(f"`{label}`") == F.lit(value)
        index = F.when(cond, float(i)) if index is None else index.when(cond, float(i))
    cols = [_as_double(c, dtypes[c]) for c in numeric]
    cols += [F.col(f"`{c}`").cast("string").alias(c) for c in categorical]
    return frame.select(*cols, index.alias(LABEL_INDEX))  # type: ignore[union-attr]


def _classes(train: Any, label: str) -> tuple[Any, ...]:
    rows = train.select(label).distinct().collect()
    values = [r[0] for r in rows]
    if any(v is None for v in values):
        raise InvalidArgumentError(
            f"Label column {label!r} of the train split has missing values; drop or fill them "
            "before training."
        )
    classes = tuple(sorted(values))
    if len(classes) < 2:
        raise InvalidArgumentError(
            f"Label column {label!r} of the train split has a single class {classes!r}; a "
            "classifier needs at least two."
        )
    return classes


def _check_config(config: TrainConfig, n_classes: int) -> None:
    """Options a Spark MLlib run cannot honour are refused, never ignored."""
    if config.model == "spark_gbt" and n_classes != 2:
        raise ConfigError(
            f"spark_gbt (MLlib GBTClassifier) is binary only; the label has {n_classes} "
            "classes. Use --model spark_lr (multinomial logistic regression)."
        )
    if config.imbalance in ("oversample", "undersample"):
        raise ConfigError(
            f"imbalance={config.imbalance!r} is not available for {config.model}: Spark MLlib "
            "takes class weights. Use imbalance='class_weight' or 'scale_pos_weight'."
        )
    if config.device == "cuda":
        raise ConfigError(f"device='cuda': {config.model} trains on Spark's CPUs. Use auto/cpu.")
    if "max_categories" in config.model_fields_set:
        raise ConfigError(
            f"max_categories caps scikit-learn's one-hot encoder; {config.model} indexes every "
            "value with MLlib's StringIndexer. Drop the option."
        )


def _weights(train: Any, config: TrainConfig, classes: tuple[Any, ...]) -> tuple[Any, dict]:
    """The train rows with a weight column, and the imbalance record (train rows only)."""
    from pyspark.sql import functions as F

    counts = dict(train.groupBy(LABEL_INDEX).count().collect())
    per_class = np.array([int(counts.get(float(i), 0)) for i in range(len(classes))])
    # plan_imbalance reads class counts only for the weighting strategies
    codes = np.repeat(np.arange(len(classes)), per_class)
    plan = plan_imbalance(config.imbalance, codes, classes, seed=config.seed, framework="spark")
    weight = F.lit(1.0)
    if plan.class_weight is not None:  # one case per class: CASE WHEN label = i THEN w_i ...
        cases = [(F.col(LABEL_INDEX) == float(i), float(w))
                 for i, w in enumerate(plan.class_weight)]
        weight = F.when(*cases[0])
        for cond, w in cases[1:]:
            weight = weight.when(cond, w)
    return train.withColumn(WEIGHT, weight), plan.record


def _stages(config: TrainConfig, numeric: list[str], categorical: list[str],
            max_bins: int, max_iter: int | None = None) -> list[Any]:
    from pyspark.ml.classification import GBTClassifier, LogisticRegression
    from pyspark.ml.feature import Imputer, OneHotEncoder, StringIndexer, VectorAssembler

    stages: list[Any] = []
    inputs: list[str] = []
    if numeric:
        imputed = [f"{c}__imputed" for c in numeric]
        stages.append(Imputer(inputCols=numeric, outputCols=imputed, strategy="mean"))
        inputs += imputed
    if categorical:
        indexed = [f"{c}__index" for c in categorical]
        stages.append(StringIndexer(inputCols=categorical, outputCols=indexed,
                                    handleInvalid="keep"))
        if config.model == "spark_lr":
            onehot = [f"{c}__onehot" for c in categorical]
            stages.append(OneHotEncoder(inputCols=indexed, outputCols=onehot, dropLast=True))
            inputs += onehot
        else:
            inputs += indexed
    stages.append(VectorAssembler(inputCols=inputs, outputCol=FEATURES))
    params = dict(config.params)
    common: dict[str, Any] = {"featuresCol": FEATURES, "labelCol": LABEL_INDEX,
                              "weightCol": WEIGHT}
    try:
        if config.model == "spark_gbt":
            params.setdefault("maxIter", 50)
            params.setdefault("maxBins", max_bins)
            if max_iter is not None:
                params["maxIter"] = max_iter
            stages.append(GBTClassifier(seed=config.seed, **common, **params))
        else:
            params.setdefault("maxIter", 100)
            stages.append(LogisticRegression(**common, **params))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"model {config.model!r} rejected params {config.params}: {exc}") from None
    return stages


def _fit(stages: list[Any], train: Any, config: TrainConfig) -> Any:
    from pyspark.ml import Pipeline

    try:
        return Pipeline(stages=stages).fit(train)
    except Exception as exc:  # noqa: BLE001 - Spark raises py4j/IllegalArgument errors
        if type(exc).__name__ in ("IllegalArgumentException", "AnalysisException"):
            raise ConfigError(
                f"Spark MLlib refused the {config.model} pipeline with params {config.params}: "
                f"{str(exc)[:400]}"
            ) from None
        raise


def _best_round(losses: list[float], patience: int | None) -> int:
    """The round with the lowest validation loss, stopping ``patience`` rounds after it."""
    best = 0
    for i, loss in enumerate(losses):
        if loss < losses[best]:
            best = i
        elif patience is not None and i - best >= patience:
            break
    return best


def _fit_gbt(config: TrainConfig, stages_for: Callable[[int | None], list[Any]], train: Any,
             validation: Any) -> tuple[Any, list[dict[str, Any]], int]:
    """Fit, pick the best round on the validation loss, refit with that many rounds."""
    model = _fit(stages_for(None), train, config)
    booster = model.stages[-1]
    # MLlib's GBT log loss is 2·log(1 + exp(-2yF)), twice the usual log loss of p = σ(2F)
    losses = [v / 2.0 for v in booster.evaluateEachIteration(_transform_prefix(model, validation))]
    train_losses = [v / 2.0 for v in booster.evaluateEachIteration(_transform_prefix(model, train))]
    best = _best_round(losses, config.early_stopping_rounds)
    if best + 1 < len(losses):
        model = _fit(stages_for(best + 1), train, config)
    history = [{"round": i, "train_logloss": float(t), "val_logloss": float(v)}
               for i, (t, v) in enumerate(zip(train_losses, losses, strict=True))]
    return model, history, best


def _transform_prefix(model: Any, frame: Any) -> Any:
    """``frame`` through every stage but the estimator (the assembled feature vector)."""
    from pyspark.ml import PipelineModel

    return PipelineModel(stages=model.stages[:-1]).transform(frame)


def _validation_scores(model: Any, validation: Any) -> tuple[np.ndarray, np.ndarray]:
    """Class indices and class-probability matrix of the validation rows, scored by Spark."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    scored = model.transform(validation).select(
        LABEL_INDEX, vector_to_array(F.col("probability")).alias("p"))
    table = scored.toArrow()
    y = np.asarray(table.column(LABEL_INDEX).to_numpy(zero_copy_only=False), dtype=np.int64)
    proba = np.asarray(table.column("p").to_pylist(), dtype=np.float64)
    return y, proba.reshape(len(y), -1)


def train_spark(
    config: TrainConfig,
    source: SparkSource,
    *,
    workdir: Path,
    master: str | None = None,
    report: Reporter | None = None,
) -> TrainResult:
    """Fit the MLlib pipeline on ``source``'s train file, validate on its validation file.

    Args:
        config: a ``spark_gbt`` or ``spark_lr`` config.
        source: the verified Parquet files and the view's feature and label columns.
        workdir: the run's scratch folder (Spark's temporary files, the saved MLlib model).
        master: Spark master URL (default ``local[2]``).
        report: called with each history row.
    """
    t0 = time.perf_counter()
    workdir = Path(workdir)
    with spark_session(master, workdir) as spark:
        raw_train = spark.read.parquet(source.train)
        raw_val = spark.read.parquet(source.validation)
        numeric, categorical, dtypes = _column_kinds(raw_train.schema, source.features)
        classes = _classes(raw_train, source.label)
        _check_config(config, len(classes))
        train = _prepare(raw_train, numeric, categorical, dtypes, source.label, classes)
        validation = _prepare(raw_val, numeric, categorical, dtypes, source.label, classes)
        unseen = validation.filter(validation[LABEL_INDEX].isNull()).count()
        if unseen:
            raise InvalidArgumentError(
                f"Label column {source.label!r} of the validation split has {unseen} row(s) with "
                "values not seen in the train split. Use a stratified split or drop those rows."
            )
        train, imbalance = _weights(train, config, classes)
        validation = validation.withColumn(WEIGHT, _one())
        max_bins = _max_bins(train, categorical)
        stages_for = lambda n: _stages(config, numeric, categorical, max_bins, n)  # noqa: E731
        if config.model == "spark_gbt":
            model, history, best = _fit_gbt(config, stages_for, train, validation)
        else:
            model = _fit(stages_for(None), train, config)
            objective = list(model.stages[-1].summary.objectiveHistory)
            history = [{"round": i, "train_objective": float(v)} for i, v in enumerate(objective)]
            best = len(history) - 1
        y_val, proba = _validation_scores(model, validation)
        mllib_dir = workdir / MLLIB_DIR
        model.write().overwrite().save(str(mllib_dir))
        params = _estimator_params(model.stages[-1])
        spark_version = spark.version
        spark_master = spark.sparkContext.master
    return _result(config, mllib_dir, history, best, params, imbalance,
                   (y_val, proba, classes, source, dtypes, numeric, categorical),
                   {"spark_version": spark_version, "spark_master": spark_master,
                    "train_seconds": time.perf_counter() - t0}, report)


def _one() -> Any:
    from pyspark.sql import functions as F

    return F.lit(1.0)


def _max_bins(train: Any, categorical: list[str]) -> int:
    """MLlib's ``maxBins`` must cover every category of a categorical split (+ the unseen one)."""
    if not categorical:
        return 32
    from pyspark.sql import functions as F

    row = train.agg(*[F.countDistinct(F.col(f"`{c}`")).alias(c) for c in categorical]).collect()[0]
    return max(32, max(int(row[c]) for c in categorical) + 2)


def _estimator_params(estimator: Any) -> dict[str, Any]:
    out = {}
    for param, value in estimator.extractParamMap().items():
        if isinstance(value, (bool, int, float, str)) and param.name not in (
                "featuresCol", "labelCol", "weightCol", "predictionCol", "probabilityCol",
                "rawPredictionCol"):
            out[param.name] = value
    return dict(sorted(out.items()))


def _result(config: TrainConfig, mllib_dir: Path, history: list[dict[str, Any]], best: int,
            params: dict[str, Any], imbalance: dict[str, Any], scored: tuple[Any, ...],
            extra: dict[str, Any], report: Reporter | None) -> TrainResult:
    from fstrain.trainers.data import FeatureSchema, LabelInfo
    from fstrain.trainers.spark_predictor import SparkPredictor

    y_val, proba, classes, source, dtypes, numeric, categorical = scored
    k = len(classes)
    metric, mode = resolve_metric(config, k)
    metrics = classification_metrics(y_val, proba[:, 1] if k == 2 else proba, k)
    if history:
        history[best] = {**history[best], **{f"val_{m}": v for m, v in metrics.items()
                                             if m != "n"}}
    for row in history:
        if report is not None:
            report(row)
    curves = _curves(config, history, best, metric, mode)
    labels = LabelInfo(name=source.label, classes=tuple(classes))
    schema = FeatureSchema(names=tuple(source.features), dtypes=dtypes, numeric=tuple(numeric),
                           categorical=tuple(categorical))
    predictor = SparkPredictor.from_mllib(config.model, mllib_dir, schema=schema, labels=labels,
                                          params=params)
    notes = [
        f"Spark MLlib {config.model} on {extra['spark_master']}: "
        + ("the GBT booster is deterministic for a fixed seed, data and partitioning"
           if config.model == "spark_gbt" else
           "L-BFGS/OWL-QN logistic regression is deterministic for fixed data and "
           "partitioning; the order of partial sums across partitions can change the last bits"),
    ]
    return TrainResult(
        model=predictor, metrics=metrics, history=history, params=params, imbalance=imbalance,
        nondeterminism=notes, config=config, metric=metric, mode=mode, best_iteration=best,
        device="cpu", extra={**extra, "rows_validation": int(len(y_val))}, curves=curves,
    )


def _curves(config: TrainConfig, history: list[dict[str, Any]], best: int, metric: str,
            mode: str) -> Any:
    """Learning curves: per-round train/validation log loss (GBT, MLlib's own per-iteration
    evaluation), or L-BFGS's objective per iteration with one validation point (LR)."""
    if config.model == "spark_gbt":
        notes = ["train and validation log loss per boosting round, from MLlib's "
                 "evaluateEachIteration (train loss weighted by the class weights, if any); "
                 f"the selection metric is scored on the kept model (round {best})"]
        return from_history(history, unit="round", loss="logloss", metric=metric, mode=mode,
                            step_key="round", best_step=best, notes=notes)
    notes = ["train_objective is the objective L-BFGS/OWL-QN minimised per iteration (weighted "
             "log loss + regularisation); validation is scored once, on the final model"]
    return from_history(history, unit="round", loss="logloss", metric=metric, mode=mode,
                        step_key="round", best_step=best,
                        extra_keys={"train_objective": "train_objective"}, notes=notes)
