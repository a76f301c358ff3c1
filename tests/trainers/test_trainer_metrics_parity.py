"""The trainers' validation metrics agree with scikit-learn's definitions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, log_loss, roc_auc_score

from fstrain.trainers.metrics import classification_metrics


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_binary_metrics_match_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 500)
    p = np.clip(rng.random(500) * 0.6 + y * 0.3, 0, 1)
    p[:50] = np.round(p[:50], 1)  # ties
    p[0] = 0.0  # clipped
    out = classification_metrics(y, p, 2)
    assert out["auc"] == pytest.approx(roc_auc_score(y, p), abs=1e-12)
    assert out["pr_auc"] == pytest.approx(average_precision_score(y, p), abs=1e-12)
    assert out["logloss"] == pytest.approx(log_loss(y, np.clip(p, 1e-15, 1 - 1e-15)), rel=1e-9)
    assert out["accuracy"] == pytest.approx(((p > 0.5) == y).mean())


def test_multiclass_logloss_matches_scikit_learn():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 300)
    mat = rng.dirichlet([1, 1, 1], 300)
    out = classification_metrics(y, mat, 3)
    assert out["logloss"] == pytest.approx(log_loss(y, mat, labels=[0, 1, 2]), rel=1e-9)
    assert out["auc"] == pytest.approx(roc_auc_score(y, mat, multi_class="ovr"), abs=1e-12)


def test_single_class_gives_nan_auc():
    out = classification_metrics(np.ones(10, dtype=int), np.full(10, 0.7), 2)
    assert np.isnan(out["auc"]) and np.isnan(out["pr_auc"])
