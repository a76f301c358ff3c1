"""Class imbalance: weights or resampling of the **train split only** (never before the split).

The validation split is never touched; the returned record says what was applied and the class
counts before and after, so the choice ends up in the model's training record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fstrain.kernel.errors import ConfigError


@dataclass
class ImbalancePlan:
    """What an imbalance strategy does to the train split.

    ``indices`` selects (with repetition for oversampling) train rows; ``sample_weight`` and
    ``class_weight`` are per-row / per-class weights; ``scale_pos_weight`` is XGBoost's knob.
    """

    strategy: str
    indices: np.ndarray | None = None
    class_weight: np.ndarray | None = None
    scale_pos_weight: float | None = None
    record: dict[str, Any] = field(default_factory=dict)

    def sample_weight(self, y: np.ndarray) -> np.ndarray | None:
        """Per-row weights for the (possibly resampled) train labels ``y``."""
        if self.class_weight is None:
            return None
        return self.class_weight[np.asarray(y, dtype=np.int64)].astype(np.float32)


def _counts(y: np.ndarray, classes: tuple[Any, ...]) -> dict[str, int]:
    return _named(np.bincount(np.asarray(y, dtype=np.int64), minlength=len(classes)), classes)


def _named(bins: np.ndarray, classes: tuple[Any, ...]) -> dict[str, int]:
    return {str(c): int(n) for c, n in zip(classes, bins, strict=True)}


def plan_imbalance(
    strategy: str,
    y_train: np.ndarray,
    classes: tuple[Any, ...],
    *,
    seed: int,
    y_val: np.ndarray | None = None,
    framework: str = "xgboost",
) -> ImbalancePlan:
    """Decide how to counter class imbalance on the train split.

    Args:
        strategy: ``none``, ``scale_pos_weight`` (binary: weight of the positive class =
            negatives/positives), ``class_weight`` (``n / (K * count_k)`` per class),
            ``oversample`` (repeat minority rows up to the majority count) or ``undersample``
            (drop majority rows down to the minority count).
        y_train: class indices of the train split.
        classes: class labels, for the record.
        seed: resampling seed (a dedicated numpy Generator; no global RNG).
        y_val: class indices of the validation split, only to record that it is untouched.
        framework: ``xgboost``/``lightgbm`` (use their ``scale_pos_weight``) or any other
            (class weights).
    """
    y_train = np.asarray(y_train, dtype=np.int64)
    k = len(classes)
    val_counts = None if y_val is None else np.bincount(np.asarray(y_val, dtype=np.int64),
                                                        minlength=k)
    if strategy not in ("oversample", "undersample"):
        return plan_from_counts(strategy, np.bincount(y_train, minlength=k), classes,
                                val_counts=val_counts, framework=framework)
    before = _counts(y_train, classes)
    counts = np.bincount(y_train, minlength=k).astype(np.float64)
    plan = ImbalancePlan(strategy=strategy)
    rec: dict[str, Any] = {"strategy": strategy, "train_counts_before": before}
    rng = np.random.default_rng(seed)
    target = int(counts.max() if strategy == "oversample" else counts[counts > 0].min())
    parts = []
    for cls in range(k):
        idx = np.flatnonzero(y_train == cls)
        if len(idx) == 0:
            continue
        if strategy == "oversample" and len(idx) < target:
            extra = rng.choice(idx, size=target - len(idx), replace=True)
            idx = np.concatenate([idx, extra])
        elif strategy == "undersample" and len(idx) > target:
            idx = rng.choice(idx, size=target, replace=False)
        parts.append(np.sort(idx))
    indices = np.concatenate(parts)
    rng.shuffle(indices)
    plan.indices = indices
    rec["train_counts_after"] = _counts(y_train[indices], classes)
    rec["seed"] = seed
    plan.record = _close_record(rec, before, classes, val_counts)
    return plan


def plan_from_counts(
    strategy: str,
    train_counts: np.ndarray,
    classes: tuple[Any, ...],
    *,
    val_counts: np.ndarray | None = None,
    framework: str = "xgboost",
) -> ImbalancePlan:
    """:func:`plan_imbalance` for the strategies that weigh rather than resample, from the
    train split's class counts alone (a streamed pass counts them; no label array is held).
    ``val_counts`` (the validation split's, optional) only go into the record."""
    if strategy in ("oversample", "undersample"):
        raise ConfigError(f"imbalance={strategy!r} resamples train rows: it needs the train "
                          "labels (plan_imbalance), not only their counts.")
    k = len(classes)
    bins = np.asarray(train_counts, dtype=np.int64)
    before = _named(bins, classes)
    plan = ImbalancePlan(strategy=strategy)
    rec: dict[str, Any] = {"strategy": strategy, "train_counts_before": before}
    counts = bins.astype(np.float64)
    if strategy == "none":
        pass
    elif strategy == "scale_pos_weight":
        if k != 2:
            raise ConfigError(
                f"imbalance='scale_pos_weight' needs a binary label; this one has {k} classes "
                f"({', '.join(map(str, classes))}). Use imbalance='class_weight'."
            )
        spw = float(counts[0] / max(counts[1], 1.0))
        plan.scale_pos_weight = spw
        rec["scale_pos_weight"] = spw
        if framework not in ("xgboost", "lightgbm"):
            plan.class_weight = np.array([1.0, spw])
            rec["class_weight"] = {str(classes[0]): 1.0, str(classes[1]): spw}
    elif strategy == "class_weight":
        weights = int(bins.sum()) / (k * np.maximum(counts, 1.0))
        plan.class_weight = weights
        rec["class_weight"] = {str(c): float(w) for c, w in zip(classes, weights, strict=True)}
    else:  # pragma: no cover - the config validates the strategy
        raise ConfigError(f"Unknown imbalance strategy {strategy!r}.")
    plan.record = _close_record(rec, before, classes, val_counts)
    return plan


def _close_record(rec: dict[str, Any], before: dict[str, int], classes: tuple[Any, ...],
                  val_counts: np.ndarray | None) -> dict[str, Any]:
    rec.setdefault("train_counts_after", before)
    rec["applied_to"] = "train"
    if val_counts is not None:
        rec["val_counts"] = _named(val_counts, classes)
        rec["val_untouched"] = True
    return rec
