"""Keras 3 MLP (``keras_mlp``) on the torch backend: ``fit`` with callbacks, saved as ``.keras``.

Keras reads ``KERAS_BACKEND`` once, at its first import; fstrain sets it to ``torch`` unless
the environment names another backend (the one used is recorded with the model). The features
go through the same train-fitted preprocessing as the torch ``mlp`` (mean imputation, scaling,
one-hot). Training is ``model.fit`` with callbacks, in this order:

1. a validation callback computing every ``val_<metric>`` on the validation split each epoch
   (with fstrain's metric code, so the numbers match the other trainers) into the epoch logs,
2. ``EarlyStopping`` on ``val_<selection metric>`` (``params.patience`` epochs),
3. ``ModelCheckpoint`` keeping the best epoch's weights (``checkpoints/best.weights.h5``,
   weights only), restored into the returned model,
4. an LR schedule: cosine decay per epoch (``lr_schedule: cosine``, the default),
   ``ReduceLROnPlateau`` (``plateau``) or none.

``train_step: custom`` trains the same network through a ``keras.Sequential`` subclass whose
``train_step`` computes the loss, calls ``backward()`` and hands the explicit gradients to the
optimizer (the Keras-on-torch custom-step pattern), still under ``fit`` and the same callbacks.
Class weights become per-row ``sample_weight`` of the train split only. Seeds: Keras's
``set_random_seed`` (Python, numpy, torch and Keras's own seed generator) with the config seed.
"""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.config import TrainConfig
from fstrain.trainers.metrics import classification_metrics, resolve_metric
from fstrain.trainers.nn_common import (
    MatrixPredictor,
    NNOptions,
    epoch_row,
    load_common,
    nn_curves,
    softmax,
    train_eval_rows,
)
from fstrain.trainers.predictor_base import ExplainTarget
from fstrain.trainers.result import TrainResult
from fstrain.trainers.tabular import Prepared, Reporter
from fstrain.trainers import formats

CHOICES = {"train_step": ("fit", "custom"), "lr_schedule": ("cosine", "plateau", "none")}
CUSTOM_CLASS = "ExplicitStepMLP"


def import_keras() -> Any:
    """``keras`` (torch backend by default), or a ConfigError naming the extra."""
    try:
        return formats.import_keras()
    except InvalidArgumentError as exc:  # pragma: no cover - the extra is installed in CI
        raise ConfigError(str(exc)) from exc


@functools.cache
def explicit_step_class() -> type:
    """The ``keras.Sequential`` subclass whose ``train_step`` applies explicit gradients."""
    keras = import_keras()

    @keras.saving.register_keras_serializable(package="fstrain", name=CUSTOM_CLASS)
    class ExplicitStepMLP(keras.Sequential):  # type: ignore[name-defined]
        """An MLP trained by a hand-written step: forward, loss, ``backward()``, then
        ``optimizer.apply(gradients, variables)``."""

        def train_step(self, data: Any) -> dict[str, Any]:
            import torch

            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
            self.zero_grad()
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                     training=True)
            loss.backward()
            variables = list(self.trainable_weights)
            gradients = [v.value.grad for v in variables]
            with torch.no_grad():
                self.optimizer.apply(gradients, variables)
            for metric in self.metrics:
                if metric.name == "loss":  # a mean over rows, as fit's own step keeps it
                    metric.update_state(loss, sample_weight=x.shape[0])
                else:
                    metric.update_state(y, y_pred, sample_weight=sample_weight)
            return {m.name: m.result() for m in self.metrics}

    return ExplicitStepMLP


def build_model(n_inputs: int, n_classes: int, opts: NNOptions, seed: int) -> Any:
    """The MLP (logits out); seeded initialisers and dropout."""
    keras = import_keras()
    cls = explicit_step_class() if opts.option("train_step") == "custom" else keras.Sequential
    layers: list[Any] = [keras.Input((n_inputs,))]
    for i, width in enumerate(opts.hidden_sizes):
        layers.append(keras.layers.Dense(
            width, activation="relu",
            kernel_initializer=keras.initializers.HeUniform(seed=seed + i)))
        if opts.dropout > 0:
            layers.append(keras.layers.Dropout(opts.dropout, seed=seed + 100 + i))
    layers.append(keras.layers.Dense(
        n_classes, kernel_initializer=keras.initializers.GlorotUniform(seed=seed + 99)))
    return cls(layers, name="fstrain_mlp")


