"""``fstrain registry list|show`` through typer's CliRunner."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fstrain.project import Project
from fstrain.cli.registry import registry_app, summarize_scorecard

runner = CliRunner()


@pytest.fixture
def store(tmp_path, model_dir, fake_feature_view):
    root = tmp_path / "store"
    mr = Project(root).get_model_registry()
    mr.python.create_model("fraud", metrics={"auc": 0.81, "f1": 0.4}).save(model_dir)
    second = mr.sklearn.create_model(
        "fraud",
        metrics={"auc": 0.87},
        feature_view=fake_feature_view,
        training_dataset_version=4,
    ).save(model_dir)
    second.set_validation_status("passed")
    second.write_attachment(
        "scorecard.json",
        {
            "passed": True,
            "metrics": {"auc": 0.87},
            "checks": [{"name": "auc_min", "passed": True}, {"name": "bias", "passed": False}],
        },
    )
    mr.python.create_model("churn", metrics={"rmse": 3.5}).save(model_dir)
    return root


def test_list_json(store):
    result = runner.invoke(registry_app, ["list", "--root", str(store), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(r["name"], r["version"]) for r in rows] == [("churn", 1), ("fraud", 1), ("fraud", 2)]
    fraud2 = rows[2]
    assert fraud2["validation_status"] == "passed"
    assert fraud2["training_dataset_version"] == 4
    assert fraud2["metrics"] == {"auc": 0.87}


def test_list_table_for_one_name(store):
    result = runner.invoke(registry_app, ["list", "fraud", "--root", str(store)])
    assert result.exit_code == 0, result.output
    assert "auc=0.87" in result.output and "passed" in result.output
    assert "churn" not in result.output


def test_list_uses_fstrain_home(store, monkeypatch):
    monkeypatch.setenv("FSTRAIN_HOME", str(store))
    result = runner.invoke(registry_app, ["list", "--json"])
    assert result.exit_code == 0
    assert len(json.loads(result.output)) == 3


def test_list_on_a_missing_root_is_an_error_and_creates_nothing(tmp_path):
    result = runner.invoke(registry_app, ["list", "--root", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert f"store root {tmp_path / 'none'} (from --root) does not exist" in result.output
    assert not (tmp_path / "none").exists()


def test_show_json_is_compact_and_full_has_the_scorecard(store):
    compact = runner.invoke(registry_app, ["show", "fraud:2", "--root", str(store), "--json"])
    assert compact.exit_code == 0, compact.output
    brief = json.loads(compact.output)
    assert "manifest" not in brief and brief["version"] == 2
    assert json.dumps(brief).count("a" * 64) == 1  # the train split's hash, in the lineage summary
    result = runner.invoke(registry_app, ["show", "fraud:2", "--root", str(store), "--json",
                                          "--full"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["manifest"]["version"] == 2
    assert payload["lineage"]["training_dataset"]["version"] == 4
    assert payload["scorecard_summary"]["passed"] is True
    assert payload["scorecard_summary"]["checks_failed"] == ["bias"]


def test_show_latest_as_table(store):
    brief = runner.invoke(registry_app, ["show", "fraud", "--root", str(store)])
    assert brief.exit_code == 0, brief.output
    assert "fraud" in brief.output and "--full" in brief.output
    assert len(brief.output.splitlines()) < 30  # compact by default
    result = runner.invoke(registry_app, ["show", "fraud", "--root", str(store), "--full"])
    assert result.exit_code == 0, result.output
    assert "version 2" in result.output
    assert "scorecard.json" in result.output and "Scorecard summary" in result.output
    no_card = runner.invoke(registry_app, ["show", "fraud:1", "--root", str(store), "--full"])
    assert "No scorecard.json" in no_card.output


@pytest.mark.parametrize(
    ("ref", "message"),
    [("fraud:9", "has no version 9"), ("frod", "Did you mean 'fraud'"), ("fraud:x", "VERSION")],
)
def test_show_errors_exit_2_with_one_line(store, ref, message):
    result = runner.invoke(registry_app, ["show", ref, "--root", str(store)])
    assert result.exit_code == 2
    assert message in result.output
    assert result.output.startswith("error: ") and "Traceback" not in result.output


def test_summarize_scorecard_keeps_scalars():
    summary = summarize_scorecard({"model": "m", "auc": 0.9, "nested": {"x": 1}})
    assert summary == {"model": "m", "auc": 0.9}
