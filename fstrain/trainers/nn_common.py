"""What the Keras and Flax MLP trainers share: their options, the per-epoch validation record
and a predictor base over the train-fitted tabular preprocessing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.config import TrainConfig
from fstrain.trainers.data import FeatureSchema, LabelInfo
from fstrain.trainers.metrics import classification_metrics
from fstrain.trainers.predictor_base import ExplainTarget, PredictorBase
from fstrain.trainers import formats
from fstrain.trainers.curves import from_history
from fstrain.trainers.preprocessing import feature_names_out, transform


@dataclass(frozen=True)
class NNOptions:
    """Hyperparameters of an MLP trained by Keras or Flax (from ``config.params``)."""

    hidden_sizes: tuple[int, ...] = (128, 64)
    dropout: float = 0.1
    epochs: int = 30
    batch_size: int = 256
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    patience: int | None = 5
    extra: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_config(cls, config: TrainConfig, choices: dict[str, tuple[str, ...]]) -> NNOptions:
        """Read ``config.params``; ``choices`` lists the allowed values of string options
        (their first value is the default). Early stopping is off when the config's
        ``early_stopping_rounds`` is None."""
        p = dict(config.params)
        sizes = p.pop("hidden_sizes", [128, 64])
        if not isinstance(sizes, list | tuple) or not sizes or not all(
                isinstance(s, int) and s > 0 for s in sizes):
            raise ConfigError(f"params.hidden_sizes of model {config.model!r} must be a "
                              f"non-empty list of positive integers; got {sizes!r}.")
        extra: dict[str, Any] = {}
        for name, allowed in choices.items():
            value = p.pop(name, allowed[0])
            if value not in allowed:
                raise ConfigError(f"params.{name} of model {config.model!r} must be one of "
                                  f"{', '.join(map(str, allowed))}; got {value!r}.")
            extra[name] = value
        patience = p.pop("patience", 5) if config.early_stopping_rounds else None
        known = {k: p.pop(k) for k in ("dropout", "epochs", "batch_size", "learning_rate",
                                        "weight_decay") if k in p}
        extra.update(p)
        return cls(hidden_sizes=tuple(sizes), patience=patience, **known,
                   extra=tuple(sorted(extra.items())))

    def option(self, name: str) -> Any:
        """A framework-specific option (``train_step``, ``lr_schedule``, ``checkpoint_every``)."""
        return dict(self.extra).get(name)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form, recorded as the model's hyperparameters."""
        return {"hidden_sizes": list(self.hidden_sizes), "dropout": self.dropout,
                "epochs": self.epochs, "batch_size": self.batch_size,
                "learning_rate": self.learning_rate, "weight_decay": self.weight_decay,
                "patience": self.patience, **dict(self.extra)}


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


#: train rows scored after each epoch for the learning curves (a fixed, seeded sample)
TRAIN_EVAL_ROWS = 2048


def train_eval_rows(n_rows: int, seed: int) -> np.ndarray:
    """The fixed sample of train rows scored after each epoch (sorted positions)."""
    return np.sort(np.random.default_rng(seed).permutation(n_rows)[:TRAIN_EVAL_ROWS])


def epoch_row(epoch: int, n_classes: int, val: tuple[np.ndarray, np.ndarray],
              train: tuple[np.ndarray, np.ndarray], **extra: float) -> dict[str, Any]:
    """One history row: ``val_<metric>`` and ``train_<metric>`` of every classification
    metric from ``(labels, probabilities)`` of each split, plus ``extra``."""
    row: dict[str, Any] = {"epoch": epoch}
    for prefix, (y, proba) in (("val_", val), ("train_", train)):
        metrics = classification_metrics(y, proba, n_classes)
        row.update({f"{prefix}{k}": float(v) for k, v in metrics.items() if k != "n"})
    row.update({k: float(v) for k, v in extra.items()})
    return row


def nn_curves(history: list[dict[str, Any]], metric: str, mode: str, best: int | None,
              framework: str) -> Any:
    """Per-epoch learning curves of a Keras/Flax run (the trainer contract's schema)."""
    return from_history(
        history, unit="epoch", loss="logloss", metric=metric, mode=mode, step_key="epoch",
        best_step=best, extra_keys={"train_objective": "train_objective", "lr": "lr"},
        notes=[f"{framework}: train values are scored after each epoch on a fixed sample of at "
               f"most {TRAIN_EVAL_ROWS} train rows (dropout off); train_objective is the "
               "optimised loss (class weights applied) averaged over the epoch"])


def improved(value: float, best: float | None, mode: str) -> bool:
    """Whether ``value`` beats ``best`` (None: nothing yet) in direction ``mode``."""
    if value != value:  # NaN never improves
        return False
    return best is None or (value > best if mode == "max" else value < best)


class MatrixPredictor(PredictorBase):
    """Base of predictors whose model takes the preprocessed float32 matrix and outputs logits.

    Subclasses set ``kind``/``framework`` and implement :meth:`logits` and :meth:`save`.
    """

    def __init__(self, *, kind: str, schema: FeatureSchema, preprocessor: Any,
                 labels: LabelInfo, arch: dict[str, Any]) -> None:
        self.kind = kind
        self.schema = schema
        self.preprocessor = preprocessor
        self.labels = labels
        self.arch = arch
        self.params = dict(arch)

    def logits(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _input(self, X: pd.DataFrame) -> np.ndarray:
        return transform(self.preprocessor, self.schema, X)

    def predict_proba_matrix(self, X: np.ndarray) -> np.ndarray:
        """Softmax of the logits, ``(n, K)``."""
        X = np.asarray(X, dtype=np.float32)
        if len(X) == 0:
            return np.zeros((0, self.labels.n_classes))
        return softmax(self.logits(X))

    @property
    def explain_target(self) -> ExplainTarget:
        """An object with ``predict_proba`` over the preprocessed matrix (Kernel SHAP)."""
        return ExplainTarget(kind=self.kind, model=_ProbaModel(self), transform=self._input,
                             feature_names=feature_names_out(self.preprocessor),
                             classes=self.labels.classes)

    def _save_common(self, directory: Path) -> list[Path]:
        directory.mkdir(parents=True, exist_ok=True)
        return list(formats.save_sklearn(self.preprocessor, directory / "preprocessor"))


class _ProbaModel:
    """``predict_proba`` over preprocessed matrices: what Kernel SHAP explains."""

    def __init__(self, predictor: MatrixPredictor) -> None:
        self.predictor = predictor

    def predict_proba(self, X: Any) -> np.ndarray:
        return self.predictor.predict_proba_matrix(np.asarray(X, dtype=np.float32))


def load_common(directory: Path, info: dict[str, Any]) -> tuple[FeatureSchema, Any, LabelInfo]:
    """Schema, preprocessor and labels of a saved matrix predictor."""
    if "features" not in info or not (Path(directory) / "preprocessor").is_dir():
        raise InvalidArgumentError(
            f"{str(directory)!r} lacks the feature schema or the preprocessor of a "
            f"{info.get('kind')} model."
        )
    return (FeatureSchema.from_json(info["features"]),
            formats.load_sklearn(Path(directory) / "preprocessor"),
            LabelInfo.from_json(info["labels"]))