def _callbacks(keras: Any, opts: NNOptions, monitor: tuple[str, str], ckpt: Path,
               validation: Any) -> list[Any]:
    key, mode = monitor
    out: list[Any] = [validation]
    if opts.patience:
        out.append(keras.callbacks.EarlyStopping(monitor=key, mode=mode, patience=opts.patience))
    out.append(keras.callbacks.ModelCheckpoint(str(ckpt), monitor=key, mode=mode,
                                               save_best_only=True, save_weights_only=True))
    schedule = opts.option("lr_schedule")
    if schedule == "cosine":
        base, epochs = opts.learning_rate, opts.epochs

        def cosine(epoch: int, lr: float) -> float:
            return float(base * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs)))

        out.append(keras.callbacks.LearningRateScheduler(cosine))
    elif schedule == "plateau":
        out.append(keras.callbacks.ReduceLROnPlateau(monitor=key, mode=mode, factor=0.5,
                                                     patience=max(1, (opts.patience or 4) // 2)))
    return out


def _validation_callback(keras: Any, data: Prepared, seed: int,
                         history: list[dict[str, Any]], report: Reporter | None) -> Any:
    k = data.labels.n_classes
    rows = train_eval_rows(len(data.y_train), seed)
    X_fit, y_fit = data.X_train[rows], data.y_train[rows]

    class Validation(keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            logs = logs if logs is not None else {}

            def proba(X: np.ndarray) -> np.ndarray:
                return softmax(self.model.predict(X, batch_size=4096, verbose=0))

            lr = float(np.asarray(self.model.optimizer.learning_rate))
            row = epoch_row(epoch, k, (data.y_val, proba(data.X_val)), (y_fit, proba(X_fit)),
                            train_objective=float(logs.get("loss", np.nan)), lr=lr)
            logs.update({key: v for key, v in row.items() if key.startswith("val_")})
            history.append(row)
            if report is not None:
                report(row)

    return Validation()


def train_keras(
    config: TrainConfig,
    X_train: pd.DataFrame,
    y_train: pd.DataFrame,
    X_val: pd.DataFrame,
    y_val: pd.DataFrame,
    *,
    workdir: Path,
    report: Reporter | None = None,
) -> TrainResult:
    """Fit the Keras MLP with callbacks; the returned model holds the best epoch's weights."""
    keras = import_keras()
    t0 = time.perf_counter()
    opts = NNOptions.from_config(config, CHOICES)
    data = Prepared(config, X_train, y_train, X_val, y_val, framework="keras")
    k = data.labels.n_classes
    metric, mode = resolve_metric(config, k)
    keras.utils.set_random_seed(config.seed)
    model = build_model(data.X_train.shape[1], k, opts, config.seed)
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=opts.learning_rate,
                                                   weight_decay=opts.weight_decay),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ckpt = Path(workdir) / "checkpoints" / "best.weights.h5"
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    history: list[dict[str, Any]] = []
    validation = _validation_callback(keras, data, config.seed, history, report)
    callbacks = _callbacks(keras, opts, (f"val_{metric}", mode), ckpt, validation)
    model.fit(data.X_train, data.y_train, sample_weight=data.sample_weight,
              batch_size=opts.batch_size, epochs=opts.epochs, shuffle=True,
              callbacks=callbacks, verbose=0)
    model.load_weights(str(ckpt))  # the best epoch, as ModelCheckpoint kept it
    scores = [row[f"val_{metric}"] for row in history]
    best = int(np.nanargmax(scores) if mode == "max" else np.nanargmin(scores))
    arch = {"n_inputs": int(data.X_train.shape[1]), "n_classes": k,
            "backend": keras.backend.backend(), "keras_version": keras.__version__,
            **opts.to_json()}
    predictor = KerasPredictor(schema=data.schema, preprocessor=data.preprocessor,
                               labels=data.labels, arch=arch, model=model)
    proba = predictor.predict_proba_matrix(data.X_val)
    return TrainResult(
        model=predictor, metrics=classification_metrics(data.y_val, proba, k), history=history,
        params={**opts.to_json(), "seed": config.seed}, imbalance=data.plan.record,
        nondeterminism=[f"Keras {keras.__version__} on the {keras.backend.backend()} backend, "
                        "seeded with keras.utils.set_random_seed: the same weights for a fixed "
                        "seed, data and thread count on CPU"],
        config=config, metric=metric, mode=mode, best_iteration=best, device="cpu",
        curves=nn_curves(history, metric, mode, best, f"Keras {opts.option('train_step')}"),
        extra={"train_seconds": time.perf_counter() - t0, "rows_train": len(data.y_train),
               "epochs_run": len(history), "train_step": opts.option("train_step")},
    )


class KerasPredictor(MatrixPredictor):
    """A Keras model over the preprocessed feature matrix (logits out)."""

    framework = "keras"

    def __init__(self, *, model: Any, **kwargs: Any) -> None:
        super().__init__(kind="keras_mlp", **kwargs)
        self.model = model

    def logits(self, X: np.ndarray) -> np.ndarray:
        """The model's logits, batched."""
        return np.asarray(self.model.predict(X, batch_size=4096, verbose=0))

    @property
    def explain_target(self) -> ExplainTarget:
        """On the torch backend a Keras model is a ``torch.nn.Module`` (logits out), explained
        like the torch ``mlp`` (DeepLIFT-SHAP, else integrated gradients); on another backend,
        Kernel SHAP over the class probabilities."""
        target = super().explain_target
        if self.arch.get("backend", "torch") != "torch":
            return target
        return ExplainTarget(kind=self.kind, model=self.model, transform=self._input,
                             feature_names=target.feature_names, classes=target.classes)

    def save(self, directory: Path) -> dict[str, Any]:
        """skops preprocessor + ``model/model.keras`` + predictor.json."""
        directory = Path(directory)
        files = self._save_common(directory)
        files += formats.save_keras(self.model, directory / "model")
        body = {"features": self.schema.to_json(), "arch": self.arch,
                "params": self.arch}
        return self._write_manifest(directory, body, files)


def load_keras_predictor(directory: Path, info: dict[str, Any]) -> KerasPredictor:
    """Rebuild a :class:`KerasPredictor` (``.keras`` loaded in safe mode)."""
    schema, preprocessor, labels = load_common(directory, info)
    custom = {f"fstrain>{CUSTOM_CLASS}": explicit_step_class()}
    model = formats.load_keras(Path(directory) / "model", custom_objects=custom)
    return KerasPredictor(model=model, schema=schema, preprocessor=preprocessor, labels=labels,
                          arch=dict(info.get("arch") or {}))
