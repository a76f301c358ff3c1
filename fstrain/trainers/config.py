"""Training configuration: one pydantic model, built from a dict or YAML, validated up front.

``import fstrain.trainers.config`` is cheap (pydantic and the standard library only): no
torch, XGBoost or Ray is imported here.

A config names the ``model`` and its ``params`` (model hyperparameters), the ``seed``, the
class-imbalance strategy, early stopping, the PyTorch loop options (``torch``) and the tuning
options (``tune``)::

    model: xgboost
    seed: 7
    imbalance: scale_pos_weight
    calibration: auto          # undo the class weights in the probabilities (prior correction)
    early_stopping_rounds: 20
    params: {max_depth: 6, learning_rate: 0.1, n_estimators: 300}
    tune:
      num_samples: 16
      search_space:
        max_depth: {type: randint, low: 2, high: 10}
        learning_rate: {type: loguniform, low: 0.001, high: 0.3}

Every mistake raises :class:`fstrain.kernel.errors.ConfigError` naming the option and the value
(with a "did you mean" for unknown names).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
import yaml

from fstrain.kernel.errors import ConfigError, did_you_mean

ModelKind = Literal["xgboost", "lightgbm", "sklearn_logreg", "sklearn_rf", "mlp", "cnn",
                    "catboost", "keras_mlp", "flax_mlp", "spark_gbt", "spark_lr", "lora"]
MODEL_KINDS: tuple[str, ...] = ("xgboost", "lightgbm", "sklearn_logreg", "sklearn_rf", "mlp",
                                "cnn", "catboost", "keras_mlp", "flax_mlp", "spark_gbt",
                                "spark_lr", "lora")
#: Spark MLlib models: they read a training dataset's Parquet files in Spark, not DataFrames.
SPARK_MODELS: frozenset[str] = frozenset({"spark_gbt", "spark_lr"})
TORCH_MODELS: frozenset[str] = frozenset({"mlp", "cnn"})
TABULAR_MODELS: frozenset[str] = frozenset(
    {"xgboost", "lightgbm", "sklearn_logreg", "sklearn_rf", "mlp", "catboost", "keras_mlp",
     "flax_mlp"}
)
#: Models that handle missing values and unscaled numbers themselves.
BOOSTED_TREE_MODELS: frozenset[str] = frozenset({"xgboost", "lightgbm"})
#: Models that can learn a regression target.
REGRESSION_MODELS: frozenset[str] = BOOSTED_TREE_MODELS
#: Models that accept NaN inputs (scikit-learn's random forest does since 1.4).
NAN_TOLERANT_MODELS: frozenset[str] = BOOSTED_TREE_MODELS | {"sklearn_rf", "catboost"}
#: Models whose runs write checkpoints that ``resume`` continues from.
RESUMABLE_MODELS: frozenset[str] = TORCH_MODELS | {"flax_mlp"}
#: Hyperparameters shared by the Keras and Flax MLPs (their loops live in ``params``).
_NN_PARAMS = frozenset({"hidden_sizes", "dropout", "epochs", "batch_size", "learning_rate",
                        "weight_decay", "patience"})

#: Metric names understood everywhere (history uses ``val_<name>``); ``mode`` derives from them.
METRIC_MODES: dict[str, str] = {"auc": "max", "pr_auc": "max", "accuracy": "max", "logloss": "min",
                                "f1": "max",
                                "rmse": "min", "mae": "min"}
#: Metrics of regression models (the others are classification metrics).
REGRESSION_METRICS: frozenset[str] = frozenset({"rmse", "mae"})

#: Hyperparameters each model accepts in ``params`` (sklearn-style names for XGBoost; the native
#: aliases are accepted too).
MODEL_PARAMS: dict[str, frozenset[str]] = {
    "xgboost": frozenset(
        {
            "n_estimators", "num_boost_round", "learning_rate", "eta", "max_depth", "max_leaves",
            "min_child_weight", "subsample", "colsample_bytree", "colsample_bylevel",
            "colsample_bynode", "gamma", "min_split_loss", "reg_lambda", "lambda", "reg_alpha",
            "alpha", "max_bin", "max_delta_step", "grow_policy", "sampling_method",
            "num_parallel_tree", "base_score", "max_cat_to_onehot", "max_cat_threshold",
            "monotone_constraints", "interaction_constraints", "nthread", "n_jobs",
            "tree_method", "booster",
        }
    ),
    "lightgbm": frozenset(
        {
            "n_estimators", "num_boost_round", "learning_rate", "num_leaves", "max_depth",
            "min_child_samples", "min_data_in_leaf", "min_child_weight",
            "min_sum_hessian_in_leaf", "subsample", "bagging_fraction", "subsample_freq",
            "bagging_freq", "colsample_bytree", "feature_fraction", "reg_alpha", "lambda_l1",
            "reg_lambda", "lambda_l2", "min_split_gain", "max_bin", "extra_trees",
            "path_smooth", "boosting", "num_threads", "n_jobs", "max_cat_to_onehot",
            "monotone_constraints", "interaction_constraints",
        }
    ),
    "sklearn_logreg": frozenset(
        {"C", "l1_ratio", "max_iter", "tol", "solver", "fit_intercept", "intercept_scaling",
         "penalty", "n_jobs"}
    ),
    "sklearn_rf": frozenset(
        {"n_estimators", "max_depth", "min_samples_split", "min_samples_leaf", "max_features",
         "max_leaf_nodes", "min_impurity_decrease", "bootstrap", "max_samples", "criterion",
         "ccp_alpha", "n_jobs", "min_weight_fraction_leaf"}
    ),
    "mlp": frozenset({"hidden_sizes", "dropout", "norm", "activation"}),
    "cnn": frozenset({"channels", "hidden", "dropout", "image_size", "in_channels"}),
    "catboost": frozenset(
        {"n_estimators", "iterations", "learning_rate", "depth", "max_depth", "l2_leaf_reg",
         "reg_lambda", "border_count", "max_bin", "random_strength", "bagging_temperature",
         "one_hot_max_size", "thread_count", "n_jobs", "grow_policy", "min_data_in_leaf",
         "subsample", "rsm", "bootstrap_type"}
    ),
    "keras_mlp": _NN_PARAMS | {"train_step", "lr_schedule"},
    "flax_mlp": _NN_PARAMS | {"checkpoint_every"},
    # Spark MLlib's own parameter names (GBTClassifier, LogisticRegression)
    "spark_gbt": frozenset(
        {"maxIter", "maxDepth", "stepSize", "subsamplingRate", "maxBins", "minInstancesPerNode",
         "minInfoGain", "featureSubsetStrategy", "minWeightFractionPerNode"}
    ),
    "spark_lr": frozenset(
        {"maxIter", "regParam", "elasticNetParam", "tol", "fitIntercept", "standardization",
         "family", "aggregationDepth"}
    ),
    # LoRA supervised fine-tuning of a causal LM (fstrain.trainers.lora)
    "lora": frozenset(
        {"base_model", "rank", "alpha", "dropout", "target_modules", "max_length", "epochs",
         "batch_size", "grad_accum_steps", "lr", "warmup_ratio", "weight_decay",
         "max_new_tokens", "vocab_size", "hidden_size", "layers", "max_steps"}
    ),
}

#: Numeric hyperparameters: (integer?, lowest allowed, lowest inclusive?, highest or None).
#: ``None`` values are left to the model (e.g. sklearn's max_depth=None: unlimited).
PARAM_RANGES: dict[str, tuple[bool, float, bool, float | None]] = {
    "n_estimators": (True, 1, True, None), "num_boost_round": (True, 1, True, None),
    "max_depth": (True, -1, True, None), "num_leaves": (True, 2, True, None),
    "max_iter": (True, 1, True, None), "max_bin": (True, 2, True, None),
    "learning_rate": (False, 0, False, None), "eta": (False, 0, False, None),
    "subsample": (False, 0, False, 1), "colsample_bytree": (False, 0, False, 1),
    "colsample_bylevel": (False, 0, False, 1), "colsample_bynode": (False, 0, False, 1),
    "bagging_fraction": (False, 0, False, 1), "feature_fraction": (False, 0, False, 1),
    "min_child_weight": (False, 0, True, None), "gamma": (False, 0, True, None),
    "reg_alpha": (False, 0, True, None), "reg_lambda": (False, 0, True, None),
    "alpha": (False, 0, True, None), "lambda": (False, 0, True, None),
    "C": (False, 0, False, None), "tol": (False, 0, False, None),
    "dropout": (False, 0, True, 0.999999),
    "iterations": (True, 1, True, None), "depth": (True, 1, True, 16),
    "l2_leaf_reg": (False, 0, True, None), "epochs": (True, 1, True, None),
    "batch_size": (True, 1, True, None), "weight_decay": (False, 0, True, None),
    "patience": (True, 1, True, None), "checkpoint_every": (True, 1, True, None),
    "maxIter": (True, 1, True, None), "maxDepth": (True, 0, True, 30),
    "maxBins": (True, 2, True, None), "stepSize": (False, 0, False, 1),
    "subsamplingRate": (False, 0, False, 1), "regParam": (False, 0, True, None),
    "elasticNetParam": (False, 0, True, 1),
    "rank": (True, 1, True, None), "alpha": (False, 0, False, None),
    "max_length": (True, 8, True, None), "grad_accum_steps": (True, 1, True, None),
    "lr": (False, 0, False, None), "warmup_ratio": (False, 0, True, 1),
    "max_new_tokens": (True, 1, True, None), "max_steps": (True, 1, True, None),
    "vocab_size": (True, 64, True, None),
    "hidden_size": (True, 8, True, None), "layers": (True, 1, True, None),
    "hidden": (True, 1, True, None), "image_size": (True, 1, True, None),
    "in_channels": (True, 1, True, None),
}

#: list-valued hyperparameters: the type every entry must have (positive for int)
PARAM_LISTS: dict[str, type] = {"hidden_sizes": int, "channels": int, "target_modules": str}


def check_param_value(model: str, key: str, value: Any) -> None:
    """Refuse a numeric hyperparameter of the wrong type or outside its range (e.g.
    ``max_depth='abc'``, ``learning_rate=-1``), naming the parameter and the value."""
    if key in PARAM_LISTS and value is not None:
        _check_param_list(model, key, value, PARAM_LISTS[key])
        return
    rule = PARAM_RANGES.get(key)
    if rule is None or value is None:
        return
    integer, low, inclusive, high = rule
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            integer and isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"params.{key} of model {model!r} must be {kind}; got {value!r}.")
    below = value < low if inclusive else value <= low
    if below or (high is not None and value > high) or value != value:
        bound = f"{'>=' if inclusive else '>'} {low}" + (f" and <= {high}" if high is not None else "")
        raise ValueError(f"params.{key} of model {model!r} must be {bound}; got {value!r}.")


def _check_param_list(model: str, key: str, value: Any, kind: type) -> None:
    """Refuse a list hyperparameter that is not a non-empty list of ``kind`` (positive if
    int): a bare string would be split into characters, a float size truncated."""
    good = isinstance(value, list) and bool(value) and all(
        isinstance(v, kind) and not isinstance(v, bool) and not (isinstance(v, int) and v < 1)
        for v in value)
    if not good:
        what = "positive integers" if kind is int else "strings"
        raise ValueError(f"params.{key} of model {model!r} must be a non-empty list of "
                         f"{what}; got {value!r}.")


#: Distribution types of a declarative ``tune.search_space`` entry.
SEARCH_SPACE_TYPES: tuple[str, ...] = (
    "uniform", "loguniform", "quniform", "randint", "lograndint", "qrandint", "choice",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


class TorchOptions(_Strict):
    """Options of the PyTorch loop (used by ``mlp`` and ``cnn``)."""

    epochs: int = Field(default=20, ge=1)
    batch_size: int = Field(default=64, ge=1, description="per-worker micro-batch size")
    lr: float = Field(default=1e-3, gt=0)
    weight_decay: float = Field(default=0.01, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    scheduler: Literal["warmup_cosine", "one_cycle", "plateau", "cosine_restarts", "none"] = (
        "warmup_cosine")
    warmup_steps: int = Field(default=0, ge=0, description="optimizer steps of linear warm-up")
    min_lr_ratio: float = Field(default=0.0, ge=0, le=1)
    amp: Literal["auto", "bf16", "fp16", "off"] = "auto"
    grad_accum_steps: int = Field(default=1, ge=1)
    grad_clip: float | None = Field(default=1.0, gt=0)
    deterministic: bool = False
    num_workers: int = Field(default=0, ge=0)
    checkpoint_every_steps: int | None = Field(default=None, ge=1)
    checkpoint: bool = True
    patience: int | None = Field(default=5, ge=1, description="early-stopping patience in epochs")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    label_smoothing: float = Field(default=0.0, ge=0, lt=1)
    optimizer: Literal["adamw", "sgd"] = "adamw"
    momentum: float | None = Field(default=None, ge=0, lt=1, description="SGD only; default 0.9")
    nesterov: bool | None = Field(default=None, description="SGD only; default false")
    restart_epochs: int | None = Field(
        default=None, ge=1, description="cosine_restarts only: first cycle in epochs; default 1")
    restart_mult: int | None = Field(
        default=None, ge=1, description="cosine_restarts only: cycle length factor; default 1")
    lr_scaling: Literal["none", "linear", "sqrt"] = "none"
    base_batch_size: int | None = Field(
        default=None, ge=1, description="the global batch the lr is tuned for (lr_scaling)")
    mixup_alpha: float = Field(default=0.0, ge=0, description="Beta(a, a) mixup; 0 = off")
    augment_shift: int = Field(default=0, ge=0, description="cnn: random shift in pixels; 0 = off")
    activation_checkpointing: bool = False
    streaming: bool = Field(
        default=False, description="mlp: read the version's files a row group (Parquet) or a "
        "piece of text (csv, jsonl) at a time (data larger than memory; "
        "fstrain.trainers.stream)")
    shuffle_buffer: int | None = Field(
        default=None, ge=0, description="streamed input (streaming or --workers): rows shuffled "
        "per window; default 16384, 0 = file order")

    @model_validator(mode="after")
    def _check_optimizer_options(self) -> TorchOptions:
        """Refuse an option that the chosen optimizer/scheduler would ignore."""
        if self.optimizer != "sgd":
            for name in ("momentum", "nesterov"):
                if getattr(self, name) is not None:
                    raise ValueError(f"torch.{name} applies to optimizer 'sgd'; got optimizer "
                                     f"{self.optimizer!r}.")
        elif tuple(self.betas) != (0.9, 0.999):
            raise ValueError(f"torch.betas applies to optimizer 'adamw'; got optimizer 'sgd' "
                             f"with betas={tuple(self.betas)!r}.")
        elif self.nesterov and self.momentum == 0:
            raise ValueError("torch.nesterov needs momentum > 0; got momentum=0.")
        if self.scheduler != "cosine_restarts":
            for name in ("restart_epochs", "restart_mult"):
                if getattr(self, name) is not None:
                    raise ValueError(f"torch.{name} applies to scheduler 'cosine_restarts'; got "
                                     f"scheduler {self.scheduler!r}.")
        elif self.warmup_steps:
            raise ValueError("torch.warmup_steps does not apply to scheduler 'cosine_restarts' "
                             f"(SGDR restarts without warm-up); got {self.warmup_steps}.")
        if self.lr_scaling == "none" and self.base_batch_size is not None:
            raise ValueError("torch.base_batch_size applies with lr_scaling 'linear' or 'sqrt'; "
                             "got lr_scaling 'none'.")
        if self.lr_scaling != "none" and self.base_batch_size is None:
            raise ValueError(f"torch.lr_scaling={self.lr_scaling!r} needs torch.base_batch_size "
                             "(the global batch size the lr was tuned for).")
        return self


class TuneOptions(_Strict):
    """Options of hyperparameter tuning (Ray Tune, ASHA + Optuna)."""

    num_samples: int = Field(default=8, ge=1)
    max_concurrent: int = Field(default=2, ge=1)
    search_space: dict[str, Any] | None = None
    metric: str | None = Field(default=None, description="defaults to val_<config.metric>")
    mode: Literal["min", "max"] | None = None
    grace_period: int = Field(default=1, ge=1)
    reduction_factor: int = Field(default=2, ge=2)
    max_t: int | None = Field(
        default=None, ge=1, description="rounds/epochs; defaults to the config's")
    cpus_per_trial: float = Field(default=1.0, gt=0)
    gpus_per_trial: float = Field(default=0.0, ge=0)


class TrainConfig(_Strict):
    """Everything that decides a training run (and nothing that does not)."""

    model: ModelKind
    params: dict[str, Any] = Field(default_factory=dict)
    seed: int = 42
    task: Literal["auto", "binary", "multiclass", "regression"] = "auto"
    # f1: binary F1 at the threshold that maximises it on the validation split (the threshold
    # the model-validation pipeline picks with --threshold-strategy f1)
    metric: Literal["auto", "auc", "pr_auc", "accuracy", "logloss", "f1", "rmse", "mae"] = "auto"
    imbalance: Literal["none", "scale_pos_weight", "class_weight", "oversample", "undersample"] = (
        "none"
    )
    # probability correction for the class weights (fstrain.trainers.calibration): auto =
    # prior correction when imbalance reweighted or resampled the classes
    calibration: Literal["auto", "none", "prior", "platt", "isotonic"] = "auto"
    early_stopping_rounds: int | None = Field(default=20, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    max_categories: int | None = Field(
        default=50, ge=2, description="one-hot cap per categorical column")
    numeric_preprocessing: Literal["auto", "impute_scale", "passthrough"] = Field(
        default="auto",
        description="auto: passthrough for gradient-boosted trees, impute_scale for the others",
    )
    image_column: str = "image_path"
    torch: TorchOptions = Field(default_factory=TorchOptions)
    tune: TuneOptions = Field(default_factory=TuneOptions)
    resume: bool = False

    @model_validator(mode="before")
    @classmethod
    def _check_model_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "model" in data and data["model"] not in MODEL_KINDS:
            raise ValueError(
                f"model must be one of {', '.join(MODEL_KINDS)}; got {data['model']!r}."
                + did_you_mean(str(data["model"]), MODEL_KINDS)
            )
        return data

    @field_validator("params")
    @classmethod
    def _plain_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        json.dumps(value)  # params must be JSON-able (they are recorded in the model manifest)
        return value

    @model_validator(mode="after")
    def _check_torch_model_options(self) -> TrainConfig:
        """Refuse torch options that the chosen model or task would ignore."""
        # a recorded config carries the defaults for every model; only a changed one is refused
        if self.model not in TORCH_MODELS and self.torch != TorchOptions():
            raise ValueError(
                f"the torch: options configure the PyTorch loop of models "
                f"{', '.join(sorted(TORCH_MODELS))}; model {self.model!r} would ignore them. "
                "Remove the torch: block (or set the model's own options under params:)."
            )
        if self.torch.streaming and self.model != "mlp":
            raise ValueError(f"torch.streaming reads tabular rows a row group at a time and "
                             f"applies to model 'mlp'; got model {self.model!r}.")
        if self.torch.streaming and self.imbalance in ("oversample", "undersample"):
            raise ValueError(f"imbalance={self.imbalance!r} resamples train rows in memory; "
                             "torch.streaming needs 'none', 'class_weight' or "
                             "'scale_pos_weight'.")
        if self.torch.augment_shift and self.model != "cnn":
            raise ValueError(f"torch.augment_shift shifts images and applies to model 'cnn'; "
                             f"got model {self.model!r}.")
        # mixup needs class targets: no torch model is a regressor (REGRESSION_MODELS), so a
        # regression never reaches the loop with mixup_alpha set (refused just above)
        return self

    @model_validator(mode="after")
    def _check_params(self) -> TrainConfig:
        if self.task == "regression":
            if self.model not in REGRESSION_MODELS:
                raise ValueError(
                    f"task='regression' is supported with models "
                    f"{', '.join(sorted(REGRESSION_MODELS))}; got {self.model!r}."
                )
            if self.imbalance != "none":
                raise ValueError(
                    f"imbalance={self.imbalance!r} applies to classes; a regression needs "
                    "imbalance='none'."
                )
            if self.calibration not in ("auto", "none"):
                raise ValueError(
                    f"calibration={self.calibration!r} corrects class probabilities; a "
                    "regression needs calibration='auto' or 'none'."
                )
            if self.metric not in ("auto", *REGRESSION_METRICS):
                raise ValueError(
                    f"metric={self.metric!r} is a classification metric; a regression uses "
                    "'rmse' or 'mae'."
                )
        elif self.metric in REGRESSION_METRICS:
            raise ValueError(
                f"metric={self.metric!r} needs task='regression'; got task={self.task!r}."
            )
        if self.calibration == "prior" and self.imbalance == "none":
            raise ValueError(
                "calibration='prior' undoes the class weights of an imbalance strategy; with "
                "imbalance='none' there is nothing to undo. Use calibration='platt' or "
                "'isotonic' (fitted on the validation split), or 'auto'."
            )
        if self.numeric_preprocessing == "passthrough" and self.model not in NAN_TOLERANT_MODELS:
            raise ValueError(
                f"numeric_preprocessing='passthrough' hands missing values and unscaled numbers "
                f"to the model, which {self.model!r} cannot take; use 'impute_scale' or 'auto' "
                f"(passthrough works with {', '.join(sorted(NAN_TOLERANT_MODELS))})."
            )
        allowed = MODEL_PARAMS[self.model]
        for key in self.params:
            if key not in allowed:
                raise ValueError(
                    f"params.{key} is not a hyperparameter of model {self.model!r}."
                    + did_you_mean(key, allowed)
                    + f" Accepted: {', '.join(sorted(allowed))}."
                )
        for key, value in self.params.items():
            check_param_value(self.model, key, value)
        if self.tune.search_space is not None:
            validate_search_space(self.tune.search_space, self.model)
        return self

    # ----------------------------------------------------------------------------------------
    @property
    def numeric_mode(self) -> str:
        """How numeric features are preprocessed: ``impute_scale`` or ``passthrough``."""
        if self.numeric_preprocessing != "auto":
            return self.numeric_preprocessing
        return "passthrough" if self.model in BOOSTED_TREE_MODELS else "impute_scale"

    @property
    def is_torch(self) -> bool:
        """Whether this model trains through the PyTorch loop."""
        return self.model in TORCH_MODELS

    def fingerprint_dict(self) -> dict[str, Any]:
        """The config as a dict, minus options that do not change the result (``resume``)."""
        data = self.model_dump(mode="json")
        data.pop("resume", None)
        data.pop("tune", None)
        data["torch"].pop("num_workers", None)
        data["torch"].pop("checkpoint", None)
        for key, default in (("streaming", False), ("shuffle_buffer", None)):
            if data["torch"].get(key) == default:  # older checkpoints stay resumable
                data["torch"].pop(key, None)
        return data

    def fingerprint(self) -> str:
        """sha256 of :meth:`fingerprint_dict` (canonical JSON)."""
        blob = json.dumps(self.fingerprint_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()

    def with_overrides(self, overrides: dict[str, Any]) -> TrainConfig:
        """Return a copy with flat overrides applied (as sampled by tuning).

        A key that names a :class:`TorchOptions` field (``lr``, ``batch_size``, ...) or is
        written ``torch.<field>`` sets that field; ``seed``/``imbalance`` set the top level; any
        other key is a model hyperparameter in ``params``.
        """
        data = self.model_dump(mode="python")
        for key, value in overrides.items():
            if key.startswith("torch."):
                data["torch"][key.split(".", 1)[1]] = value
            elif key.startswith("params."):
                data["params"][key.split(".", 1)[1]] = value
            elif key in TorchOptions.model_fields and key not in MODEL_PARAMS[self.model]:
                data["torch"][key] = value
            elif key in ("seed", "imbalance", "calibration", "early_stopping_rounds", "metric"):
                data[key] = value
            else:
                data["params"][key] = _plain(value)
        return load_config(data)


def _plain(value: Any) -> Any:
    """numpy scalars/tuples (as sampled by Optuna) → plain JSON-able Python values."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def validate_search_space(space: dict[str, Any], model: str) -> None:
    """Check a declarative search space; raise :class:`ValueError` naming the bad entry.

    Each entry is ``{type: uniform|loguniform|quniform|randint|lograndint|qrandint, low, high
    [, q]}`` or ``{type: choice, values: [...]}``; keys are hyperparameters of ``model`` or
    :class:`TorchOptions` fields (``lr``, ``weight_decay``, ``batch_size``, ...).
    """
    if not isinstance(space, dict) or not space:
        raise ValueError("tune.search_space must be a non-empty mapping of name -> distribution.")
    accepted = set(MODEL_PARAMS[model])
    if model in TORCH_MODELS:
        accepted |= set(TorchOptions.model_fields)
    for name, spec in space.items():
        where = f"tune.search_space.{name}"
        bare = name.split(".", 1)[1] if name.startswith(("torch.", "params.")) else name
        if bare not in accepted:
            raise ValueError(
                f"{where}: {bare!r} is not a tunable option of model {model!r}."
                + did_you_mean(bare, accepted)
            )
        if not isinstance(spec, dict) or "type" not in spec:
            raise ValueError(f"{where} must be a mapping with a 'type'; got {spec!r}.")
        kind = spec["type"]
        if kind not in SEARCH_SPACE_TYPES:
            raise ValueError(
                f"{where}.type must be one of {', '.join(SEARCH_SPACE_TYPES)}; got {kind!r}."
                + did_you_mean(str(kind), SEARCH_SPACE_TYPES)
            )
        if kind == "choice":
            values = spec.get("values")
            if not isinstance(values, list) or not values:
                raise ValueError(f"{where}.values must be a non-empty list; got {values!r}.")
            extra = set(spec) - {"type", "values"}
        else:
            for bound in ("low", "high"):
                if not isinstance(spec.get(bound), (int, float)) or isinstance(
                    spec.get(bound), bool
                ):
                    raise ValueError(f"{where}.{bound} must be a number; got {spec.get(bound)!r}.")
            if not spec["low"] < spec["high"]:
                raise ValueError(
                    f"{where}: low must be < high; got low={spec['low']!r}, high={spec['high']!r}."
                )
            if kind.startswith("log") and spec["low"] <= 0:
                raise ValueError(f"{where}: {kind} needs low > 0; got low={spec['low']!r}.")
            if kind.endswith("randint") and not all(
                isinstance(spec[b], int) for b in ("low", "high")
            ):
                raise ValueError(f"{where}: {kind} needs integer bounds; got {spec!r}.")
            q = spec.get("q")
            if kind.startswith("q") and not (isinstance(q, (int, float)) and q > 0):
                raise ValueError(f"{where}: {kind} needs q > 0; got q={spec.get('q')!r}.")
            extra = set(spec) - {"type", "low", "high", "q"}
        if extra:
            raise ValueError(f"{where}: unknown key(s) {sorted(extra)} for type {kind!r}.")


