"""Fixed, seeded evaluation data shared by the validation tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest


@dataclass(frozen=True)
class EvalData:
    """Labels, probability scores and helper columns of a fixed evaluation set."""

    y: np.ndarray
    score: np.ndarray
    helpers: pd.DataFrame


def make_eval_data(n: int = 2000, seed: int = 7, *, dp_bias: bool = False) -> EvalData:
    """Evaluation rows whose scores depend on the label only (or, with ``dp_bias``, are pushed
    up for ``sex == "M"`` so the model selects M at about twice F's rate)."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], size=n)
    race = rng.choice(["A", "B", "C"], size=n, p=[0.5, 0.3, 0.2]).astype(object)
    race[-12:] = "D"  # a tiny slice: reported, never judged
    age = rng.integers(18, 80, size=n).astype(float)
    age[-5:] = np.nan
    y = (rng.random(n) < 0.3).astype(int)
    logit = -1.2 + 2.2 * y + rng.normal(0, 1.0, size=n)
    if dp_bias:
        logit = logit + np.where(sex == "M", 1.4, -0.4)
    score = 1 / (1 + np.exp(-logit))
    helpers = pd.DataFrame({"sex": sex, "race": race, "age": age})
    return EvalData(y, score, helpers)


@pytest.fixture(scope="session")
def eval_data() -> EvalData:
    """An unbiased evaluation set."""
    return make_eval_data()


@pytest.fixture(scope="session")
def biased_data() -> EvalData:
    """An evaluation set with a planted demographic-parity disparity on ``sex``."""
    return make_eval_data(dp_bias=True)


@pytest.fixture(scope="session")
def xgb_setup():
    """A small XGBoost classifier on tabular data, its test features and labels."""
    import xgboost as xgb

    rng = np.random.default_rng(3)
    n = 600
    X = pd.DataFrame({
        "amount": rng.gamma(2.0, 50.0, size=n),
        "age_days": rng.integers(0, 3000, size=n).astype(float),
        "n_tx_24h": rng.poisson(3, size=n).astype(float),
        "noise": rng.normal(size=n),
    })
    logit = 0.02 * (X["amount"] - 100) + 0.4 * (X["n_tx_24h"] - 3) - 0.0005 * X["age_days"]
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    model = xgb.XGBClassifier(n_estimators=25, max_depth=3, learning_rate=0.3,
                              random_state=0, n_jobs=1)
    model.fit(X.iloc[:400], y.iloc[:400] if hasattr(y, "iloc") else y[:400])
    return model, X.iloc[400:].reset_index(drop=True), np.asarray(y)[400:]


@pytest.fixture(scope="session")
def full_scorecard(eval_data, xgb_setup):
    """A scorecard with every section filled, plus the inputs its plots need."""
    from validation.bias import slice_report
    from validation.explain import explain
    from validation.gates import evaluate_gates
    from validation.metrics import (
        baseline_metrics,
        choose_threshold,
        classification_cis,
        classification_metrics,
    )
    from validation.scorecard import Scorecard, library_versions

    d = eval_data
    # threshold on a "validation" half, metrics on the "test" half
    val, test = slice(0, 1000), slice(1000, None)
    choice = choose_threshold(d.y[val], d.score[val], "f1")
    metrics = classification_metrics(d.y[test], d.score[test], choice.threshold)
    cis = classification_cis(d.y[test], d.score[test], choice.threshold, n_resamples=200, seed=1)
    baseline = baseline_metrics(d.y[test], prior=float(d.y[val].mean()))
    bias = slice_report(d.y[test], d.score[test], (d.score[test] >= choice.threshold).astype(int),
                        d.helpers.iloc[1000:], min_slice_size=30, bands={"age": [30, 50, 65]})
    model, X, _ = xgb_setup
    explanation = explain(model, X, max_samples=100, seed=0)
    card = Scorecard(
        model_name="fraud <model>",
        model_version=3,
        evaluation={"split": "test", "rows": metrics["n"], "training_dataset_version": 2},
        lineage={
            "feature_view": {"name": "transactions_fv", "version": 1},
            "training_dataset_version": 2,
            "feature_group_commits": {"transactions:1": 1712000000000, "accounts:1": 1711000000},
            "source": "<script>alert(1)</script>",
        },
        library_versions=library_versions(["numpy", "pandas"]),
        metrics=metrics,
        confidence_intervals=cis,
        threshold=choice.to_dict(),
        baselines={"majority_class_prior": baseline},
        bias=bias.to_dict(),
        explanation=explanation.to_dict(),
        notes=["Evaluated on the held-out test split."],
    )
    report = evaluate_gates(
        ["roc_auc >= 0.8", "max_abs_dp_difference <= 0.15", "better_than_baseline",
         "better_than_previous"],
        card.gate_metrics(), baseline=baseline, previous=None,
    )
    card.gates = report.to_dict()
    return {"card": card, "bias": bias, "explanation": explanation, "y": d.y[test],
            "score": d.score[test], "metrics": metrics, "threshold": choice.threshold}
