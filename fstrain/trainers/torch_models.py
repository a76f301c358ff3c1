"""``mlp`` and ``cnn`` training: data → datasets → net → :func:`fstrain.trainers.loop.fit`.

The MLP consumes the same preprocessing as the tabular trainers (numeric scaled, categoricals
one-hot, fitted on train only); the CNN reads images from the ``image_path`` column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.config import TrainConfig, load_config
from fstrain.trainers.data import FeatureSchema, LabelInfo, label_info
from fstrain.trainers.imbalance import ImbalancePlan, plan_imbalance
from fstrain.trainers.metrics import classification_metrics, resolve_metric
from fstrain.trainers.result import TrainResult
from fstrain.trainers.torch_predictor import TorchPredictor
from fstrain.trainers.calibration import calibrate, check_method
from fstrain.trainers.curves import from_history
from fstrain.trainers.images import ImagePathDataset
from fstrain.trainers.preprocessing import feature_names_out, fit_transform, transform
from fstrain.trainers.seeding import deterministic_mode, seed_everything
from fstrain.trainers.stream.prep import fit_streamed
from fstrain.trainers.stream.split import DEFAULT_SHUFFLE_BUFFER, SplitStream


@dataclass
class TorchData:
    """Datasets, net architecture and everything the predictor needs afterwards."""

    train_set: Any
    val_set: Any
    labels: LabelInfo
    arch: dict[str, Any]
    plan: ImbalancePlan
    schema: FeatureSchema | None = None
    preprocessor: Any = None


def prepare_torch_data(
    config: TrainConfig,
    X_train: pd.DataFrame,
    y_train: pd.DataFrame,
    X_val: pd.DataFrame,
    y_val: pd.DataFrame,
    *,
    image_loader: Callable[[str], np.ndarray] | None = None,
) -> TorchData:
    """Encode labels, fit preprocessing (train only), resample train, build the datasets."""
    from fstrain.trainers.torch_inputs import ArrayDataset
    from fstrain.trainers.nets import cnn_arch, mlp_arch

    labels = label_info(y_train, config.task)
    y_tr = labels.encode(y_train, split="train")
    y_va = labels.encode(y_val, split="validation")
    if labels.task != "regression":
        check_method(config.calibration, labels.classes)
    plan = plan_imbalance(config.imbalance, y_tr, labels.classes, seed=config.seed, y_val=y_va,
                          framework="torch")
    rows = plan.indices if plan.indices is not None else np.arange(len(y_tr))
    if config.model == "cnn":
        col = config.image_column
        for split, frame in (("train", X_train), ("validation", X_val)):
            if col not in frame.columns:
                raise InvalidArgumentError(
                    f"model 'cnn' reads images from column {col!r}, which the {split} split "
                    f"lacks (columns: {list(frame.columns)}). Set image_column in the config."
                )
        paths = X_train[col].astype(str).to_numpy()
        train_set = ImagePathDataset(paths[rows], y_tr[rows], loader=image_loader)
        val_set = ImagePathDataset(X_val[col].astype(str).tolist(), y_va, loader=image_loader)
        arch = cnn_arch(config.params, labels.n_classes)
        return TorchData(train_set, val_set, labels, arch, plan)

    schema = FeatureSchema.infer(X_train)
    pre, x_tr = fit_transform(schema, X_train, max_categories=config.max_categories)
    x_va = transform(pre, schema, X_val)
    arch = mlp_arch(config.params, x_tr.shape[1], labels.n_classes)
    return TorchData(ArrayDataset(x_tr[rows], y_tr[rows]), ArrayDataset(x_va, y_va), labels, arch,
                     plan, schema, pre)


def train_torch(
    config: TrainConfig,
    X_train: pd.DataFrame,
    y_train: pd.DataFrame,
    X_val: pd.DataFrame,
    y_val: pd.DataFrame,
    *,
    workdir: Path | None,
    image_loader: Callable[[str], np.ndarray] | None = None,
    lineage: dict[str, Any] | None = None,
    resume: bool | None = None,
    report: Callable[[dict[str, Any]], None] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train an ``mlp`` or ``cnn`` in this process (CPU or one GPU)."""
    if config.torch.streaming or config.torch.shuffle_buffer is not None:
        raise ConfigError(
            "torch.streaming / torch.shuffle_buffer configure the streamed input, which reads a "
            "materialized version's files; these are in-memory frames. Train with `fstrain "
            "train` (it streams the version) or train_torch_streamed, or drop the options.")
    data = prepare_torch_data(config, X_train, y_train, X_val, y_val, image_loader=image_loader)
    return _train_torch_data(config, data, X_val, data.labels.encode(y_val, split="validation"),
                             workdir=workdir, image_loader=image_loader, lineage=lineage,
                             resume=resume, report=report, on_step=on_step)


