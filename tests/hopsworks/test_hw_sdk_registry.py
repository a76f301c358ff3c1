"""The model registry round trip through the real ``hsml`` code against the fake server.

``hsml`` uploads the files (chunked dataset uploads), registers the version (PUT), polls for it,
tags it; ``download`` lists and fetches the files. The server refuses a second registration of
the same version (409) and tags without a schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sdk_server import serve

import feature_store
from fstrain.kernel.errors import FeatureStoreError, IntegrityError

PROJECT = "fstrain_ci"


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    for var in ("REST_ENDPOINT", "HOPSWORKS_HOST", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with serve(tmp_path / "cluster") as fake:
        project = feature_store.login(backend="hopsworks", root=tmp_path / "client",
                                      **fake.login_kwargs)
        yield fake, project


def _saved(tmp_path: Path, project: Any) -> Any:
    src = tmp_path / "model"
    src.mkdir(exist_ok=True)
    (src / "model.json").write_text('{"trees": 3}')
    (src / "booster.ubj").write_bytes(b"\x00\x01binary")
    model = project.get_model_registry().python.create_model(
        "fraud_xgb", metrics={"roc_auc": 0.91}, hyperparameters={"max_depth": 4})
    return model.save(str(src))


def _files(fake: Any, version: int = 1) -> Path:
    return fake.server.state.hopsfs / "Projects" / PROJECT / "Models" / "fraud_xgb" / str(version) / "Files"


def test_registry_round_trip_through_hsml(cluster, tmp_path):
    fake, project = cluster
    model = _saved(tmp_path, project)
    assert model.version == 1
    registered = fake.server.state.models["fraud_xgb_1"]
    assert registered["metrics"] == {"roc_auc": 0.91}
    assert set(registered["tags"]) >= {"fstrain_manifest_sha256", "validation_status",
                                       "fstrain_lineage"}
    assert sorted(p.name for p in _files(fake).iterdir()) == ["booster.ubj", "history",
                                                              "manifest.json", "model.json"]
    got = project.get_model_registry().get_model("fraud_xgb", 1)
    assert got.validation_status == "pending" and got.hyperparameters == {"max_depth": 4}
    folder = Path(got.download(tmp_path / "dl"))
    assert (folder / "booster.ubj").read_bytes() == b"\x00\x01binary"
    got.set_validation_status("passed")
    assert project.get_model_registry().get_model("fraud_xgb", 1).validation_status == "passed"
    assert [m.version for m in project.get_model_registry().get_models("fraud_xgb")] == [1]
    assert not fake.server.unrouted


def test_download_after_an_attachment_sees_it(cluster, tmp_path):
    """Without a path, ``hsml`` would hand back its cached copy (keyed by the model id) with
    the old manifest; the adapter downloads fresh, so the new scorecard is there and verifies."""
    fake, project = cluster
    model = _saved(tmp_path, project)
    before = Path(model.download())
    model.write_attachment("scorecard.json", {"roc_auc": 0.9})
    after = Path(project.get_model_registry().get_model("fraud_xgb", 1).download())
    assert json.loads((after / "scorecard.json").read_text()) == {"roc_auc": 0.9}
    assert not (before / "scorecard.json").exists()


def test_an_attachment_is_uploaded_before_the_old_one_is_replaced(cluster, tmp_path):
    fake, project = cluster
    model = _saved(tmp_path, project)
    model.write_attachment("scorecard.json", {"roc_auc": 0.9})
    start = len(fake.server.log)
    model.write_attachment("scorecard.json", {"roc_auc": 0.8})
    calls = [(r.method, "/dataset/upload/" in r.path, r.path.rsplit("/", 1)[-1],
              r.query.get("action", [""])[0]) for r in fake.server.log[start:]
             if "/dataset/" in r.path]
    upload = next(i for i, c in enumerate(calls) if c[0] == "POST" and c[1])
    removal = next(i for i, c in enumerate(calls) if c[0] == "DELETE" and c[2] == "scorecard.json")
    move = next(i for i, c in enumerate(calls) if c[3] == "move" and "scorecard" in c[2])
    assert upload < removal < move, calls  # the new bytes are in HopsFS before the old file goes
    assert json.loads((_files(fake) / "scorecard.json").read_text()) == {"roc_auc": 0.8}
    assert not [p for p in _files(fake).iterdir() if p.name.endswith(".part")]


def test_changed_or_extra_files_on_the_cluster_fail_verification(cluster, tmp_path):
    fake, project = cluster
    _saved(tmp_path, project)
    (_files(fake) / "model.json").write_text('{"trees": 4}')
    with pytest.raises(IntegrityError, match="model.json"):
        project.get_model_registry().get_model("fraud_xgb", 1).download(tmp_path / "a")
    (_files(fake) / "model.json").write_text('{"trees": 3}')
    (_files(fake) / "backdoor.py").write_text("import os")
    with pytest.raises(IntegrityError, match="extra file.*backdoor.py"):
        project.get_model_registry().get_model("fraud_xgb", 1).download(tmp_path / "b")


def test_registering_an_existing_version_again_is_refused(cluster, tmp_path):
    fake, project = cluster
    _saved(tmp_path, project)
    src = tmp_path / "model"
    again = project.get_model_registry().python.create_model("fraud_xgb", version=1)
    with pytest.raises(FeatureStoreError):
        again.save(str(src))
    assert fake.server.state.models["fraud_xgb_1"]["metrics"] == {"roc_auc": 0.91}


def test_get_best_model_through_hsml_answers_as_the_local_registry(cluster, tmp_path):
    from model_registry.errors import UnknownMetricError

    fake, project = cluster
    src = tmp_path / "model"
    src.mkdir()
    (src / "model.json").write_text("{}")
    registry = project.get_model_registry()
    for auc in (0.7, 0.9, 0.8):
        registry.python.create_model("fraud_xgb", metrics={"validation_roc_auc": auc,
                                                           "validation_log_loss": 1 - auc}
                                     ).save(str(src))
    assert registry.get_best_model("fraud_xgb", "roc_auc").version == 2
    assert registry.get_best_model("fraud_xgb", "logloss", "min").version == 2
    assert registry.get_best_model("fraud_xgb", "roc_auc", "min").version == 1
    with pytest.raises(UnknownMetricError, match="'accuracy'.*validation_log_loss, "
                                                 "validation_roc_auc"):
        registry.get_best_model("fraud_xgb", "accuracy")
    with pytest.warns(UserWarning, match="'nope' has no version"):
        assert registry.get_best_model("nope", "roc_auc") is None
    assert not fake.server.unrouted
