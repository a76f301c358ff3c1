"""The plain-language fit diagnosis, the figure and the scorecard section."""

from __future__ import annotations

from validation.learning_curves import (
    fit_diagnosis,
    learning_curves_html,
    learning_curves_png,
    scorecard_summary,
)


def _curves(train, val, best=None, unit="epoch"):
    n = len(train)
    return {"unit": unit, "loss": "logloss", "metric": "auc", "mode": "max",
            "steps": list(range(n)), "train_loss": train, "val_loss": val,
            "train_metric": [0.5] * n, "val_metric": [0.5] * n,
            "best_step": n - 1 if best is None else best, "extra": {}, "notes": []}


def test_large_gap_is_overfitting():
    d = fit_diagnosis(_curves([0.6, 0.3, 0.1, 0.05, 0.02], [0.6, 0.45, 0.42, 0.41, 0.40]))
    assert d["verdict"] == "overfitting" and "above the train logloss" in d["text"]
    assert d["evidence"]["gap"]["gap"] > 0.9


def test_validation_loss_rising_after_its_minimum_is_overfitting():
    d = fit_diagnosis(_curves([0.6, 0.5, 0.45, 0.42, 0.40, 0.39], [0.6, 0.5, 0.46, 0.48, 0.5, 0.52],
                              best=2))
    assert d["verdict"] == "overfitting" and "early stopping kept epoch 2" in d["text"]


def test_still_falling_or_flat_is_underfitting_and_a_plateau_is_a_good_fit():
    falling = fit_diagnosis(_curves([0.7, 0.6, 0.55, 0.5, 0.45, 0.4], [0.7, 0.62, 0.57, 0.52, 0.47, 0.42]))
    assert falling["verdict"] == "underfitting" and "still falling" in falling["text"]
    flat = fit_diagnosis(_curves([0.693, 0.693, 0.6929, 0.6929], [0.693] * 4))
    assert flat["verdict"] == "underfitting" and "barely moved" in flat["text"]
    good = fit_diagnosis(_curves([0.7, 0.5, 0.42, 0.41, 0.405, 0.404], [0.7, 0.5, 0.44, 0.43, 0.43, 0.43]))
    assert good["verdict"] == "good fit"


def test_scorecard_section_and_figure():
    curves = _curves([0.6, 0.3, 0.1], [0.6, 0.45, 0.42])
    summary = scorecard_summary(curves)
    html = learning_curves_html(summary)
    assert 'id="learning-curves"' in html and "Overfitting" in html
    assert "without learning curves" in learning_curves_html(None)
    assert learning_curves_png(curves).startswith(b"\x89PNG")
