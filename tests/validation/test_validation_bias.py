"""Bias slices: planted disparities are flagged, unbiased models pass, small slices are not
judged."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError
from validation.bias import BiasReport, age_bands, slice_report
from validation.gates import evaluate_gates

DP_GATE = "max_abs_dp_difference <= 0.1"


def _report(data, threshold=0.5, **kw):
    pred = (data.score >= threshold).astype(int)
    return slice_report(data.y, data.score, pred, data.helpers, **kw)


def test_age_bands_labels_edges_and_missing():
    s = pd.Series([17, 18, 29, 30, 64, 65, 90, None], index=list("abcdefgh"))
    bands = age_bands(s, [18, 30, 65])
    assert list(bands) == ["<18", "18-29", "18-29", "30-64", "30-64", ">=65", ">=65",
                           "(missing)"]
    assert list(bands.index) == list("abcdefgh")
    frac = age_bands(pd.Series([20.5, 31.0]), [18, 30, 65])
    assert list(frac) == ["[18, 30)", "[30, 65)"]
    with pytest.raises(InvalidArgumentError, match="strictly increasing"):
        age_bands(s, [30, 18])


def test_slice_figures_match_a_manual_computation(eval_data):
    d = eval_data
    rep = _report(d, min_slice_size=30)
    pred = (d.score >= 0.5).astype(int)
    f = (d.helpers["sex"] == "F").to_numpy()
    sl = next(s for s in rep.slices_for("sex") if s.value == "F")
    assert sl.size == f.sum()
    assert sl.base_rate == pytest.approx(d.y[f].mean())
    assert sl.selection_rate == pytest.approx(pred[f].mean())
    assert sl.tpr == pytest.approx(pred[f & (d.y == 1)].mean())
    assert sl.fpr == pytest.approx(pred[f & (d.y == 0)].mean())
    from sklearn.metrics import roc_auc_score

    assert sl.auc == pytest.approx(roc_auc_score(d.y[f], d.score[f]))
    disp = rep.disparities[0]
    rates = [s.selection_rate for s in rep.slices_for("sex")]
    assert disp.demographic_parity_difference == pytest.approx(max(rates) - min(rates))


def test_planted_disparity_is_flagged_by_the_dp_gate(biased_data, eval_data):
    biased = _report(biased_data, columns=["sex"])
    fig = biased.figures()
    sel = {s.value: s.selection_rate for s in biased.slices_for("sex")}
    assert sel["M"] > 2 * sel["F"]  # the planted 2x selection-rate disparity
    gate = evaluate_gates([DP_GATE], fig).results[0]
    assert gate.passed is False and gate.value == pytest.approx(sel["M"] - sel["F"])
    assert biased.disparities[0].extremes["demographic_parity_difference"] == ("M", "F")

    fair = _report(eval_data, columns=["sex"])
    report = evaluate_gates([DP_GATE], fair.figures())
    assert report.passed, report.results[0].detail


def test_equal_opportunity_and_auc_gap_use_tpr_and_auc(biased_data):
    rep = _report(biased_data, columns=["sex"])
    tprs = [s.tpr for s in rep.slices_for("sex")]
    aucs = [s.auc for s in rep.slices_for("sex")]
    d = rep.disparities[0]
    assert d.equal_opportunity_difference == pytest.approx(max(tprs) - min(tprs))
    assert d.auc_gap == pytest.approx(max(aucs) - min(aucs))
    assert rep.figures()["equal_opportunity_difference[sex]"] == d.equal_opportunity_difference


def test_small_slice_is_reported_but_not_judged():
    n = 400
    rng = np.random.default_rng(0)
    race = np.array(["A"] * 194 + ["B"] * 196 + ["tiny"] * 10)
    y = rng.integers(0, 2, n)
    pred = rng.integers(0, 2, n)
    pred[race == "tiny"] = 1  # selection rate 1.0 in the tiny slice: must not count
    rep = slice_report(y, rng.random(n), pred, pd.DataFrame({"race": race}), min_slice_size=30)
    tiny = next(s for s in rep.slices if s.value == "tiny")
    assert tiny.size == 10 and tiny.judged is False
    assert tiny.judging == "skipped: 10 rows < 30"
    assert tiny.selection_rate == 1.0
    d = rep.disparities[0]
    assert d.excluded_slices == ("tiny",) and d.judged_slices == ("A", "B")
    judged = [s.selection_rate for s in rep.slices if s.judged]
    assert d.demographic_parity_difference == pytest.approx(max(judged) - min(judged))
    assert d.demographic_parity_difference < 0.5


def test_only_one_judged_slice_gives_no_disparity_and_a_reason():
    rep = slice_report([0, 1] * 20, [0.2, 0.8] * 20, [0, 1] * 20,
                       pd.DataFrame({"g": ["a"] * 38 + ["b"] * 2}), min_slice_size=30)
    d = rep.disparities[0]
    assert d.demographic_parity_difference is None
    assert "fewer than two judged slices" in d.notes["demographic_parity_difference"]
    assert rep.figures()["max_abs_dp_difference"] is None
    assert evaluate_gates([DP_GATE], rep.figures()).passed is False


def test_banded_age_and_missing_values_become_slices(eval_data):
    rep = _report(eval_data, columns=["age"], bands={"age": [30, 50, 65]})
    values = [s.value for s in rep.slices_for("age")]
    assert values == ["<30", "30-49", "50-64", ">=65", "(missing)"]
    missing = rep.slices_for("age")[-1]
    assert missing.size == 5 and not missing.judged


def test_report_serialises_to_json_and_back(eval_data):
    rep = _report(eval_data, bands={"age": [30, 50, 65]})
    text = json.dumps(rep.to_dict())
    back = BiasReport.from_dict(json.loads(text))
    assert back == rep
    assert json.loads(text)["figures"]["demographic_parity_difference[race]"] is not None


def test_unknown_helper_column_is_named_with_a_suggestion(eval_data):
    with pytest.raises(InvalidArgumentError, match="'gender'.*Available helper columns"):
        _report(eval_data, columns=["gender"])
    with pytest.raises(InvalidArgumentError, match="Did you mean 'race'"):
        _report(eval_data, columns=["rase"])


def test_disparate_impact_equalized_odds_and_their_intervals(biased_data):
    from validation.bias import slice_report
    from validation.gates import evaluate_gates, failing_gates

    d = biased_data
    pred = (d.score >= 0.5).astype(int)
    report = slice_report(d.y, d.score, pred, d.helpers[["sex"]], n_resamples=60, seed=1)
    sex = report.disparities[0]
    f, m = report.slices_for("sex")
    assert sex.disparate_impact_ratio == pytest.approx(f.selection_rate / m.selection_rate)
    assert sex.disparate_impact_ratio < 0.8
    tpr_gap, fpr_gap = abs(f.tpr - m.tpr), abs(f.fpr - m.fpr)
    assert sex.equalized_odds_difference == pytest.approx(max(tpr_gap, fpr_gap))
    lo, hi = sex.intervals["disparate_impact_ratio"]
    assert lo < sex.disparate_impact_ratio < hi
    lo, hi = f.intervals["selection_rate"]
    assert lo < f.selection_rate < hi and hi - lo < 0.1
    figures = report.figures()
    gates = evaluate_gates(["disparate_impact_ratio >= 0.8"], figures).to_dict()
    [line] = failing_gates(gates)
    assert line.startswith("disparate_impact_ratio >= 0.8 (value 0.") and "required >= 0.8" in line


def test_slices_with_too_few_positives_are_shown_not_judged(eval_data):
    import pandas as pd

    from validation.bias import slice_report

    d = eval_data
    group = pd.Series(["big"] * len(d.y))
    rare = np.flatnonzero(d.y == 0)[:200]  # 200 rows, all negative but 5
    group.iloc[rare] = "rare"
    group.iloc[np.flatnonzero(d.y == 1)[:5]] = "rare"
    helpers = pd.DataFrame({"group": group})
    report = slice_report(d.y, d.score, (d.score >= 0.5).astype(int), helpers,
                          min_positives=10, min_negatives=10, n_resamples=20)
    rare_slice = next(s for s in report.slices if s.value == "rare")
    assert rare_slice.size == 205 and not rare_slice.judged
    assert rare_slice.judging == "skipped: 5 positives < 10"
    assert report.disparities[0].excluded_slices == ("rare",)
    assert report.disparities[0].equal_opportunity_difference is None  # one judged slice


def test_intersectional_slices(eval_data):
    from validation.bias import slice_report

    d = eval_data
    report = slice_report(d.y, d.score, (d.score >= 0.5).astype(int), d.helpers[["sex", "race"]],
                          intersections=[("sex", "race")], n_resamples=20)
    assert report.columns == ["sex", "race", "sex×race"]
    values = [s.value for s in report.slices_for("sex×race")]
    assert values[:4] == ["F × A", "F × B", "F × C", "F × D"]
    assert sum(s.size for s in report.slices_for("sex×race")) == len(d.y)
    assert "demographic_parity_difference[sex×race]" in report.figures()


def test_small_slices_get_exact_intervals_not_a_degenerate_bootstrap():
    """A slice with 3 positives, none predicted: TPR 0 with the Clopper–Pearson interval
    [0, 0.708], not the bootstrap's [0, 0]."""
    n = 300
    g = np.array(["big"] * 260 + ["small"] * 40)
    y = np.zeros(n, dtype=int)
    y[:130] = 1
    y[260:263] = 1  # 3 positives in the small slice
    pred = y.copy()
    pred[260:263] = 0
    rep = slice_report(y, np.where(pred == 1, 0.9, 0.1), pred, pd.DataFrame({"g": g}),
                       min_slice_size=30, min_positives=10, min_negatives=10, n_resamples=20)
    small = next(s for s in rep.slices if s.value == "small")
    assert small.tpr == 0.0 and small.judging == "skipped: 3 positives < 10"
    assert small.intervals["tpr"] == pytest.approx([0.0, 0.7076], abs=1e-4)
    assert small.intervals["fpr"] == pytest.approx([0.0, 0.0949], abs=1e-4)  # 0 of 37


