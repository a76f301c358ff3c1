"""Model cards: generated sections, TODO markers, YAML overrides and their merge rule."""

from __future__ import annotations

import pytest

from fstrain.kernel.errors import ConfigError
from validation.model_card import SECTIONS, TODO, build_model_card, load_overrides

MANIFEST = {
    "framework": "xgboost",
    "model_type": "XGBClassifier (gradient-boosted trees)",
    "files": {"model.ubj": "sha256:..."},
    "signature": "amount: float, age_days: float, n_tx_24h: float, noise: float -> is_fraud",
    "features": ["amount", "age_days", "n_tx_24h", "noise"],
    "requirements": ["xgboost-cpu==3.2.0"],
}


def test_sections_follow_the_template_and_are_filled_where_known(full_scorecard):
    card = build_model_card(full_scorecard["card"], MANIFEST, card_date="2026-01-31")
    assert [s.key for s in card.sections] == list(SECTIONS)
    perf = card.section("performance")
    assert perf.complete and perf.source == "generated"
    assert any(f.startswith("roc_auc (test split): ") and "95% CI" in f for f in perf.facts)
    assert any("max_abs_dp_difference <= 0.15 → passed" in f for f in perf.facts)
    bias = card.section("bias_evaluation")
    assert bias.complete and any(f.startswith("sex: demographic parity difference")
                                 for f in bias.facts)
    assert card.section("model_details").complete  # architecture known from the manifest
    assert any("Feature group transactions:1" in f
               for f in card.section("feature_view_and_training_data").facts)
    assert any("race=D (12 rows)" in f for f in card.section("limitations").facts)
    for key in ("intended_use", "monitoring", "references"):
        s = card.section(key)
        assert s.todo and s.source == "todo" and not s.complete
    assert 0 < card.completeness < 1
    md = card.to_markdown()
    assert md.count(f"**{TODO}:**") == sum(1 for s in card.sections if s.todo)
    assert "- **Date:** 2026-01-31" in md


def test_yaml_overrides_replace_or_append(tmp_path, full_scorecard):
    path = tmp_path / "model_card.yaml"
    path.write_text(
        "intended_use: |\n  Flag card transactions for manual review. Not for credit decisions.\n"
        "performance: Owner-written performance summary.\n"
        "limitations:\n  append: Trained on 2023 data only; seasonal drift expected.\n",
        encoding="utf-8",
    )
    overrides = load_overrides(path)
    card = build_model_card(full_scorecard["card"], MANIFEST, overrides)
    iu = card.section("intended_use")
    assert iu.source == "owner" and iu.complete and "manual review" in iu.owner_text
    perf = card.section("performance")
    assert perf.facts == () and perf.owner_text == "Owner-written performance summary."
    lim = card.section("limitations")
    assert lim.source == "generated+owner" and lim.complete
    assert lim.facts and "seasonal drift" in lim.owner_text
    html = card.to_html()
    assert "Not for credit decisions." in html and 'data-source="generated+owner"' in html
    # raw mappings (as read from YAML elsewhere) are accepted too
    raw = build_model_card(full_scorecard["card"], MANIFEST, {"monitoring": "Weekly drift."})
    assert raw.section("monitoring").owner_text == "Weekly drift."


def test_unknown_section_is_rejected_with_a_suggestion(tmp_path, full_scorecard):
    path = tmp_path / "model_card.yaml"
    path.write_text("intended_usage: something\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_overrides(path)
    msg = str(exc.value)
    assert "unknown model-card section 'intended_usage'" in msg
    assert "Did you mean 'intended_use'?" in msg and "Known sections:" in msg
    with pytest.raises(ConfigError, match="'monitoring' has empty text"):
        build_model_card(full_scorecard["card"], None, {"monitoring": "  "})
    with pytest.raises(ConfigError, match=r"must be text, \{replace: text\} or \{append: text\}"):
        build_model_card(full_scorecard["card"], None, {"monitoring": {"prepend": "x"}})


def test_missing_file_and_bad_yaml(tmp_path):
    assert load_overrides(tmp_path / "absent.yaml") == {}
    with pytest.raises(ConfigError, match="does not exist"):
        load_overrides(tmp_path / "absent.yaml", missing_ok=False)
    bad = tmp_path / "model_card.yaml"
    bad.write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must map section keys to text"):
        load_overrides(bad)


def test_html_escapes_owner_text_and_has_no_script(full_scorecard):
    card = build_model_card(full_scorecard["card"], {}, {"references": "<script>x</script>"})
    page = card.to_html()
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "Model card: fraud &lt;model&gt; v3" in page
    assert card.section("model_details").todo  # no architecture without a manifest


def test_helper_columns_are_checked_against_the_model_inputs(full_scorecard):
    ok = build_model_card(full_scorecard["card"], MANIFEST).section("responsible_ai")
    assert any("None of these columns is among the model's input features" in f
               for f in ok.facts)
    leaky = build_model_card(full_scorecard["card"], {**MANIFEST,
                                                      "features": ["amount", "sex"]})
    assert any(f.startswith("WARNING: sex") for f in leaky.section("responsible_ai").facts)
    unknown = build_model_card(full_scorecard["card"], {}).section("responsible_ai")
    assert any("could not be checked" in f for f in unknown.facts)
