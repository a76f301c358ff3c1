"""Gate policies: tightening vs loosening decided on parsed gates, the run's plan, statuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fstrain.kernel.errors import ConfigError
from model_registry import statuses
from validation.gates import evaluate_gates, parse_gate
from validation.policy import (
    GatePolicy,
    PolicyDocument,
    compare_gates,
    implies,
    parse_policy_document,
    plan_gates,
    use_case_policy,
)
from validation.scorecard import Scorecard, badge

ADULT = ("roc_auc >= 0.85", "better_than_baseline", "max_abs_dp_difference <= 0.25",
         "disparate_impact_ratio[sex] >= 0.8")


def _imp(a: str, b: str) -> bool:
    return implies(parse_gate(a), parse_gate(b))


@pytest.mark.parametrize(("stricter", "looser"), [
    ("roc_auc >= 0.9", "roc_auc >= 0.85"),
    ("roc_auc > 0.85", "roc_auc >= 0.85"),
    ("demographic_parity_difference[sex] <= 0.1", "demographic_parity_difference[sex] <= 0.25"),
    ("max_abs_dp_difference <= 0.1", "demographic_parity_difference <= 0.25"),  # one figure
    ("disparate_impact_ratio[sex] >= 0.9", "disparate_impact_ratio[sex] >= 0.8"),
    ("rmse < 3", "rmse <= 3"),
    ("better_than_previous(roc_auc)", "better_than_previous(roc_auc, tolerance=0.01)"),
])
def test_a_stricter_gate_implies_the_looser_one_and_not_back(stricter, looser):
    assert _imp(stricter, looser) and not _imp(looser, stricter)


@pytest.mark.parametrize(("a", "b"), [
    ("roc_auc >= 0.9", "pr_auc >= 0.5"),  # another metric
    ("roc_auc >= 0.9", "roc_auc <= 0.99"),  # another bound
    ("demographic_parity_difference[sex] <= 0.1", "demographic_parity_difference[race] <= 0.1"),
    ("demographic_parity_difference <= 0.1", "demographic_parity_difference[sex] <= 0.1"),
    ("better_than_baseline(log_loss)", "better_than_baseline(brier)"),
    ("better_than_baseline", "explanation_available"),
])
def test_gates_on_different_rules_never_imply_each_other(a, b):
    assert not _imp(a, b) and not _imp(b, a)


def test_the_attack_is_a_deviation_naming_every_change():
    plan = plan_gates(use_case_policy(ADULT), ["roc_auc >= 0.5"], task="binary", replace=True)
    assert plan.deviation and plan.replaced
    lines = [c.line() for c in plan.deviations]
    assert "roc_auc >= 0.85 → roc_auc >= 0.5 (loosened)" in lines
    assert "max_abs_dp_difference <= 0.25 (removed)" in lines
    assert "better_than_baseline(log_loss) (removed)" in lines  # the standard gates too
    assert [g.gate for g in plan.gates] == ["roc_auc >= 0.5"]
    assert plan.status("passed") == "passed (policy deviation)"
    assert plan.warning().startswith("POLICY DEVIATION from the use-case default (sha256 ")


def test_gate_tightens_an_existing_gate_in_place_or_adds_one():
    policy = use_case_policy(ADULT)
    plan = plan_gates(policy, ["roc_auc >= 0.9", "demographic_parity_difference[sex] <= 0.1"],
                      task="binary")
    assert not plan.deviation and plan.status("passed") == "passed"
    names = [g.gate for g in plan.gates]
    assert "roc_auc >= 0.85" not in names and names[0] == "roc_auc >= 0.9"
    assert {(c.kind, c.before, c.after) for c in plan.changes} == {
        ("tightened", "roc_auc >= 0.85", "roc_auc >= 0.9"),
        ("added", None, "demographic_parity_difference[sex] <= 0.1")}
    sources = {g.gate: g.source for g in plan.gates}
    assert sources["roc_auc >= 0.9"] == "command line"
    assert sources["better_than_baseline(log_loss)"] == "fstrain standard"


def test_a_looser_extra_gate_replaces_its_policy_gate_and_deviates():
    plan = plan_gates(use_case_policy(ADULT), ["max_abs_dp_difference <= 0.4"], task="binary")
    assert [c.line() for c in plan.deviations] == [
        "max_abs_dp_difference <= 0.25 → max_abs_dp_difference <= 0.4 (loosened)"]
    assert "max_abs_dp_difference <= 0.25" not in [g.gate for g in plan.gates]


def test_another_threshold_strategy_deviates_and_the_same_one_does_not():
    policy = use_case_policy(ADULT)
    assert not plan_gates(policy, None, task="binary", threshold_strategy="f1").deviation
    assert not plan_gates(policy, None, task="binary").deviation
    plan = plan_gates(policy, None, task="binary", threshold_strategy="0.3")
    assert plan.threshold_strategy == 0.3
    assert [c.line() for c in plan.deviations] == ["f1 → 0.3 (threshold strategy)"]


def test_replacing_with_stricter_gates_is_still_a_deviation():
    policy = use_case_policy(("roc_auc >= 0.85",))
    plan = plan_gates(policy, ["roc_auc >= 0.9", "explanation_available"], task="regression",
                      replace=True)
    assert plan.deviation
    assert [c.kind for c in plan.deviations] == ["replaced defaults"]


def test_unknown_metrics_and_bad_gates_are_refused():
    with pytest.raises(ConfigError, match="unknown metric 'roc_aucc'.*roc_auc"):
        plan_gates(use_case_policy(ADULT), ["roc_aucc >= 0.9"], task="binary")
    with pytest.raises(ConfigError, match="at least one gate"):
        plan_gates(use_case_policy(ADULT), None, task="binary", replace=True)


def test_policy_files_are_read_strictly():
    doc = parse_policy_document(b"gates:\n  - roc_auc >= 0.9\nstandard_gates: false\n"
                                b"threshold_strategy: youden\ndescription: bank policy 7\n")
    assert doc == PolicyDocument(("roc_auc >= 0.9",), False, "youden", "bank policy 7")
    assert doc.sha256() == parse_policy_document("gates: ['roc_auc>=0.9']\nstandard_gates: "
                                                 "false\nthreshold_strategy: youden\n").sha256()
    for text, match in [("gates: []", "non-empty list"), ("[1]", "mapping"),
                        ("gates: ['roc_auc >= 0.9']\ngate: x", "unknown key 'gate'"),
                        ("gates: ['auc_roc >= 0.9']", "unknown metric"),
                        ("gates: ['roc_auc >= 0.9']\nthreshold_strategy: best", "'f1', 'youden'"),
                        ("gates: [a: b", "not valid YAML")]:
        with pytest.raises(ConfigError, match=match):
            parse_policy_document(text)
    policy = GatePolicy(doc, "policy file", 2)
    assert policy.label == "policy file v2"
    assert [g.gate for g in policy.gate_specs("binary")] == ["roc_auc >= 0.9"]
    assert policy.summary().endswith(", unsigned")


def test_statuses_carry_the_deviation_and_the_override():
    assert statuses.run_status("passed", deviation=True) == "passed (policy deviation)"
    assert not statuses.is_clean_pass("passed (policy deviation)")
    assert statuses.passed_gates("passed (policy deviation)")
    assert statuses.approval_word({"kind": "approval", "override_reason": "x"}) == \
        "approved (override)"
    assert statuses.approval_word({"kind": "approval", "override_reason": None}) == "approved"
    assert badge("passed (policy deviation)") == (
        '<span class="badge passed-policy-deviation">PASSED (POLICY DEVIATION)</span>')


def test_the_scorecard_header_shows_the_deviation_in_the_status():
    plan = plan_gates(use_case_policy(("roc_auc >= 0.85",)), ["roc_auc >= 0.5"],
                      task="regression", replace=True)
    report = evaluate_gates([g.gate for g in plan.gates], {"roc_auc": 0.7})
    card = Scorecard("m", 1, gates=report.to_dict(), policy=plan.to_record())
    assert card.status == "passed (policy deviation)"
    html = card.to_html()
    header = html[html.index("<header>"):html.index("</header>")]
    assert "PASSED (POLICY DEVIATION)" in header and 'id="policy-deviation"' in header
    assert "roc_auc &gt;= 0.85 → roc_auc &gt;= 0.5 (loosened)" in header
    assert "but only under a POLICY DEVIATION" in header
    assert "**Status: PASSED (POLICY DEVIATION)**" in card.to_markdown()
    assert Scorecard.from_dict(card.to_dict()).status == "passed (policy deviation)"


# ------------------------------------------------------------------------- properties

_METRICS = ("roc_auc", "rmse", "demographic_parity_difference[sex]",
            "disparate_impact_ratio[sex]")
_values = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.8, 0.85, 0.9, 1.0])


@st.composite
def _gates(draw):
    metric = draw(st.sampled_from(_METRICS))
    op = draw(st.sampled_from((">=", ">", "<=", "<")))
    return f"{metric} {op} {draw(_values)}"


def _passes(gates, metrics) -> bool:
    return evaluate_gates(list(gates), metrics).passed


@given(_gates(), _gates(), st.fixed_dictionaries({m: _values for m in _METRICS}))
def test_implies_means_every_model_passing_one_passes_the_other(a, b, metrics):
    if _imp(a, b) and _passes([a], metrics):
        assert _passes([b], metrics)


@given(st.lists(_gates(), min_size=1, max_size=4, unique=True),
       st.lists(_gates(), max_size=4, unique=True), st.booleans(),
       st.fixed_dictionaries({m: _values for m in _METRICS}))
def test_a_run_without_deviation_admits_no_model_its_policy_rejects(policy, extra, replace,
                                                                    metrics):
    document = PolicyDocument(tuple(dict.fromkeys(parse_gate(g).name for g in policy)), False)
    try:
        plan = plan_gates(GatePolicy(document, "policy file", 1), extra, task="regression",
                          replace=replace)
    except ConfigError:  # e.g. replace without gates, or a gate listed twice
        return
    if not plan.deviation and _passes([g.gate for g in plan.gates], metrics):
        assert _passes(document.gates, metrics)
    if plan.deviation:
        assert plan.status("passed") != "passed"


@given(st.lists(_gates(), min_size=1, max_size=4, unique=True))
def test_a_policy_compared_with_itself_has_no_change(gates):
    names = list(dict.fromkeys(parse_gate(g).name for g in gates))
    assert compare_gates(names, names) == []
