"""Calibration against the constant predictor, and the standard gate that fails a model whose
probabilities are worse than it."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss

from validation.calibration import calibration_report
from validation.evaluate import select_gates
from validation.gates import evaluate_gates, failing_gates
from validation.metrics import baseline_metrics, classification_metrics


def test_report_matches_sklearn_and_the_constant_predictor(eval_data):
    d = eval_data
    prior = 0.3
    cal = calibration_report(d.y, d.score, prior=prior, n_bins=10)
    assert cal["brier"] == pytest.approx(brier_score_loss(d.y, d.score))
    assert cal["log_loss"] == pytest.approx(log_loss(d.y, d.score))
    assert cal["brier_constant"] == pytest.approx(brier_score_loss(d.y, np.full(len(d.y), prior)))
    assert sum(b["rows"] for b in cal["bins"]) == len(d.y)
    gaps = [b["rows"] * abs(b["mean_predicted"] - b["observed_rate"]) for b in cal["bins"]
            if b["rows"]]
    assert cal["ece"] == pytest.approx(sum(gaps) / len(d.y))


def test_perfectly_calibrated_scores_have_a_small_ece():
    rng = np.random.default_rng(0)
    p = rng.random(20000)
    y = (rng.random(20000) < p).astype(int)
    assert calibration_report(y, p, prior=0.5)["ece"] < 0.02


def test_a_model_worse_than_the_constant_predictor_fails_the_standard_gates(eval_data):
    d = eval_data
    # ranks well (same order as the good scores) but pushed to 0/1: overconfident
    bad = np.clip((d.score > 0.3).astype(float), 0.001, 0.999)
    gates = [g.gate for g in select_gates([], None, task="binary")]
    assert "better_than_baseline(log_loss)" in gates and "better_than_baseline(brier)" in gates
    base = baseline_metrics(d.y, prior=float(d.y.mean()))
    metrics = classification_metrics(d.y, bad, 0.5)
    cal = calibration_report(d.y, bad, prior=float(d.y.mean()))
    assert set(cal["worse_than_constant"]) == {"brier", "log_loss"}
    report = evaluate_gates([g for g in gates if g != "explanation_available"], metrics,
                            baseline=base).to_dict()
    failing = failing_gates(report)
    assert [f.split(" (")[0] for f in failing] == ["better_than_baseline(log_loss)",
                                                   "better_than_baseline(brier)"]
    good = evaluate_gates(["better_than_baseline(log_loss)"],
                          classification_metrics(d.y, d.score, 0.5), baseline=base)
    assert good.passed