def stream_torch_data(config: TrainConfig, source: Any) -> TorchData:
    """The streamed datasets of an ``mlp`` (:mod:`fstrain.trainers.stream`): the
    preprocessing fitted on the train split by one streamed pass, the train split shuffled
    through ``torch.shuffle_buffer`` rows, the validation split in file order."""
    from fstrain.trainers.nets import mlp_arch

    if config.model != "mlp" or config.imbalance in ("oversample", "undersample"):
        raise InvalidArgumentError(
            f"streamed input serves model 'mlp' with imbalance none/class_weight/"
            f"scale_pos_weight; got model {config.model!r}, imbalance {config.imbalance!r}.")
    prep, counts = fit_streamed(source, config)
    labels = prep.labels
    if labels.task != "regression":
        check_method(config.calibration, labels.classes)
    plan = plan_imbalance(config.imbalance, np.repeat(np.arange(len(counts)), counts),
                          labels.classes, seed=config.seed, framework="torch")
    buffer = config.torch.shuffle_buffer
    train = SplitStream(source, "train", prep, seed=config.seed,
                        shuffle_buffer=DEFAULT_SHUFFLE_BUFFER if buffer is None else buffer)
    arch = mlp_arch(config.params, len(feature_names_out(prep.preprocessor)), labels.n_classes)
    return TorchData(train, SplitStream(source, "validation", prep), labels, arch, plan,
                     prep.schema, prep.preprocessor)


def train_torch_streamed(config: TrainConfig | dict[str, Any], source: Any, *, workdir: Path | None,
                         lineage: dict[str, Any] | None = None, resume: bool | None = None,
                         report: Callable[[dict[str, Any]], None] | None = None,
                         on_step: Callable[[int], None] | None = None) -> TrainResult:
    """Train an ``mlp`` in this process from a :class:`~fstrain.trainers.stream.source.StreamSource`
    (a version's split files), never holding a split in memory.

    A resumed run (``resume``) continues from the last checkpoint, mid-epoch ones
    (``torch.checkpoint_every_steps``) included, with the batches an uninterrupted run would
    have taken; the checkpoint records the train split's layout next to ``lineage``, and a
    resume over another layout is refused."""
    config = load_config(config)
    data = stream_torch_data(config, source)
    y_val = data.val_set.labels_and_rows()[0]
    lineage = {**(lineage or {}), "train_stream": data.train_set.layout()}
    result = _train_torch_data(config, data, data.val_set, y_val, workdir=workdir,
                               image_loader=None, lineage=lineage, resume=resume, report=report,
                               on_step=on_step)
    result.extra["streaming"] = {"train_rows": len(data.train_set),
                                 "shuffle_buffer": data.train_set.shuffle_buffer,
                                 "seed": config.seed}
    return result


