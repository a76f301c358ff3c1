"""Scorecard: JSON round trip with every section; Markdown and HTML content and escaping."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser

import pytest

from fstrain.kernel.errors import InvalidArgumentError
from validation.plots import standard_plots
from validation.scorecard import Scorecard, png_data_uri

SECTIONS = {"model_name", "model_version", "task", "evaluation", "lineage", "library_versions",
            "metrics", "confidence_intervals", "threshold", "baselines", "bias", "explanation",
            "gates", "notes", "created_at", "schema_version", "status", "baseline_differences",
            "gate_selection", "policy", "explanation_error", "calibration", "learning_curves"}


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.imgs: list[dict[str, str]] = []
        self.slice_rows: list[tuple[str, str]] = []
        self.tags: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        if tag == "img":
            self.imgs.append(a)
        if tag == "tr" and "slice-row" in (a.get("class") or ""):
            self.slice_rows.append((a["data-column"], a["data-slice"]))
        for key in ("href", "src"):
            if key in a:
                self.hrefs.append(a[key])


def _expected_slices(card: Scorecard) -> list[tuple[str, str]]:
    return [(s["column"], s["value"]) for s in card.bias["slices"]]


def test_json_round_trips_and_has_every_section(full_scorecard):
    card = full_scorecard["card"]
    text = card.to_json()
    data = json.loads(text)
    assert set(data) == SECTIONS
    back = Scorecard.from_json(text)
    assert back == card
    assert back.to_json() == text
    assert data["status"] == "passed"
    assert [r["status"] for r in data["gates"]["results"]] == ["passed", "passed", "passed",
                                                               "skipped"]
    assert data["metrics"]["roc_auc"] == pytest.approx(card.metrics["roc_auc"])
    assert data["confidence_intervals"]["roc_auc"]["lower"] < data["metrics"]["roc_auc"]
    diff = data["baseline_differences"]["majority_class_prior"]["roc_auc"]
    assert diff["better"] is True and diff["baseline"] == 0.5
    assert data["bias"]["figures"]["max_abs_dp_difference"] is not None
    assert data["explanation"]["global_importance"][0]["feature"]
    assert data["lineage"]["feature_group_commits"]["transactions:1"] == 1712000000000


def test_status_follows_gates(full_scorecard):
    card = Scorecard.from_dict(full_scorecard["card"].to_dict())
    assert card.status == "passed"
    card.gates["results"][0]["passed"] = False
    assert card.status == "failed"
    card.gates = None
    assert card.status == "no gates"


def test_json_is_strict_and_rejects_other_schema_versions():
    card = Scorecard("m", 1, metrics={"roc_auc": float("nan"), "n": 3})
    assert json.loads(card.to_json())["metrics"]["roc_auc"] is None
    with pytest.raises(InvalidArgumentError, match="schema_version 99"):
        Scorecard.from_dict({**card.to_dict(), "schema_version": 99})
    with pytest.raises(InvalidArgumentError, match="task must be"):
        Scorecard("m", 1, task="ranking")


def test_markdown_has_gates_metrics_and_every_slice_row(full_scorecard):
    card = full_scorecard["card"]
    md = card.to_markdown()
    assert md.startswith("# Scorecard: fraud <model> v3")
    assert "**Status: PASSED**" in md
    assert "| max_abs_dp_difference <= 0.15 | n/a | passed |" in md
    assert "| better_than_previous | n/a | skipped |" in md
    for col, value in _expected_slices(card):
        assert re.search(rf"^\| {re.escape(value)} \| [\d,]+ \|", md, re.M), (col, value)
    assert "### Helper column `race`" in md
    assert re.search(r"^\| D \| 12 \|.*\| no \| skipped: 12 rows < 30 \|",
                     md, re.M)  # the tiny slice is listed, marked not judged, and why
    assert re.search(r"^\| A \| [\d,]+ \|.*\| yes \| judged: [\d,]+ rows >= 30, \d+ "
                     r"positives >= 0, \d+ negatives >= 0 \|", md, re.M)
    assert "transactions_fv" in md


def test_html_is_self_contained_escaped_and_lists_slices(full_scorecard):
    fs = full_scorecard
    card = fs["card"]
    images = standard_plots(y_true=fs["y"], y_score=fs["score"],
                            confusion=fs["metrics"]["confusion_matrix"],
                            threshold=fs["threshold"], explanation=fs["explanation"],
                            bias=fs["bias"])
    page = card.to_html(images)
    p = _Collect()
    p.feed(page)
    assert "script" not in p.tags
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "fraud &lt;model&gt;" in page
    assert not re.search(r"(?:src|href)=\"(?:https?:)?//", page)
    assert all(h.startswith("data:image/png;base64,") for h in p.hrefs)
    assert len(p.imgs) == len(images)
    for img in p.imgs:
        raw = base64.b64decode(img["src"].split(",", 1)[1], validate=True)
        assert raw.startswith(b"\x89PNG")
    assert p.slice_rows == _expected_slices(card)
    order = [page.index(f'id="{s}"') for s in ("gates", "metrics", "plots", "bias",
                                                 "explainability", "lineage")]
    assert order == sorted(order)
    assert "badge passed" in page


def test_html_rejects_non_png_images(full_scorecard):
    with pytest.raises(InvalidArgumentError, match="'roc' is not PNG data"):
        full_scorecard["card"].to_html({"roc": b"GIF89a..."})
    assert png_data_uri(b"\x89PNG\r\n\x1a\nabc").startswith("data:image/png;base64,")


def test_html_without_bias_or_gates_says_so():
    page = Scorecard("plain", 1, metrics={"roc_auc": 0.7}).to_html()
    assert "No acceptance gates were configured" in page
    assert "No bias evaluation was run" in page
    assert "NO GATES" in page


def _row(md: str, first_cell: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {first_cell} |"))


def test_bias_tables_judge_with_the_gate_thresholds(biased_data):
    """One source of limits: a demographic-parity difference above 0.1 but within the gate's
    0.25-style limit passes in the bias table too; a figure no gate names has no verdict."""
    from validation.bias import slice_report
    from validation.gates import evaluate_gates

    d = biased_data
    bias = slice_report(d.y, d.score, (d.score >= 0.5).astype(int), d.helpers[["sex"]],
                        n_resamples=20)
    dp = bias.disparities[0].demographic_parity_difference
    assert dp > 0.1
    card = Scorecard("m", 1, bias=bias.to_dict(), evaluation={"split": "test"})
    limit = round(dp + 0.05, 2)
    card.gates = evaluate_gates([f"max_abs_dp_difference <= {limit}"],
                                card.gate_metrics()).to_dict()
    md = card.to_markdown()
    section = md.split("## Bias evaluation")[1].split("## Explainability")[0]
    row = _row(section, "demographic_parity_difference")
    assert f"max_abs_dp_difference <= {limit} (over judged slices) | pass |" in row
    assert "FAIL" not in section and "0.1000" not in row
    assert "| no gate | not judged (no gate names this figure) |" in _row(
        section, "equal_opportunity_difference")
    gate = _row(md, f"max_abs_dp_difference <= {limit}")
    assert "| judged slices of every helper column (worst column) |" in gate
    strict = evaluate_gates([f"demographic_parity_difference[sex] <= {dp - 0.01:.3f}"],
                            card.gate_metrics()).to_dict()
    card.gates = strict
    assert "| FAIL |" in _row(card.to_markdown().split("## Bias evaluation")[1],
                              "demographic_parity_difference")


def test_signoff_block_lists_every_sign_off_signed_or_not(full_scorecard):
    history = [
        {"seq": 1, "kind": "validation", "status": "failed", "created": "2026-01-01T10:00:00"},
        {"seq": 2, "kind": "approval", "created": "2026-01-02T09:30:00", "reviewer": "bob",
         "note": "ok for pilot", "override_reason": "fairness reviewed by the board",
         "validation_seq": 1, "signer": None},
        {"seq": 3, "kind": "rejection", "created": "2026-01-03T11:00:00", "note": "superseded",
         "validation_seq": 1, "evidence_sha256": "ab" * 32,
         "signer": {"name": "carol-laptop", "role": "reviewer", "fingerprint": "SHA256:xyz",
                    "person": "carol", "acting_for": None}},
    ]
    card = full_scorecard["card"]
    md = card.to_markdown(history)
    approved, rejected = _row(md, "approved"), _row(md, "rejected")
    assert approved == ("| approved | run 1 | unsigned (recorded name: bob) | unsigned | "
                        "unsigned | 2026-01-02 09:30:00 | ok for pilot | fairness reviewed by "
                        "the board | unsigned |")
    assert rejected == ("| rejected | run 1 | carol (key carol-laptop) | reviewer | SHA256:xyz "
                        f"| 2026-01-03 11:00:00 | superseded | none | {'ab' * 32} |")
    page = card.to_html(history=history)
    assert page.index('id="signoff"') < page.index('id="gates"')
    assert page.count('class="signoff-row') == 2 and 'id="signoff-pending"' not in page
    pending = card.to_html(history=history[:1])
    assert "Run 1 has no sign-off yet" in pending
    assert 'id="signoff"' not in card.to_html()
