"""What a training run returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fstrain.trainers.config import TrainConfig
    from fstrain.trainers.curves import LearningCurves
    from fstrain.trainers.predictor_base import Predictor


@dataclass
class TrainResult:
    """The outcome of :func:`fstrain.trainers.train`.

    Attributes:
        model: the fitted :class:`~fstrain.trainers.predictor_base.Predictor`.
        metrics: validation metrics of the returned model (``auc``, ``logloss``, ``accuracy``,
            ``pr_auc`` for binary, ``n``), keyed without a ``val_`` prefix.
        history: one dict per boosting round / epoch (``val_<metric>``, ``train_loss``, ``lr``...).
        params: the final hyperparameters actually used (framework names, after defaults).
        imbalance: the imbalance strategy applied and class counts before/after (train only).
        nondeterminism: notes on what is not bitwise reproducible in this run.
        config: the validated config of the run.
        metric / mode: the selection metric and whether higher is better.
        best_iteration: best boosting round / epoch (0-based) used for the returned model.
        device: ``cpu`` or ``cuda``.
        checkpoint_dir: ``workdir/checkpoints`` for torch runs, else None.
        extra: anything trainer-specific (timings, world size, amp dtype, ...).
        curves: train/validation loss and selection metric per round/epoch
            (:class:`~fstrain.trainers.curves.LearningCurves`); every trainer fills it.
    """

    model: Predictor
    metrics: dict[str, float]
    history: list[dict[str, Any]]
    params: dict[str, Any]
    imbalance: dict[str, Any]
    nondeterminism: list[str]
    config: TrainConfig
    metric: str
    mode: str
    best_iteration: int | None = None
    device: str = "cpu"
    checkpoint_dir: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    curves: LearningCurves | None = None
