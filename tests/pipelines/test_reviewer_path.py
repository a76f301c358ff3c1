"""A compliance reviewer's path on a model made by the real pipelines (adult, small data):
validation with the default gates, the scorecard and model card as a reviewer reads them, the
append-only history, a sign-off with an override, and the registry report in headless Chromium.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner

from pipelines import model_validation
from fstrain.cli.registry import registry_app


@pytest.fixture(scope="module")
def adult(adult_store, tmp_path_factory):
    """A copy of the session's adult store (the model made by the feature, dataset and
    training pipelines, validated once with the defaults: use-case and fstrain standard
    gates), which these tests sign off and validate again."""
    import feature_store
    from fstrain.kernel.refs import ModelRef

    root = tmp_path_factory.mktemp("reviewer") / "store"
    shutil.copytree(adult_store.root, root)
    project = feature_store.login(backend="local", root=root)
    model = project.get_model_registry().get_model(adult_store.name, adult_store.version)
    run = model.latest_validation()
    assert run is not None
    result = SimpleNamespace(
        status=run["status"], failing_gates=tuple(run["failing_gates"]),
        scorecard_html=str(Path(model.model_path) / "history" / f"{run['seq']:04d}"
                           / "scorecard.html"))
    return project, root, ModelRef(adult_store.name, adult_store.version), result


def _card(result):
    return json.loads(Path(result.scorecard_html).with_name("scorecard.json").read_text())


def test_verdict_names_exactly_the_failing_gates(adult):
    _, _, _, result = adult
    card = _card(result)
    failed = {r["name"] for r in card["gates"]["results"] if r["status"] == "failed"}
    named = {line.split(" (")[0] for line in result.failing_gates}
    assert named == failed
    assert (result.status == "failed") == bool(failed)
    sources = {r["name"]: r["source"] for r in card["gates"]["results"]}
    assert sources["roc_auc >= 0.85"] == "use-case default"
    assert sources["better_than_baseline(log_loss)"] == "fstrain standard"
    assert sources["explanation_available"] == "fstrain standard"
    assert card["gate_selection"]["replaced_defaults"] is False
    di = card["bias"]["figures"]["disparate_impact_ratio[sex]"]
    gate = next(r for r in card["gates"]["results"]
                if r["name"] == "disparate_impact_ratio[sex] >= 0.8")
    assert gate["value"] == pytest.approx(di) and gate["status"] == ("passed" if di >= 0.8
                                                                      else "failed")


def test_model_card_checks_helper_columns_against_the_real_inputs(adult):
    _, _, _, result = adult
    card_md = Path(result.scorecard_html).with_name("model_card.md").read_text()
    assert "could not be checked" not in card_md
    assert "None of these columns is among the model's input features" in card_md
    inputs = next(line for line in card_md.splitlines() if line.startswith("- Input features"))
    assert "workclass" in inputs and "sex" not in inputs and "race" not in inputs
    architecture = next(line for line in card_md.splitlines() if "Architecture:" in line)
    assert "xgboost (xgboost.Booster)" in architecture  # read from the loaded model
    trees = int(architecture.split(" boosted trees")[0].rsplit(" ", 1)[1])
    assert 0 < trees <= 60 and "requested_rounds=60" in architecture  # early stopping
    assert "## Data provenance" in card_md and "sha256" in card_md


def test_scorecard_sections_a_reviewer_needs(adult):
    _, _, _, result = adult
    card = _card(result)
    cal = card["calibration"]
    assert cal["split"] == "test" and 0 <= cal["ece"] <= 1
    assert cal["brier_constant"] > 0 and cal["log_loss_constant"] > 0
    assert card["explanation"] and card["explanation_error"] is None
    columns = [g["column"] for g in card["explanation"]["by_column"]]
    assert "sex" not in columns and len(columns) <= 15
    names = [g["feature"] for g in card["explanation"]["global_importance"]]
    assert not any(n.startswith(("cat__", "num__")) for n in names)  # what a reader knows
    assert any(n.startswith("occupation = ") for n in names)
    html = Path(result.scorecard_html).read_text()
    assert 'id="calibration"' in html and "Constant predictor" in html
    assert "Value (test split)" in html and "Strongest categories" in html
    assert "sex×race" in html and "disparate_impact_ratio" in html


def test_learning_curves_are_registered_and_on_the_scorecard(adult):
    project, _, ref, result = adult
    model = project.get_model_registry().get_model(ref.name, ref.version)
    files = {f["path"] for f in model.manifest["files"]}
    assert "learning_curves.json" in files  # hashed with the model
    curves = json.loads((Path(model.model_path) / "learning_curves.json").read_text())
    assert curves["unit"] == "round" and len(curves["val_loss"]) == len(curves["steps"]) >= 10
    summary = _card(result)["learning_curves"]
    assert summary["diagnosis"]["verdict"] in ("overfitting", "underfitting", "good fit")
    html = Path(result.scorecard_html).read_text()
    assert 'id="learning-curves"' in html and summary["diagnosis"]["text"][:40] in html
    assert Path(result.scorecard_html).with_name("images").joinpath("learning_curves.png").is_file()


def test_history_sign_off_and_report_in_chromium(adult, tmp_path):
    project, root, ref, result = adult
    runner = CliRunner()
    target = f"{ref.name}:{ref.version}"
    approve = ["approve", target, "--reviewer", "rita", "--note", "reviewed", "--root", str(root)]
    if result.status == "failed":
        refused = runner.invoke(registry_app, approve)
        assert refused.exit_code != 0 and "--override" in refused.output
        approve += ["--override", "disparity traced to base rates; human review of denials"]
    assert runner.invoke(registry_app, approve).exit_code == 0
    registry = project.get_model_registry()
    model = registry.get_model(ref.name, ref.version)
    assert [e["kind"] for e in model.history()] == ["creation", "validation", "approval"]
    overridden = result.status == "failed"
    best = registry.get_best_model(ref.name, "auc", require_approval=True)
    assert (best is None) if overridden else (best.version == ref.version)
    assert registry.get_best_model(ref.name, "auc", require_approval=True,
                                   allow_overrides=True).version == ref.version
    shown = json.loads(runner.invoke(registry_app, ["show", target, "--full", "--root", str(root),
                                                    "--json"]).output)
    assert shown["approval_status"] == ("approved (override)" if overridden else "approved")
    assert shown["history"][1]["scorecard_sha256"] == _sha(result.scorecard_html)
    report = runner.invoke(registry_app, ["report", "--root", str(root)])
    index = Path(report.output.strip())
    dom = _Dom()
    dom.feed(_dump(index, tmp_path))
    assert dom.version_rows == [(ref.name, str(ref.version))]
    assert dom.links, "the index links the scorecard of the run"
    for link in dom.links:
        assert (index.parent / unquote(link)).is_file()  # no dead link
    assert "APPROVED" in dom.text and "rita" in dom.text and "run 1" in dom.text
    review = f"review-pages/{ref.name}/{ref.version}.html"  # the run's scorecard, signed off
    assert review in dom.links
    current = (index.parent / review).read_text()
    assert current.count('class="signoff-row approved-row"') == 1
    assert "unsigned (recorded name: rita)" in current and "human review of denials" in current
    assert 'id="signoff-pending"' not in current
    assert "Run 1 has no sign-off yet" in Path(result.scorecard_html).read_text()  # immutable
    page = _Dom()
    page.feed(_dump(Path(result.scorecard_html), tmp_path))
    assert "Source" in page.headers and "Verdict" in page.text


def _sha(path: str) -> str:
    import hashlib

    return hashlib.sha256(Path(path).with_name("scorecard.json").read_bytes()).hexdigest()


def _dump(page: Path, tmp_path: Path) -> str:
    browser = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(n)), None)
    if browser is None:
        pytest.skip("needs a 'chromium' binary on PATH (apt-get install -y chromium)")
    out = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", f"--user-data-dir={tmp_path / page.stem}",
                          "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=90, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.version_rows: list[tuple[str, str]] = []
        self.headers: list[str] = []
        self.text = ""
        self._th = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a":
            self.links.append(a["href"])
        elif tag == "tr" and a.get("class") == "version-row":
            self.version_rows.append((a["data-model"], a["data-version"]))
        self._th = tag == "th"

    def handle_data(self, data):
        self.text += data
        if self._th:
            self.headers.append(data)
            self._th = False


def test_scorecard_judges_with_its_gates_and_says_why(adult):
    """One consistent scorecard: bias verdicts are the gates' (0.25, never a 0.1 of their own),
    every slice says why it was or was not judged, disparities are over judged slices and all
    groups, and the model card words a skipped slice with its real reason."""
    _, _, _, result = adult
    card = _card(result)
    bias = card["bias"]
    assert all(s["judging"].startswith(("judged: ", "skipped: ")) for s in bias["slices"])
    inter = next(d for d in bias["disparities"] if d["column"] == "sex×race")
    assert inter["all_groups"]["demographic_parity_difference"] >= (
        inter["demographic_parity_difference"])
    md = Path(result.scorecard_html).with_name("scorecard.md").read_text()
    section = md.split("## Bias evaluation")[1].split("## Explainability")[0]
    for d in bias["disparities"]:
        row = next(line for line in section.split(f"### Helper column `{d['column']}`")[1]
                   .splitlines() if line.startswith("| demographic_parity_difference |"))
        dp = d["demographic_parity_difference"]
        word = "not judged" if dp is None else "pass" if dp <= 0.25 else "FAIL"
        assert f"| max_abs_dp_difference <= 0.25 (over judged slices) | {word} |" in row
    assert "0.1000 |" not in section.split("| Disparity |")[1]
    assert "| judged slices of every helper column (worst column) |" in md
    card_md = Path(result.scorecard_html).with_name("model_card.md").read_text()
    for s in bias["slices"]:
        if not s["judged"]:
            assert f"{s['column']}={s['value']} ({s['size']} rows; {s['judging']})" in card_md
    assert "too small to judge" not in card_md
    assert card["threshold"]["detail"].endswith(" rows of the validation split")
    assert card["threshold"]["warning"] is None


def test_a_whitewashing_model_card_is_shown_beside_the_findings_and_flagged(adult, monkeypatch):
    """The attack: model_cards/<model>.yaml saying "No bias concerns." on a run that fails its
    fairness gates. A typo in the file is refused before any validation work; the text is
    then shown as the owner's, beside the findings, flagged, and completeness does not move."""
    from fstrain.kernel.errors import ConfigError

    project, root, ref, result = adult
    model = project.get_model_registry().get_model(ref.name, ref.version)
    runs = len(model.history())
    owner = root / "model_cards" / f"{ref.name}.yaml"
    owner.parent.mkdir(exist_ok=True)
    owner.write_text("bias_evaluaton: No bias concerns.\n", encoding="utf-8")
    config = model_validation.ModelValidationConfig(
        model_name=ref.name, version=ref.version, bootstrap_resamples=10, shap_samples=10,
        gates=["demographic_parity_difference_all_groups[sex×race] <= 0.05"])
    with monkeypatch.context() as m:
        m.setattr(model_validation, "_load_data", lambda *a, **k: pytest.fail("data read"))
        with pytest.raises(ConfigError, match="Did you mean 'bias_evaluation'"):
            model_validation.run(project, config)
    assert len(model.history()) == runs
    owner.write_text('bias_evaluation: "No bias concerns."\n', encoding="utf-8")
    washed = model_validation.run(project, config)
    assert washed.status == "failed"
    card_md = Path(washed.scorecard_html).with_name("model_card.md").read_text()
    before = Path(result.scorecard_html).with_name("model_card.md").read_text()
    bias = card_md.split("## Bias evaluation")[1].split("\n## ")[0]
    [failed] = [line for line in bias.splitlines() if "Failed fairness gates: " in line]
    assert "demographic_parity_difference_all_groups[sex×race] <= 0.05" in failed
    assert "demographic parity difference" in bias  # the findings stay
    assert f"**Written by the owner in model_cards/{ref.name}.yaml, sha256 " in bias
    assert "signed by: unsigned" in bias
    assert "No bias concerns." in bias and "**CONTRADICTION:**" in bias
    assert "CONTRADICTION between the owner's text" in card_md.split("\n## ")[0]  # at the top
    completeness = [line for line in card_md.splitlines() if "Completeness" in line]
    assert completeness == [line for line in before.splitlines() if "Completeness" in line]