def _by_hand(y, pred, groups):
    """Disparities over every group as Fairlearn's MetricFrame counts them (pandas groupby)."""
    frame = pd.DataFrame({"y": y, "p": pred, "g": groups})
    sel = frame.groupby("g")["p"].mean()
    tpr = frame[frame.y == 1].groupby("g")["p"].mean()
    fpr = frame[frame.y == 0].groupby("g")["p"].mean()
    return {"demographic_parity_difference": sel.max() - sel.min(),
            "disparate_impact_ratio": sel.min() / sel.max(),
            "equalized_odds_difference": max(tpr.max() - tpr.min(), fpr.max() - fpr.min())}


def test_disparities_over_all_groups_count_the_slices_left_out_of_judging(eval_data):
    """The tiny race D slice is not judged but all-groups figures count it, as Fairlearn's
    demographic_parity_difference does over sex×race; the judged figures leave it out."""
    d = eval_data
    pred = (d.score >= 0.5).astype(int)
    pred[-12:] = 1  # race D: all selected, its disparity hidden from the judged slices
    y = d.y.copy()
    y[-12:-6] = 1  # both classes in D, so its TPR and FPR are defined
    rep = slice_report(y, d.score, pred, d.helpers[["sex", "race"]], min_slice_size=30,
                       intersections=[("sex", "race")], n_resamples=40, seed=2)
    inter = next(x for x in rep.disparities if x.column == "sex×race")
    combo = (d.helpers["sex"] + " × " + d.helpers["race"]).to_numpy()
    every = _by_hand(y, pred, combo)
    judged = np.isin(combo, inter.judged_slices)
    some = _by_hand(y[judged], pred[judged], combo[judged])
    for fig, value in every.items():
        assert inter.all_groups[fig] == pytest.approx(value)
        assert getattr(inter, fig) == pytest.approx(some[fig])
    assert inter.all_groups["demographic_parity_difference"] > (
        inter.demographic_parity_difference + 0.3)
    assert inter.all_groups_extremes["demographic_parity_difference"][0].endswith("× D")
    figures = rep.figures()
    assert figures["demographic_parity_difference_all_groups[sex×race]"] == pytest.approx(
        every["demographic_parity_difference"])
    gate = evaluate_gates(["demographic_parity_difference_all_groups <= 0.5",
                           "max_abs_dp_difference <= 0.5"], figures).results
    assert [g.passed for g in gate] == [False, True]
    lo, hi = inter.intervals["auc_gap"]  # the AUC gap has an interval now
    assert lo <= inter.auc_gap <= hi
    lo, hi = inter.all_groups_intervals["demographic_parity_difference"]
    assert lo <= inter.all_groups["demographic_parity_difference"] <= hi
