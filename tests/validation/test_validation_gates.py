"""Acceptance gates: strict parsing, evaluation, skipped vs failed."""

from __future__ import annotations

import pytest

from fstrain.kernel.errors import ConfigError
from validation.gates import GateReport, evaluate_gates, parse_gate, parse_gates

METRICS = {"roc_auc": 0.88, "f1": 0.61, "brier": 0.12, "max_abs_dp_difference": 0.05,
           "demographic_parity_difference[sex]": 0.05, "equal_opportunity_difference": 0.25,
           "pr_auc": None, "undefined": {"pr_auc": "the evaluation set has no positive rows"}}


def test_parse_threshold_and_relative_gates():
    g = parse_gate("roc_auc >= 0.85")
    assert (g.kind, g.metric, g.op, g.threshold) == ("threshold", "roc_auc", ">=", 0.85)
    assert parse_gate("  brier<0.2 ").op == "<"
    assert parse_gate("demographic_parity_difference[sex] <= 0.1").metric == \
        "demographic_parity_difference[sex]"
    assert parse_gate("better_than_baseline").kind == "baseline"
    assert parse_gate("better_than_baseline(pr_auc)").metric == "pr_auc"
    prev = parse_gate("better_than_previous(roc_auc, tolerance=0.01)")
    assert (prev.kind, prev.metric, prev.tolerance) == ("previous", "roc_auc", 0.01)
    assert parse_gate("roc_auc >= 1e-1").threshold == 0.1


def test_unknown_metric_names_the_gate_suggests_and_lists():
    with pytest.raises(ConfigError) as exc:
        parse_gate("roc_aux >= 0.85")
    msg = str(exc.value)
    assert "Gate 'roc_aux >= 0.85'" in msg and "unknown metric 'roc_aux'" in msg
    assert "Did you mean 'roc_auc'?" in msg and "Known metrics:" in msg and "pr_auc" in msg


@pytest.mark.parametrize("spec, pattern", [
    ("roc_auc >= high", "not understood"),
    ("roc_auc == 0.9", "operator '==' is not allowed"),
    ("roc_auc[sex] >= 0.9", "only bias figures"),
    ("better_than_baselin", "Did you mean 'better_than_baseline'"),
    ("better_than_previous(roc_auc, margin=0.1)", "unknown argument 'margin'"),
    ("better_than_previous(roc_auc, tolerance=-1)", "tolerance must be >= 0"),
    ("better_than_baseline(max_abs_dp_difference)", "no better/worse direction"),
    ("", "non-empty string"),
])
def test_malformed_gates_fail_with_clear_errors(spec, pattern):
    with pytest.raises(ConfigError, match=pattern):
        parse_gate(spec)


def test_parse_gates_rejects_duplicates_and_a_bare_string():
    with pytest.raises(ConfigError, match="listed twice"):
        parse_gates(["f1 >= 0.5", "f1 >= 0.5"])
    with pytest.raises(ConfigError, match="list of strings"):
        parse_gates("f1 >= 0.5")


def test_threshold_gates_pass_and_fail():
    rep = evaluate_gates(["roc_auc >= 0.85", "f1 >= 0.7", "max_abs_dp_difference <= 0.1",
                          "equal_opportunity_difference <= 0.2",
                          "demographic_parity_difference[sex] <= 0.1"], METRICS)
    by = {r.name: r for r in rep.results}
    assert by["roc_auc >= 0.85"].passed and by["roc_auc >= 0.85"].value == 0.88
    assert by["f1 >= 0.7"].passed is False and "violates" in by["f1 >= 0.7"].detail
    assert by["max_abs_dp_difference <= 0.1"].passed
    assert by["equal_opportunity_difference <= 0.2"].passed is False
    assert by["demographic_parity_difference[sex] <= 0.1"].passed
    assert rep.passed is False and rep.status == "failed"


def test_undefined_or_missing_metric_fails_with_its_reason():
    rep = evaluate_gates(["pr_auc >= 0.5", "auc_gap <= 0.1"], METRICS)
    a, b = rep.results
    assert a.passed is False and "no positive rows" in a.detail
    assert b.passed is False and "not computed" in b.detail


def test_better_than_previous_is_skipped_without_a_previous_version():
    rep = evaluate_gates(["roc_auc >= 0.85", "better_than_previous"], METRICS, previous=None)
    skipped = rep.results[1]
    assert skipped.passed is None and skipped.status == "skipped" and "skipped" in skipped.detail
    assert rep.passed is True and rep.status == "passed"
    only_skipped = evaluate_gates(["better_than_previous"], METRICS)
    assert only_skipped.status == "no gates"


def test_better_than_previous_with_tolerance_and_direction():
    worse = evaluate_gates(["better_than_previous"], METRICS, previous={"roc_auc": 0.9},
                           previous_label="version 2")
    assert worse.results[0].passed is False and "version 2" in worse.results[0].detail
    tol = evaluate_gates(["better_than_previous(roc_auc, tolerance=0.03)"], METRICS,
                         previous={"roc_auc": 0.9})
    assert tol.results[0].passed is True and tol.results[0].threshold == pytest.approx(0.87)
    lower = evaluate_gates(["better_than_previous(brier)"], METRICS, previous={"brier": 0.1})
    assert lower.results[0].passed is False  # brier 0.12 is worse than 0.10


def test_better_than_baseline_is_strict_and_uses_the_primary_metric():
    rep = evaluate_gates(["better_than_baseline", "better_than_baseline(f1)"], METRICS,
                         baseline={"roc_auc": 0.5, "f1": 0.61})
    assert rep.results[0].passed is True and rep.results[0].threshold == 0.5
    assert rep.results[1].passed is False  # equal is not better
    missing = evaluate_gates(["better_than_baseline"], METRICS, baseline=None)
    assert missing.results[0].passed is False


def test_report_round_trips_through_dict():
    rep = evaluate_gates(["roc_auc >= 0.85", "better_than_previous"], METRICS)
    d = rep.to_dict()
    assert [r["status"] for r in d["results"]] == ["passed", "skipped"]
    assert GateReport.from_dict(d) == rep
