"""Metrics against scikit-learn on fixed data; edge cases; bootstrap; baselines."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from fstrain.kernel.errors import InvalidArgumentError
from validation.metrics import (
    baseline_metrics,
    bootstrap_ci,
    choose_threshold,
    classification_cis,
    classification_metrics,
    compare_to_baseline,
    metric_function,
    regression_metrics,
)

# fixed data with tied scores (ties matter for AUC and average precision)
Y = np.array([0, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 0])
S = np.array([.1, .4, .35, .8, .4, .9, .2, .35, .6, .7, .05, .5, .5, .3, .95, .6])


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.65])
def test_classification_metrics_match_sklearn(threshold):
    m = classification_metrics(Y, S, threshold)
    pred = (S >= threshold).astype(int)
    assert m["accuracy"] == pytest.approx(skm.accuracy_score(Y, pred))
    assert m["precision"] == pytest.approx(skm.precision_score(Y, pred))
    assert m["recall"] == pytest.approx(skm.recall_score(Y, pred))
    assert m["f1"] == pytest.approx(skm.f1_score(Y, pred))
    assert m["balanced_accuracy"] == pytest.approx(skm.balanced_accuracy_score(Y, pred))
    assert m["roc_auc"] == pytest.approx(skm.roc_auc_score(Y, S))
    assert m["pr_auc"] == pytest.approx(skm.average_precision_score(Y, S))
    assert m["log_loss"] == pytest.approx(skm.log_loss(Y, S))
    assert m["brier"] == pytest.approx(skm.brier_score_loss(Y, S))
    tn, fp, fn, tp = skm.confusion_matrix(Y, pred).ravel()
    assert m["confusion_matrix"] == {"tn": tn, "fp": fp, "fn": fn, "tp": tp}
    assert (m["n"], m["positives"], m["negatives"]) == (16, 7, 9)
    assert m["base_rate"] == pytest.approx(7 / 16)
    assert m["undefined"] == {}


def test_ranking_metrics_match_sklearn_on_random_data():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    s = np.round(rng.random(500) + 0.3 * y, 2)  # rounding creates many ties
    m = classification_metrics(y, s)
    assert m["roc_auc"] == pytest.approx(skm.roc_auc_score(y, s), abs=1e-12)
    assert m["pr_auc"] == pytest.approx(skm.average_precision_score(y, s), abs=1e-12)


def test_one_class_reports_none_with_reason_instead_of_crashing():
    m = classification_metrics([0, 0, 0, 0], [0.1, 0.7, 0.2, 0.4], 0.5)
    assert m["roc_auc"] is None and "single class" in m["undefined"]["roc_auc"]
    assert m["pr_auc"] is None and "no positive" in m["undefined"]["pr_auc"]
    assert m["recall"] is None and "recall" in m["undefined"]
    assert m["precision"] == 0.0  # one row predicted positive, and it is wrong
    assert m["accuracy"] == pytest.approx(0.75)
    assert m["log_loss"] == pytest.approx(skm.log_loss([0, 0, 0, 0], [0.1, 0.7, 0.2, 0.4],
                                                       labels=[0, 1]))


def test_no_predicted_positive_makes_precision_undefined():
    m = classification_metrics([0, 1, 1], [0.1, 0.2, 0.3], 0.9)
    assert m["precision"] is None
    assert "no row is predicted positive" in m["undefined"]["precision"]
    assert m["f1"] == 0.0 and m["recall"] == 0.0


def test_margin_scores_leave_probability_metrics_undefined():
    m = classification_metrics([0, 1, 1, 0], [-2.0, 1.5, 0.3, -0.1], 0.0)
    assert m["roc_auc"] == 1.0
    assert m["log_loss"] is None and m["brier"] is None
    assert "not a probability" in m["undefined"]["log_loss"]


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(InvalidArgumentError, match=r"binary labels 0/1.*\[2\]"):
        classification_metrics([0, 1, 2], [0.1, 0.2, 0.3])
    with pytest.raises(InvalidArgumentError, match="same length"):
        classification_metrics([0, 1], [0.1, 0.2, 0.3])
    with pytest.raises(InvalidArgumentError, match="finite"):
        classification_metrics([0, 1], [0.1, float("nan")])


def _brute_force(y, s, objective):
    best_t, best_v = None, -np.inf
    for t in np.unique(s):
        pred = (s >= t).astype(int)
        if objective == "f1":
            v = skm.f1_score(y, pred)
        else:
            tpr = skm.recall_score(y, pred)
            fpr = ((pred == 1) & (y == 0)).sum() / (y == 0).sum()
            v = tpr - fpr
        if v > best_v + 1e-12:
            best_t, best_v = t, v
    return best_t, best_v


@pytest.mark.parametrize("strategy", ["f1", "youden"])
def test_choose_threshold_maximises_the_objective(strategy):
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    s = np.round(np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1), 3)
    choice = choose_threshold(y, s, strategy)
    t, v = _brute_force(y, s, strategy)
    assert choice.threshold == pytest.approx(t)
    assert choice.objective_value == pytest.approx(v)
    assert choice.strategy == strategy and choice.n == 300
    assert "validation split" in choice.detail
    if strategy == "f1":
        assert classification_metrics(y, s, choice.threshold)["f1"] == pytest.approx(v)


def test_choose_threshold_fixed_and_errors():
    fixed = choose_threshold([0, 1], [0.2, 0.8], 0.42)
    assert fixed.threshold == 0.42 and fixed.strategy == "fixed" and fixed.objective_value is None
    with pytest.raises(InvalidArgumentError, match="single class.*fixed threshold"):
        choose_threshold([1, 1, 1], [0.2, 0.5, 0.9], "f1")
    with pytest.raises(InvalidArgumentError, match="'f1', 'youden' or a number"):
        choose_threshold([0, 1], [0.2, 0.8], "accuracy")


def test_regression_metrics_match_sklearn():
    rng = np.random.default_rng(2)
    y = rng.normal(10, 3, 200)
    p = y + rng.normal(0, 1, 200)
    m = regression_metrics(y, p)
    assert m["mae"] == pytest.approx(skm.mean_absolute_error(y, p))
    assert m["mse"] == pytest.approx(skm.mean_squared_error(y, p))
    assert m["rmse"] == pytest.approx(np.sqrt(skm.mean_squared_error(y, p)))
    assert m["r2"] == pytest.approx(skm.r2_score(y, p))
    const = regression_metrics([3.0, 3.0, 3.0], [2.0, 3.0, 4.0])
    assert const["r2"] is None and "constant" in const["undefined"]["r2"]


def test_bootstrap_ci_is_deterministic_and_contains_the_estimate():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 400)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    auc = metric_function("roc_auc")
    a = bootstrap_ci(auc, y, s, n_resamples=300, seed=11)
    b = bootstrap_ci(auc, y, s, n_resamples=300, seed=11)
    c = bootstrap_ci(auc, y, s, n_resamples=300, seed=12)
    assert a == b
    assert (a["lower"], a["upper"]) != (c["lower"], c["upper"])
    assert a["estimate"] == pytest.approx(skm.roc_auc_score(y, s))
    assert a["lower"] < a["estimate"] < a["upper"]
    assert a["n_valid"] == 300 and a["method"] == "percentile bootstrap"
    # a 99% interval is wider than the 95% one
    wide = bootstrap_ci(auc, y, s, n_resamples=300, seed=11, alpha=0.01)
    assert wide["lower"] <= a["lower"] and wide["upper"] >= a["upper"]


def test_bootstrap_drops_resamples_where_the_metric_is_undefined():
    y = np.array([0] * 29 + [1])  # many resamples have no positive row
    s = np.linspace(0, 1, 30)
    ci = bootstrap_ci(metric_function("roc_auc"), y, s, n_resamples=200, seed=0)
    assert 0 < ci["n_valid"] < 200


def test_classification_cis_cover_requested_metrics():
    cis = classification_cis(Y, S, 0.5, metrics=("roc_auc", "f1"), n_resamples=50, seed=3)
    assert set(cis) == {"roc_auc", "f1"}
    assert cis["f1"]["estimate"] == pytest.approx(classification_metrics(Y, S, 0.5)["f1"])


def test_baselines_and_comparison():
    y = np.array([0] * 70 + [1] * 30)
    base = baseline_metrics(y, prior=0.25)
    assert base["baseline"] == "majority_class_prior" and base["prior_source"].startswith("given")
    assert base["roc_auc"] == 0.5
    assert base["pr_auc"] == pytest.approx(0.3)
    assert base["accuracy"] == pytest.approx(0.7)  # predicts the majority class 0
    assert base["brier"] == pytest.approx(np.mean((0.25 - y) ** 2))
    reg = baseline_metrics([1.0, 2.0, 3.0], task="regression")
    assert reg["baseline"] == "mean_predictor" and reg["r2"] == pytest.approx(0.0)
    diff = compare_to_baseline({"roc_auc": 0.8, "brier": 0.3}, {"roc_auc": 0.5, "brier": 0.2})
    assert diff["roc_auc"]["better"] is True and diff["roc_auc"]["delta"] == pytest.approx(0.3)
    assert diff["brier"]["better"] is False  # lower is better
    with pytest.raises(InvalidArgumentError, match="task must be"):
        baseline_metrics(y, task="ranking")


@pytest.mark.parametrize("k, n, wilson, exact", [
    (3, 10, (0.1078, 0.6032), (0.0667, 0.6525)),
    (0, 10, (0.0, 0.2775), (0.0, 0.3085)),
    (10, 10, (0.7225, 1.0), (0.6915, 1.0)),
    (0, 3, (0.0, 0.5615), (0.0, 0.7076)),
    (50, 100, (0.4038, 0.5962), (0.3983, 0.6017)),
])
def test_exact_and_wilson_intervals_match_published_values(k, n, wilson, exact):
    from validation.metrics import clopper_pearson_interval, wilson_interval

    assert wilson_interval(k, n) == pytest.approx(list(wilson), abs=5e-5)
    assert clopper_pearson_interval(k, n) == pytest.approx(list(exact), abs=5e-5)


def test_intervals_refuse_impossible_counts_and_have_none_for_no_rows():
    from validation.metrics import clopper_pearson_interval, wilson_interval

    assert clopper_pearson_interval(0, 0) is None and wilson_interval(0, 0) is None
    with pytest.raises(InvalidArgumentError, match="0 <= k <= n"):
        clopper_pearson_interval(4, 3)


def test_threshold_detail_names_where_its_rows_come_from():
    from validation.metrics import choose_threshold

    y, s = [0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9]
    assert choose_threshold(y, s).detail.endswith("on 6 rows of the validation split")
    carved = choose_threshold(y, s, rows_from="rows carved from the train split")
    assert carved.detail.endswith("on 6 rows carved from the train split")