def _train_torch_data(config: TrainConfig, data: TorchData, X_val: Any, y_val: np.ndarray, *,
                      workdir: Path | None,
                      image_loader: Callable[[str], np.ndarray] | None,
                      lineage: dict[str, Any] | None, resume: bool | None,
                      report: Callable[[dict[str, Any]], None] | None,
                      on_step: Callable[[int], None] | None) -> TrainResult:
    """The loop over prepared datasets → the predictor and its (calibrated) metrics."""
    import torch

    from fstrain.trainers.loop import LoopSpec, fit
    from fstrain.trainers.nets import build_net

    metric, mode = resolve_metric(config, data.labels.n_classes)
    with deterministic_mode(config.torch.deterministic) as notes:
        seed_everything(config.seed)
        net = build_net(data.arch)  # initial weights drawn from the freshly seeded torch RNG
        out = fit(
            LoopSpec(
                model=net, train_set=data.train_set, val_set=data.val_set,
                n_classes=data.labels.n_classes, options=config.torch, seed=config.seed,
                metric=metric, mode=mode, class_weight=data.plan.class_weight,
                checkpoint_dir=(Path(workdir) / "checkpoints") if workdir is not None else None,
                config=config.fingerprint_dict(), lineage=lineage,
                resume=config.resume if resume is None else resume, report=report,
                on_step=on_step,
            )
        )
    module = out.model.to("cpu") if out.device != "cpu" else out.model
    predictor = TorchPredictor(
        kind=config.model, module=module, arch=data.arch, labels=data.labels,
        schema=data.schema, preprocessor=data.preprocessor, image_column=config.image_column,
        image_loader=image_loader,
    )
    params = {**data.arch, **config.torch.model_dump(mode="json")}
    metrics = calibrated_metrics(predictor, config.calibration, X_val, y_val, data.plan.record,
                                 out.metrics)
    return TrainResult(
        model=predictor, metrics=metrics, history=out.history, params=params,
        imbalance=data.plan.record, nondeterminism=notes + out.notes, config=config,
        metric=metric, mode=mode, best_iteration=out.best_epoch, device=out.device,
        checkpoint_dir=(Path(workdir) / "checkpoints") if workdir is not None else None,
        extra={"amp": out.amp, "global_step": out.global_step, "resumed_from": out.resumed_from,
               "torch_version": torch.__version__, "world_size": 1,
               "global_batch": config.torch.batch_size * config.torch.grad_accum_steps,
               "effective_lr": out.lr},
        curves=torch_curves(out.history, metric, mode, out.best_epoch),
    )


def calibrated_metrics(predictor: Any, method: str, X_val: Any, y_val: np.ndarray,
                       imbalance: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """Fit the probability correction ``method`` on the validation split (see
    :mod:`fstrain.trainers.calibration`) and, when one applies, the validation metrics of
    the corrected probabilities (the loop's metrics are of the raw ones)."""
    def raw() -> np.ndarray:
        if getattr(X_val, "streamed", False):  # a streamed split: preprocessed batches
            return np.concatenate([predictor.raw_proba_matrix(x.numpy())
                                   for x, _ in X_val.batches(0, 1, 4096)])
        return predictor.raw_proba_matrix(predictor._input(X_val))

    corrected = calibrate(predictor, method, raw, y_val, imbalance)
    if corrected is None:
        return metrics
    return classification_metrics(y_val, corrected, predictor.labels.n_classes)


def torch_curves(history: list[dict[str, Any]], metric: str, mode: str,
                 best_epoch: int | None) -> Any:
    """Per-epoch curves of the torch loop: eval-mode log-loss and the selection metric on the
    validation split and on a fixed sample of train rows, plus the optimised objective,
    gradient norms, learning rate and the input pipeline's time."""
    from fstrain.trainers.loop import TRAIN_EVAL_ROWS

    return from_history(
        history, unit="epoch", loss="logloss", metric=metric, mode=mode, step_key="epoch",
        best_step=best_epoch,
        extra_keys={"train_objective": "train_loss", "grad_norm_mean": "grad_norm_mean",
                    "grad_norm_max": "grad_norm_max", "lr": "lr",
                    "data_seconds": "data_seconds", "train_seconds": "train_seconds"},
        notes=[f"train values are scored in eval mode after each epoch on a fixed sample of at "
               f"most {TRAIN_EVAL_ROWS} train rows; train_objective is the optimised loss "
               "(label smoothing, class weights) averaged over the epoch's batches; gradient "
               "norms are taken before clipping"])
