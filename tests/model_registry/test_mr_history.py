"""The append-only validation history of a model version: runs, sign-offs and integrity."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fstrain.kernel.errors import IntegrityError, InvalidArgumentError
from fstrain.project import Project
from fstrain.cli.registry import registry_app


def _run(model, status, auc, *, failing=()):
    card = json.dumps({"model_name": model.name, "model_version": model.version,
                       "metrics": {"roc_auc": auc}, "status": status}).encode()
    return model.record_validation(
        status, {"metrics": {"roc_auc": auc}, "failing_gates": list(failing),
                 "gates": [{"name": "roc_auc >= 0.8", "source": "use-case default"}]},
        {"scorecard.json": card, "scorecard.html": b"<html>run</html>",
         "images/roc.png": b"\x89PNG\r\n\x1a\nfake"})


def test_runs_are_appended_never_overwritten(registry, model_dir, monkeypatch):
    monkeypatch.setenv("FSTRAIN_USER", "alice")
    model = registry.python.create_model("fraud", metrics={"auc": 0.8}).save(model_dir)
    first = _run(model, "failed", 0.7, failing=["roc_auc >= 0.8 (value 0.7, required >= 0.8)"])
    second = _run(model, "passed", 0.9)
    assert (first["seq"], second["seq"]) == (1, 2)
    assert first["user"] == "alice" and first["created"] and "code_commit" in first
    assert first["files"]["scorecard.json"] != second["files"]["scorecard.json"]
    folder = model.model_path / "history"
    assert json.loads((folder / "0001" / "scorecard.json").read_text())["status"] == "failed"
    assert json.loads((folder / "0002" / "scorecard.json").read_text())["status"] == "passed"
    fresh = registry.get_model("fraud", 1)
    assert fresh.validation_status == "passed"
    assert [e.get("status") for e in fresh.history()] == [None, "failed", "passed"]
    assert fresh.latest_validation()["seq"] == 2
    fresh.verify()  # every history file is in the manifest with its sha256


def test_history_cannot_be_written_as_an_attachment_or_edited(registry, model_dir):
    model = registry.python.create_model("fraud").save(model_dir)
    _run(model, "failed", 0.6)
    with pytest.raises(InvalidArgumentError, match="append-only 'history/'"):
        model.write_attachment("history/0001/scorecard.json", {"status": "passed"})
    record = model.model_path / "history" / "0001" / "record.json"
    record.write_text(record.read_text().replace('"failed"', '"passed"'))
    with pytest.raises(IntegrityError):
        model.history()
    with pytest.raises(IntegrityError, match="record.json"):
        model.verify()


def test_approval_of_a_failed_run_needs_an_override(registry, model_dir):
    model = registry.python.create_model("fraud", metrics={"auc": 0.8}).save(model_dir)
    with pytest.raises(InvalidArgumentError, match="never validated.*--override"):
        model.sign_off("approval", reviewer="bob", note="looks fine")
    failing = "max_abs_dp_difference <= 0.25 (value 0.31, required <= 0.25)"
    _run(model, "failed", 0.7, failing=[failing])
    with pytest.raises(InvalidArgumentError, match=r"failed its latest validation.*dp_difference"):
        model.sign_off("approval", reviewer="bob", note="looks fine")
    assert model.approval_status == "not reviewed"
    event = model.sign_off("approval", reviewer="bob", note="accepted risk",
                           override="disparity explained by the base rates; mitigated downstream")
    assert event["kind"] == "approval" and event["validation_seq"] == 1
    assert event["validation_status"] == "failed" and event["override_reason"].startswith("disp")
    assert model.approval_status == "approved (override)"
    _run(model, "passed", 0.9)  # a new run needs a new sign-off
    assert model.approval_status == "not reviewed"
    model.sign_off("rejection", reviewer="carol", note="wrong population")
    assert model.approval_status == "rejected"
    assert [e["kind"] for e in model.history()] == [
        "creation", "validation", "approval", "validation", "rejection"]


def test_best_model_can_require_approval(registry, model_dir):
    low = registry.python.create_model("fraud", metrics={"auc": 0.8}).save(model_dir)
    high = registry.python.create_model("fraud", metrics={"auc": 0.9}).save(model_dir)
    for model in (low, high):
        _run(model, "passed", model.training_metrics["auc"])
    assert registry.get_best_model("fraud", "auc", validated_only=True).version == 2
    assert registry.get_best_model("fraud", "auc", require_approval=True) is None
    low.sign_off("approval", reviewer="bob", note="ok")
    high.sign_off("rejection", reviewer="bob", note="leaks the label")
    best = registry.get_best_model("fraud", "auc", validated_only=True, require_approval=True)
    assert best.version == 1


def test_cli_approve_reject_show_and_report(tmp_path, model_dir):
    root = tmp_path / "store"
    mr = Project(root).get_model_registry()
    model = mr.python.create_model("fraud").save(model_dir)
    mr.python.create_model("fraud").save(model_dir)  # never validated
    _run(model, "failed", 0.7, failing=["roc_auc >= 0.8 (value 0.7, required >= 0.8)"])
    runner = CliRunner()
    refused = runner.invoke(registry_app, ["approve", "fraud:1", "--reviewer", "bob",
                                           "--note", "ok", "--root", str(root)])
    assert refused.exit_code != 0 and "--override" in refused.output
    ok = runner.invoke(registry_app, ["approve", "fraud:1", "--reviewer", "bob", "--note", "ok",
                                      "--override", "risk accepted", "--root", str(root)])
    assert ok.exit_code == 0 and "approved by bob" in ok.output and "override" in ok.output
    shown = runner.invoke(registry_app, ["show", "fraud:1", "--root", str(root), "--json"])
    payload = json.loads(shown.output)
    assert payload["approval_status"] == "approved (override)"
    assert [e["kind"] for e in payload["history"]] == ["creation", "validation", "approval"]
    assert payload["latest_scorecard"] == "history/0001/scorecard.html"
    brief = runner.invoke(registry_app, ["show", "fraud:1", "--root", str(root)])
    assert "#1 validation failed" in brief.output and "#2 approval" in brief.output
    table = runner.invoke(registry_app, ["show", "fraud:1", "--full", "--root", str(root)])
    assert "History (append-only)" in table.output and "risk accepted" in table.output
    report = runner.invoke(registry_app, ["report", "--root", str(root)])
    page = (root / "model_registry" / "index.html").read_text()
    assert report.exit_code == 0
    assert 'href="fraud/1/history/0001/scorecard.html"' in page
    assert "fraud/2/" not in page  # no dead link for the unvalidated version
    assert "not validated" in page and "risk accepted" in page


def test_a_sign_off_from_python_regenerates_the_report_index(tmp_path, model_dir):
    """The index a reviewer opens follows every run and sign-off, not only the CLI's: a
    rejection made from a notebook shows in ``index.html`` without ``fstrain registry report``."""
    root = tmp_path / "store"
    model = Project(root).get_model_registry().python.create_model("fraud").save(model_dir)
    page = root / "model_registry" / "index.html"
    assert not page.exists()
    _run(model, "passed", 0.9)
    assert "PASSED" in page.read_text() and "wrong population" not in page.read_text()
    model.sign_off("rejection", reviewer="carol", note="trained on the wrong population")
    assert "trained on the wrong population" in page.read_text()
