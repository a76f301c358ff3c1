"""validation.compare on synthetic scores: unrelated models refused, differing test splits
warned and paired on their shared rows, and no verdict from a difference inside its interval."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError
from validation.compare import RowScores, compare_versions
from validation.paired import interval_verdict, paired_delta


def _model(name, version, td=1, sha="a" * 64, rows=600):
    lineage = {"feature_view": {"name": "fv", "version": 1}, "training_dataset_version": td,
               "training_dataset": {"splits": {"test": {"sha256": sha, "rows": rows}}}}
    return SimpleNamespace(name=name, version=version, manifest={"lineage": lineage})


def _scores(y, s, ids):
    return RowScores("binary", "label", np.asarray(y), np.asarray(s, float),
                     pd.DataFrame({"id": ids}), positive=True)


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(3)
    y = rng.random(600) < 0.3
    signal = np.clip(0.3 + 0.35 * (y - 0.3) + rng.normal(0, 0.2, 600), 0.001, 0.999)
    return y, signal


def test_two_different_models_are_refused_unless_forced(rows):
    y, s = rows
    scored = []

    def score(m):
        scored.append(m.name)
        return _scores(y, s, np.arange(600))

    with pytest.raises(InvalidArgumentError, match="two different models.*--force"):
        compare_versions(_model("income", 1), _model("fraud", 1), score=score)
    assert scored == []  # refused before anything is read
    forced = compare_versions(_model("income", 1), _model("fraud", 1), score=score, force=True,
                              resamples=50)
    assert any("two different models" in w for w in forced.warnings)


def test_a_tiny_change_inside_its_interval_is_not_called_better(rows):
    y, s = rows
    rng = np.random.default_rng(7)
    tiny = np.clip(s + rng.normal(0, 0.004, len(s)), 0.001, 0.999)
    result = compare_versions(_model("m", 1), _model("m", 2), resamples=300,
                              score=lambda m: _scores(y, s if m.version == 1 else tiny,
                                                      np.arange(600)))
    auc = next(r for r in result.metrics if r["metric"] == "roc_auc")
    assert 0 < abs(auc["delta"]) < 0.002 and auc["lower"] < 0 < auc["upper"]
    assert auc["verdict"] == "no clear difference"
    assert result.same_test_split and not result.warnings and result.rows["shared"] == 600
    assert "better" not in result.to_text().split("verdict for B")[1]


def test_a_clear_change_gets_a_verdict_in_each_metrics_direction(rows):
    y, s = rows
    better = np.where(y, np.minimum(s + 0.15, 0.999), np.maximum(s - 0.15, 0.001))
    result = compare_versions(_model("m", 1), _model("m", 2), resamples=200,
                              score=lambda m: _scores(y, s if m.version == 1 else better,
                                                      np.arange(600)))
    verdicts = {r["metric"]: r["verdict"] for r in result.metrics}
    assert verdicts == {"roc_auc": "better", "pr_auc": "better", "log_loss": "better",
                        "brier": "better"}  # log loss and Brier fall: lower is better
    same = compare_versions(_model("m", 1), _model("m", 2), resamples=50,
                            score=lambda m: _scores(y, s, np.arange(600)))
    assert {r["verdict"] for r in same.metrics} == {"no clear difference"}
    assert {r["delta"] for r in same.metrics} == {0.0}


def test_differing_test_splits_are_warned_and_paired_on_shared_rows(rows):
    y, s = rows
    ids = np.arange(600)
    # B's test split: rows 300.. of A's plus 300 rows A never saw; row 310's label differs
    ids_b = np.concatenate([ids[300:], ids[300:] + 1000])
    y_b = np.concatenate([y[300:], y[:300]])
    y_b[10] = not y_b[10]
    s_b = np.concatenate([s[300:], s[:300]])
    result = compare_versions(
        _model("m", 1), _model("m", 2, td=2, sha="b" * 64), resamples=50,
        score=lambda m: _scores(y, s, ids) if m.version == 1 else _scores(y_b, s_b, ids_b))
    assert not result.same_test_split
    assert "the test splits differ" in result.warnings[0]
    assert "training dataset v1" in result.warnings[0]
    assert "training dataset v2" in result.warnings[0]
    assert result.rows == {"a": 600, "b": 600, "shared": 299, "label_mismatch": 1}
    assert any("different labels" in w for w in result.warnings)
    assert {r["delta"] for r in result.metrics} == {0.0}  # the same scores on the shared rows
    assert result.to_dict()["test_split_b"]["training_dataset_version"] == 2


def test_rows_that_cannot_be_matched_give_no_verdict(rows):
    y, s = rows
    unkeyed = RowScores("binary", "label", y, s, None, positive=True)
    result = compare_versions(_model("m", 1), _model("m", 2, sha="b" * 64), resamples=50,
                              score=lambda m: unkeyed)
    assert result.metrics == [] and "cannot be matched" in result.warnings[-1]
    assert "no verdict" in result.to_text()


def test_the_paired_interval_and_verdict():
    y = np.array([0, 1] * 50)
    s = np.linspace(0.1, 0.9, 100)
    delta, lower, upper = paired_delta(lambda t, p: float(np.mean(t == (p > 0.5))), y, s, s,
                                       resamples=20, seed=0)
    assert (delta, lower, upper) == (0.0, 0.0, 0.0)
    assert interval_verdict(0.0, 0.0, True) == "no clear difference"
    assert interval_verdict(0.001, 0.01, True) == "better"
    assert interval_verdict(0.001, 0.01, False) == "worse"
    assert interval_verdict(float("nan"), 0.1, True) == "undetermined"