def load_config(source: TrainConfig | dict[str, Any] | str | Path) -> TrainConfig:
    """Build a :class:`TrainConfig` from a dict, a YAML file path, or return it unchanged.

    Raises:
        ConfigError: naming the first invalid option and its value.
    """
    if isinstance(source, TrainConfig):
        return source
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"Training config file {str(path)!r} does not exist.")

        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict):
            raise ConfigError(f"Training config file {str(path)!r} must hold a mapping.")
        source = data
    if not isinstance(source, dict):
        raise ConfigError(f"A training config must be a mapping; got {type(source).__name__}.")
    try:
        return TrainConfig.model_validate(source)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, source)) from None


def _explain(exc: ValidationError, source: dict[str, Any]) -> str:
    """Turn pydantic's error list into one fstrain-style message."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            name = str(err["loc"][-1])
            section: type[BaseModel] = TrainConfig
            if len(err["loc"]) > 1 and err["loc"][0] in ("torch", "tune"):
                section = TorchOptions if err["loc"][0] == "torch" else TuneOptions
            msg = f"unknown option {name!r}." + did_you_mean(name, section.model_fields)
        elif "input" in err and err["type"] not in ("value_error", "assertion_error"):
            msg = f"{msg}; got {err['input']!r}"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "Invalid training config: " + " | ".join(parts)
