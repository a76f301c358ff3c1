"""Report-site index and scorecard diffs."""

from __future__ import annotations

import copy
from html.parser import HTMLParser

import pytest

from fstrain.kernel.errors import InvalidArgumentError
from validation.report_site import diff_scorecards, diff_to_markdown, render_index


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, str]] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and a.get("class") == "version-row":
            self.rows.append((a["data-model"], a["data-version"]))
        if tag == "a":
            self.links.append(a["href"])


def _models(card_dict):
    v2 = copy.deepcopy(card_dict)
    v2["model_version"] = 10
    return [
        card_dict,
        v2,
        {"name": "flights_delay", "version": 1, "status": "failed",
         "metrics": {"rmse": 12.5, "r2": 0.41}},
    ]


def test_index_lists_every_model_and_version_with_relative_links(full_scorecard):
    card = full_scorecard["card"].to_dict()
    page = render_index(_models(card))
    p = _Rows()
    p.feed(page)
    assert p.rows == [("flights_delay", "1"), ("fraud <model>", "10"), ("fraud <model>", "3")]
    assert p.links == ["flights_delay/1/scorecard.html", "fraud%20%3Cmodel%3E/10/scorecard.html",
                       "fraud%20%3Cmodel%3E/3/scorecard.html"]
    assert "<th>roc_auc (test split)</th>" in page and "<th>rmse (test split)</th>" in page
    assert f"{card['metrics']['roc_auc']:.4f}" in page and "12.5000" in page
    assert "badge failed" in page and "badge passed" in page
    assert "<script" not in page


def test_index_rejects_absolute_links_and_incomplete_entries():
    with pytest.raises(InvalidArgumentError, match="must be relative"):
        render_index([{"name": "m", "version": 1, "href": "https://example.com/x.html"}])
    with pytest.raises(InvalidArgumentError, match="must be relative"):
        render_index([{"name": "m", "version": 1, "href": "/abs/scorecard.html"}])
    with pytest.raises(InvalidArgumentError, match="needs 'name' and 'version'"):
        render_index([{"version": 1}])
    assert "No model versions are registered yet." in render_index([])


def test_diff_reports_metric_gate_slice_and_feature_deltas(full_scorecard):
    a = full_scorecard["card"].to_dict()
    b = copy.deepcopy(a)
    b["model_version"] = 4
    b["metrics"]["roc_auc"] = a["metrics"]["roc_auc"] - 0.05
    b["metrics"]["brier"] = a["metrics"]["brier"] - 0.01
    b["gates"]["results"][0].update(passed=False, status="failed", value=0.7)
    b["status"] = "failed"
    sex_f = next(s for s in b["bias"]["slices"] if s["column"] == "sex" and s["value"] == "F")
    sex_f["selection_rate"] += 0.1
    b["explanation"]["global_importance"].append({"feature": "new_feat", "mean_abs_shap": 0.01})
    b["lineage"]["training_dataset_version"] = 3

    d = diff_scorecards(a, b)
    m = {r["metric"]: r for r in d["metrics"]}
    assert m["roc_auc"]["delta"] == pytest.approx(-0.05) and m["roc_auc"]["improved"] is False
    assert m["brier"]["delta"] == pytest.approx(-0.01) and m["brier"]["improved"] is True
    g = d["gates"][0]
    assert g["changed"] and (g["a_status"], g["b_status"]) == ("passed", "failed")
    s = next(r for r in d["slices"] if (r["column"], r["slice"]) == ("sex", "F"))
    assert s["selection_rate"]["delta"] == pytest.approx(0.1)
    assert d["features"]["only_in_b"] == ["new_feat"] and d["features"]["only_in_a"] == []
    assert d["lineage"] == [{"key": "training_dataset_version", "a": 2, "b": 3}]
    assert d["status"]["changed"]

    md = diff_to_markdown(d)
    assert md.startswith("# Scorecard diff: fraud <model> v3 → fraud <model> v4")
    assert "| roc_auc |" in md and "-0.0500 | none (no paired interval) |" in md
    assert "| worse |" not in md and "| better |" not in md  # no verdict from estimates
    judged = diff_to_markdown(d, {"roc_auc": "worse"})
    assert "-0.0500 | worse |" in judged and "| brier |" in judged
    assert "| roc_auc >= 0.8 | passed | failed |" in md
    assert "| sex | F |" in md and "(+0.1000)" in md
    assert "Only in fraud <model> v4: new_feat" in md
    assert "| training_dataset_version | 2 | 3 |" in md


def test_diff_of_identical_scorecards_has_no_changes(full_scorecard):
    a = full_scorecard["card"].to_dict()
    d = diff_scorecards(a, copy.deepcopy(a))
    assert all(r["delta"] in (0.0, None) for r in d["metrics"])
    assert not any(g["changed"] for g in d["gates"]) and d["lineage"] == []
    assert "_Identical lineage._" in diff_to_markdown(d)
