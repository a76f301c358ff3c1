"""Model cards: generated findings, owner texts beside them (labelled, signed, never in their
place), contradictions flagged, completeness over what a reviewer needs from the owner."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import ConfigError
from validation.model_card import SECTIONS, TODO, build_model_card, load_owner_file

MANIFEST = {
    "framework": "xgboost",
    "model_type": "XGBClassifier (gradient-boosted trees)",
    "files": {"model.ubj": "sha256:..."},
    "signature": "amount: float, age_days: float, n_tx_24h: float, noise: float -> is_fraud",
    "features": ["amount", "age_days", "n_tx_24h", "noise"],
    "requirements": ["xgboost-cpu==3.2.0"],
}
#: Every owner item a reviewer needs.
COMPLETE = {
    "intended_use": "Flag card transactions for manual review.",
    "out_of_scope_uses": "Credit decisions.",
    "users": "The fraud operations team.",
    "limitations": "Trained on 2023 data only.",
    "data_provenance": {"source": "Card processor exports", "period": "2023-01 to 2023-12",
                        "licence": "Internal, customer terms §4"},
    "owner": "Fraud analytics",
    "contact": "fraud-models@example.com",
}


@pytest.fixture(scope="module")
def failed_fairness(full_scorecard):
    """The full scorecard judged by a fairness gate it fails."""
    from validation.gates import evaluate_gates
    from validation.scorecard import Scorecard

    card = Scorecard.from_dict(full_scorecard["card"].to_dict())
    card.gates = evaluate_gates(["roc_auc >= 0.5", "max_abs_dp_difference <= 0.001"],
                                card.gate_metrics()).to_dict()
    assert card.status == "failed"
    return card


def test_sections_follow_the_template_and_are_filled_where_known(full_scorecard):
    card = build_model_card(full_scorecard["card"], MANIFEST, card_date="2026-01-31")
    assert [s.key for s in card.sections] == list(SECTIONS)
    perf = card.section("performance")
    assert perf.complete and perf.source == "generated"
    assert any(f.startswith("roc_auc (test split): ") and "95% CI" in f for f in perf.facts)
    assert any("max_abs_dp_difference <= 0.15 → passed" in f for f in perf.facts)
    bias = card.section("bias_evaluation")
    assert any(f.startswith("sex: demographic parity difference") and "over all groups" in f
               for f in bias.facts)
    assert any("Feature group transactions:1" in f
               for f in card.section("feature_view_and_training_data").facts)
    assert any("race=D (12 rows; skipped: 12 rows < 30" in f
               for f in card.section("limitations").facts)
    assert card.completeness == 0 and card.missing[:3] == ["Intended use", "Out-of-scope uses",
                                                           "Users"]
    md = card.to_markdown()
    assert md.count(f"**{TODO}:**") == sum(1 for s in card.sections if s.todo)
    assert "- **Date:** 2026-01-31" in md and "0 of 9 owner items a reviewer needs" in md


def test_whitewashing_owner_text_is_shown_beside_the_findings_and_flagged(failed_fairness):
    """The attack: an owner file saying "No bias concerns." on a model that failed a fairness
    gate. The findings stay, the text is labelled as the owner's, the card flags the
    contradiction, and completeness does not move."""
    plain = build_model_card(failed_fairness, MANIFEST)
    washed = build_model_card(failed_fairness, MANIFEST, {"bias_evaluation": "No bias concerns."})
    bias = washed.section("bias_evaluation")
    assert bias.facts == plain.section("bias_evaluation").facts and bias.facts
    assert any("Failed fairness gates: max_abs_dp_difference <= 0.001" in f for f in bias.facts)
    assert bias.owner_text == "No bias concerns." and bias.source == "generated+owner"
    assert bias.flags and "fairness gate(s) failed" in bias.flags[0]
    assert washed.contradictions and washed.completeness == plain.completeness
    md, html = washed.to_markdown(), washed.to_html()
    assert "Written by the owner (texts passed in Python); signed by: unsigned" in md
    assert "CONTRADICTION" in md and "No bias concerns." in md
    assert 'id="contradictions"' in html and 'class="owner"' in html
    assert 'data-owner-key="bias_evaluation"' in html
    signed = build_model_card(failed_fairness, MANIFEST, {"limitations": "Unbiased."},
                              signed_by="alice (validator, SHA256:abc)")
    assert "signed by: alice (validator, SHA256:abc)" in signed.to_markdown()
    assert signed.section("limitations").flags  # flagged wherever the owner writes it


def test_completeness_counts_only_what_a_reviewer_needs(tmp_path, full_scorecard):
    import yaml

    path = tmp_path / "model_card.yaml"
    path.write_text(yaml.safe_dump({**COMPLETE, "performance": "Good enough."}),
                    encoding="utf-8")
    owner = load_owner_file(path)
    card = build_model_card(full_scorecard["card"], MANIFEST, owner)
    assert card.completeness == 1 and not card.missing and not card.contradictions
    assert card.section("performance").facts and card.section("performance").owner_text
    prov = card.section("data_provenance")
    assert [o.key for o in prov.owner] == ["data_provenance.source", "data_provenance.period",
                                           "data_provenance.licence"] and prov.facts
    assert str(path) in card.owner_source and owner.sha256[:12] in card.owner_source
    partial = build_model_card(full_scorecard["card"], MANIFEST,
                               {k: v for k, v in COMPLETE.items() if k != "data_provenance"})
    assert partial.missing == ["Data source", "Data collection period",
                               "Data licence or consent"]
    assert partial.completeness == pytest.approx(6 / 9)


def test_owner_file_keys_are_checked_with_suggestions(tmp_path, full_scorecard):
    path = tmp_path / "model_card.yaml"
    path.write_text("intended_usage: something\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_owner_file(path)
    msg = str(exc.value)
    assert "unknown model-card section 'intended_usage'" in msg
    assert "Did you mean 'intended_use'?" in msg and "Known sections:" in msg
    path.write_text("data_provenance:\n  license: CC-BY\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown data_provenance key 'license'. Did you mean "
                                          "'licence'?"):
        load_owner_file(path)
    with pytest.raises(ConfigError, match="never replaces the generated findings"):
        build_model_card(full_scorecard["card"], None, {"bias_evaluation": {"replace": "x"}})
    with pytest.raises(ConfigError, match="'monitoring' has empty text"):
        build_model_card(full_scorecard["card"], None, {"monitoring": "  "})
    appended = build_model_card(full_scorecard["card"], None,
                                {"limitations": {"append": "Seasonal drift."}})
    assert appended.section("limitations").owner_text == "Seasonal drift."
    assert load_owner_file(tmp_path / "absent.yaml").texts == {}
    with pytest.raises(ConfigError, match="does not exist"):
        load_owner_file(tmp_path / "absent.yaml", missing_ok=False)
    path.write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must map section keys to text"):
        load_owner_file(path)


def test_skipped_slices_are_worded_with_their_real_reason(eval_data):
    """A 205-row slice skipped for 5 positives must not read "too small (< 30 rows)"."""
    from validation.bias import slice_report
    from validation.scorecard import Scorecard

    d = eval_data
    group = pd.Series(["big"] * len(d.y))
    group.iloc[np.flatnonzero(d.y == 0)[:200]] = "rare"
    group.iloc[np.flatnonzero(d.y == 1)[:5]] = "rare"
    bias = slice_report(d.y, d.score, (d.score >= 0.5).astype(int),
                        pd.DataFrame({"group": group}), min_slice_size=30, min_positives=10,
                        min_negatives=10, n_resamples=10)
    card = build_model_card(Scorecard("m", 1, bias=bias.to_dict()), {})
    [line] = [f for f in card.section("limitations").facts if f.startswith("Slices not judged")]
    assert "group=rare (205 rows; skipped: 5 positives < 10)" in line
    assert "< 30 rows" not in line.split(":", 1)[1].split("(minimums")[0]


def test_html_escapes_owner_text_and_has_no_script(full_scorecard):
    card = build_model_card(full_scorecard["card"], {}, {"references": "<script>x</script>"})
    page = card.to_html()
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "Model card: fraud &lt;model&gt; v3" in page


def test_helper_columns_are_checked_against_the_model_inputs(full_scorecard):
    ok = build_model_card(full_scorecard["card"], MANIFEST).section("responsible_ai")
    assert any("None of these columns is among the model's input features" in f
               for f in ok.facts)
    leaky = build_model_card(full_scorecard["card"], {**MANIFEST,
                                                      "features": ["amount", "sex"]})
    assert any(f.startswith("WARNING: sex") for f in leaky.section("responsible_ai").facts)
    unknown = build_model_card(full_scorecard["card"], {}).section("responsible_ai")
    assert any("could not be checked" in f for f in unknown.facts)
