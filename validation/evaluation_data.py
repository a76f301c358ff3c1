"""What a model is evaluated on and how: the rows (:class:`EvaluationData`), the settings
from the pipeline's configuration (:class:`EvaluationSettings`), and the binary label helpers
the evaluations share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


@dataclass
class EvaluationData:
    """The rows to evaluate on. ``X_*`` are model inputs only (helper columns removed);
    ``helpers`` holds the test rows' helper columns, in the same order. ``validation_rows``
    says where the validation rows come from, after their count (``"rows carved from the
    train split ..."`` for a train/test version); ``validation_warning`` is shown beside the
    threshold when those rows may not have been held out from fitting."""

    X_validation: pd.DataFrame
    X_test: pd.DataFrame
    y_train: pd.Series
    y_validation: pd.Series
    y_test: pd.Series
    helpers: pd.DataFrame
    validation_rows: str = "rows of the validation split"
    validation_warning: str | None = None


@dataclass(frozen=True)
class EvaluationSettings:
    """How to evaluate (from the pipeline's configuration)."""

    threshold_strategy: str | float = "f1"
    min_slice_size: int = 30
    min_slice_positives: int = 10
    min_slice_negatives: int = 10
    shap_samples: int = 200
    bootstrap_resamples: int = 200
    seed: int = 0
    slice_bands: Mapping[str, Sequence[float]] = field(default_factory=dict)
    intersections: Sequence[tuple[str, str]] = ()
    naive_forecast: str | None = None  # feature = last observed label (regression baseline)


def positive_class(y: pd.Series) -> Any:
    """The positive label of a binary target (``True``, else the largest value)."""
    values = sorted(y.dropna().unique().tolist())
    return True if True in values else values[-1]


def as_binary(y: pd.Series, positive: Any) -> np.ndarray:
    """0/1 labels."""
    return (y == positive).astype(int).to_numpy()
