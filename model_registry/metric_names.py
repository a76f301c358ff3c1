"""One metric vocabulary: every registered metric is named ``<split>_<metric>``.

``split`` is ``train``, ``validation`` or ``test``; ``metric`` uses the scorecard's names
(``roc_auc``, ``pr_auc``, ``log_loss``, ``accuracy``, ``f1``, ``rmse``, ...). The training
pipeline registers ``validation_*`` (tuned or not); validation scorecards speak of ``test``.
``get_best_model(name, "roc_auc")`` — a metric without a split — means the validation metric,
the one model selection may use; trainer spellings (``auc``, ``logloss``) are aliases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SPLITS = ("train", "validation", "test")
ALIASES = {"auc": "roc_auc", "logloss": "log_loss", "mlogloss": "log_loss",
           "average_precision": "pr_auc", "val": "validation"}
#: counts and bookkeeping numbers a trainer reports beside its metrics (not metrics)
NOT_METRICS = frozenset({"n", "world_size", "best_iteration", "training_iteration"})


def canonical(metric: str) -> str:
    """The vocabulary's name of a bare metric (``auc`` → ``roc_auc``)."""
    return ALIASES.get(metric, metric)


def split_of(key: str) -> str | None:
    """The split a metric key names (``validation_roc_auc`` → ``validation``), else None."""
    for split in SPLITS:
        if key.startswith(split + "_"):
            return split
    if key.startswith("val_"):
        return "validation"
    return None


def metric_key(metric: str, default_split: str = "validation") -> str:
    """``metric`` as a registered key: split-qualified names are normalised (``val_auc`` →
    ``validation_roc_auc``); a bare name gets ``default_split``."""
    split = split_of(metric)
    if split is None:
        return f"{default_split}_{canonical(metric)}"
    bare = metric.split("_", 1)[1]
    return f"{split}_{canonical(bare)}"


def recorded_key(metric: str, recorded: set[str] | frozenset[str]) -> str | None:
    """The key ``get_best_model`` ranks by: the registered key ``metric`` resolves to when some
    version records it, else ``metric`` as given when some version records that, else None."""
    key = metric_key(metric)
    if key in recorded:
        return key
    return metric if metric in recorded else None


def registry_metrics(metrics: Mapping[str, Any], split: str = "validation") -> dict[str, Any]:
    """Trainer metrics (bare names, computed on ``split``) as registered keys."""
    return {metric_key(k, split): v for k, v in metrics.items() if k not in NOT_METRICS}
