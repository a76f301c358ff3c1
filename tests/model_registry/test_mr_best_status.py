"""get_best_model, validation status, attachments after save and a large listing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fstrain.kernel.errors import IntegrityError, InvalidArgumentError
from model_registry.errors import UnknownMetricError
from model_registry.local.index import ModelRecord


@pytest.fixture
def three(registry, model_dir):
    aucs = [0.70, 0.90, 0.80]
    return [
        registry.python.create_model("m", metrics={"auc": a, "loss": 1 - a}).save(model_dir)
        for a in aucs
    ]


def test_best_model_max_and_min(registry, three):
    assert registry.get_best_model("m", "auc", "max").version == 2
    assert registry.get_best_model("m", "auc", "min").version == 1
    assert registry.get_best_model("m", "loss", direction="MIN").version == 2
    with pytest.raises(UnknownMetricError, match="'rmse'.*recorded metrics: auc, loss"):
        registry.get_best_model("m", "rmse", "max")
    with pytest.warns(UserWarning, match="'nope' does not exist"):
        assert registry.get_best_model("nope", "auc", "max") is None


def test_best_model_validated_only(registry, three):
    assert registry.get_best_model("m", "auc", "max", validated_only=True) is None
    three[0].set_validation_status("passed")
    three[2].set_validation_status("passed")
    three[1].set_validation_status("failed")
    best = registry.get_best_model("m", "auc", "max", validated_only=True)
    assert best.version == 3 and best.validation_status == "passed"
    assert registry.get_best_model("m", "auc", "max").version == 2


def test_best_model_ties_go_to_newest_and_skip_missing_metric(registry, model_dir):
    registry.python.create_model("t", metrics={"auc": 0.8}).save(model_dir)
    registry.python.create_model("t", metrics={"auc": 0.8}).save(model_dir)
    registry.python.create_model("t", metrics={"f1": 0.99}).save(model_dir)
    assert registry.get_best_model("t", "auc", "max").version == 2


def test_validation_status_updates_index_and_manifest(registry, three):
    model = three[1]
    assert model.manifest["validation_status"] == "pending"
    model.set_validation_status("passed")
    assert model.validation_status == "passed"
    fresh = registry.get_model("m", 2)
    assert fresh.validation_status == "passed"
    assert fresh.manifest["validation_status"] == "passed"
    fresh.verify()
    assert Path(fresh.download()).is_dir()


def test_attachments_after_save_update_manifest(registry, three, tmp_path):
    model = three[0]
    png = tmp_path / "roc.png"
    png.write_bytes(b"\x89PNG fake")
    model.add_attachment("images/roc.png", png)
    model.write_attachment("scorecard.json", {"passed": True, "metrics": {"auc": 0.7}})
    model.write_attachment("scorecard.md", "# Scorecard\n")
    model.add_attachment("model_card.md", b"# Card\n")
    files = {e["path"]: e for e in model.manifest["files"]}
    assert {"images/roc.png", "scorecard.json", "scorecard.md", "model_card.md"} <= set(files)
    assert files["images/roc.png"]["kind"] == "attachment"
    model.verify()
    folder = Path(registry.get_model("m", 1).download())
    assert (folder / "images" / "roc.png").read_bytes() == b"\x89PNG fake"
    assert json.loads((folder / "scorecard.json").read_text())["passed"] is True

    old_sha = files["scorecard.json"]["sha256"]
    model.write_attachment("scorecard.json", {"passed": False})
    new = {e["path"]: e for e in model.manifest["files"]}["scorecard.json"]
    assert new["sha256"] != old_sha
    model.verify()


def test_attachments_cannot_replace_model_files(registry, three):
    model = three[0]
    with pytest.raises(InvalidArgumentError, match="'weights.bin' is a model file"):
        model.write_attachment("weights.bin", b"evil")
    with pytest.raises(InvalidArgumentError, match="clashes"):
        model.write_attachment("sub", b"x")
    with pytest.raises(InvalidArgumentError, match="existing file"):
        model.add_attachment("images/x.png", model.model_path / "nope.png")
    assert (model.model_path / "weights.bin").read_bytes() == b"\x00\x01weights"
    model.verify()


def test_attachment_on_tampered_version_is_refused(registry, three):
    model = three[0]
    (model.model_path / "manifest.json").write_text("{}")
    with pytest.raises(IntegrityError):
        model.write_attachment("scorecard.json", {})
    assert not (model.model_path / "scorecard.json").exists()


def test_listing_a_thousand_versions_is_fast(registry, model_dir):
    records = [
        ModelRecord(
            name="big",
            version=v,
            framework="python",
            created="2026-01-01T00:00:00+00:00",
            manifest_sha256="0" * 64,
            metrics={"auc": v / 1000},
        )
        for v in range(1, 1001)
    ]
    with registry._index.write() as tx:
        tx.insert_many(records)
    # the best version is handed out only once it verifies, so it is a real one
    registry.python.create_model("big", metrics={"auc": 2.0}).save(model_dir)
    start = time.perf_counter()
    models = registry.get_models("big")
    best = registry.get_best_model("big", "auc", "max")
    elapsed = time.perf_counter() - start
    assert len(models) == 1001 and models[-1].version == 1001
    assert best.version == 1001
    assert elapsed < 2.0
