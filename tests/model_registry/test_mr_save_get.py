"""Saving, getting, listing, tags, download and delete of model versions."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from fstrain.kernel.errors import (
    InvalidArgumentError,
    ModelAlreadyExistsError,
    NotFoundError,
)
from fstrain.project import Project
from model_registry import ModelRegistry
from model_registry.errors import ModelNotSavedError, VersionWarning
from model_registry.local.registry import LocalModelRegistry


def test_save_returns_version_1_with_files_and_manifest(registry, model_dir):
    model = registry.python.create_model(
        "fraud_model",
        metrics={"auc": 0.91, "f1": 0.5},
        description="first",
        hyperparameters={"max_depth": 3},
        training_config={"seed": 7},
    )
    assert model.version is None
    saved = model.save(model_dir)
    assert saved is model and model.version == 1
    path = model.model_path
    assert path == registry.root / "fraud_model" / "1"
    assert (path / "weights.bin").read_bytes() == b"\x00\x01weights"
    assert (path / "sub" / "vocab.txt").read_text() == "a\nb\n"

    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest == model.manifest
    assert manifest["name"] == "fraud_model" and manifest["version"] == 1
    assert manifest["framework"] == "python"
    assert manifest["validation_status"] == "pending"
    assert manifest["metrics"] == {"auc": 0.91, "f1": 0.5}
    assert manifest["hyperparameters"] == {"max_depth": 3}
    assert manifest["training_config"] == {"seed": 7}
    assert {"python", "numpy", "pandas", "sklearn", "xgboost"} <= set(manifest["libraries"])
    assert "torch" not in manifest["libraries"]
    created = dt.datetime.fromisoformat(manifest["created"])
    assert created.utcoffset() == dt.timedelta(0)
    assert "git_commit" in manifest
    files = {e["path"]: e for e in manifest["files"]}
    assert set(files) == {"weights.bin", "sub/vocab.txt", "history/0000/record.json"}
    assert files["history/0000/record.json"]["kind"] == "history"  # the creation record
    data = (path / "weights.bin").read_bytes()
    assert files["weights.bin"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert files["weights.bin"]["size"] == len(data)


def test_get_model_reads_back_what_was_saved(registry, model_dir):
    registry.sklearn.create_model("m", metrics={"auc": 0.8}, description="d").save(model_dir)
    got = registry.get_model("m", 1)
    assert (got.name, got.version, got.framework) == ("m", 1, "sklearn")
    assert got.training_metrics == {"auc": 0.8}
    assert got.description == "d"
    assert got.validation_status == "pending"
    assert got.created is not None


def test_versions_increase_and_get_models_lists_them(registry, model_dir):
    versions = [registry.python.create_model("m").save(model_dir).version for _ in range(3)]
    assert versions == [1, 2, 3]
    assert [m.version for m in registry.get_models("m")] == [1, 2, 3]
    assert registry.get_models("other") == []


def test_get_model_without_version_warns_and_returns_version_1(registry, model_dir):
    registry.python.create_model("m", metrics={"v": 1}).save(model_dir)
    registry.python.create_model("m", metrics={"v": 2}).save(model_dir)
    with pytest.warns(VersionWarning, match="defaulting to version 1"):
        model = registry.get_model("m")
    assert model.version == 1 and model.training_metrics == {"v": 1.0}


def test_explicit_existing_version_raises_and_writes_nothing(registry, model_dir):
    registry.python.create_model("m", version=3).save(model_dir)
    with pytest.raises(ModelAlreadyExistsError, match="'m' version 3 already exists"):
        registry.python.create_model("m", version=3).save(model_dir)
    assert [m.version for m in registry.get_models("m")] == [3]
    assert not any((registry.root / ".tmp").iterdir())


def test_auto_version_continues_after_explicit_version(registry, model_dir):
    registry.python.create_model("m", version=5).save(model_dir)
    assert registry.python.create_model("m").save(model_dir).version == 6


def test_missing_model_and_version_errors_name_what_exists(registry, model_dir):
    registry.python.create_model("fraud_model").save(model_dir)
    with pytest.raises(NotFoundError, match="Did you mean 'fraud_model'"):
        registry.get_model("fraud_modl", 1)
    with pytest.raises(NotFoundError, match="has no version 4. Existing versions: 1"):
        registry.get_model("fraud_model", 4)


def test_save_single_file(registry, model_dir):
    model = registry.python.create_model("m").save(model_dir / "weights.bin")
    assert [e["path"] for e in model.manifest["files"]] == ["history/0000/record.json",
                                                            "weights.bin"]


def test_saving_twice_is_refused(registry, model_dir):
    model = registry.python.create_model("m").save(model_dir)
    with pytest.raises(ModelAlreadyExistsError):
        model.save(model_dir)


def test_tags(registry, model_dir):
    model = registry.python.create_model("m", tags={"owner": "risk"}).save(model_dir)
    assert model.get_tags() == {"owner": "risk"}
    model.add_tag("pii", {"columns": ["card_id"]})
    model.add_tag("owner", "fraud-team")
    again = registry.get_model("m", 1)
    assert again.get_tag("pii") == {"columns": ["card_id"]}
    assert again.get_tags() == {"owner": "fraud-team", "pii": {"columns": ["card_id"]}}
    again.delete_tag("pii")
    assert model.get_tags() == {"owner": "fraud-team"}
    with pytest.raises(NotFoundError, match="no tag 'pii'"):
        model.get_tag("pii")
    with pytest.raises(NotFoundError):
        model.delete_tag("pii")


def test_download_copies_and_verifies(registry, model_dir, tmp_path):
    model = registry.python.create_model("m", input_example=[1, 2]).save(model_dir)
    out = model.download()
    assert isinstance(out, str)
    assert (Path(out) / "weights.bin").read_bytes() == b"\x00\x01weights"
    assert json.loads((Path(out) / "input_example.json").read_text()) == [1, 2]
    target = tmp_path / "dl"
    assert model.download(target) == str(target)
    assert (target / "sub" / "vocab.txt").exists()
    with pytest.raises(InvalidArgumentError, match="new or empty folder"):
        model.download(target)


def test_delete_removes_row_tags_and_files(registry, model_dir):
    first = registry.python.create_model("m", tags={"a": 1}).save(model_dir)
    second = registry.python.create_model("m").save(model_dir)
    path = first.model_path
    first.delete()
    assert not path.exists()
    assert [m.version for m in registry.get_models("m")] == [2]
    with pytest.raises(NotFoundError):
        registry.get_model("m", 1)
    with pytest.raises(ModelNotSavedError, match="save"):
        first.download()
    second.delete()
    assert not (registry.root / "m").exists()
    assert registry.get_models("m") == []


def test_unsaved_model_refuses_saved_only_operations(registry):
    model = registry.python.create_model("m")
    for call in (model.download, model.delete, model.get_tags, lambda: model.model_path):
        with pytest.raises(ModelNotSavedError, match="not saved"):
            call()


def test_torch_framework_records_torch_version(registry, model_dir):
    model = registry.torch.create_model("net").save(model_dir)
    assert model.manifest["framework"] == "torch"
    assert "torch" in model.manifest["libraries"]


def test_code_version_is_the_source_of_fstrain_not_the_cwd(registry, model_dir, tmp_path,
                                                           monkeypatch):
    import fstrain

    checkout = Path(fstrain.__file__).resolve().parents[1]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True,
                          text=True, check=False).stdout.strip()
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], cwd=repo, check=True)
    other = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                           text=True, check=True).stdout.strip()
    for cwd in (repo, tmp_path / "model_src"):  # another repository; no repository at all
        monkeypatch.chdir(cwd)
        manifest = registry.python.create_model("m").save(model_dir).manifest
        assert manifest["git_commit"] != other
        assert manifest["git_commit"] == (head or None)
        code = manifest["code_version"]
        assert code["fstrain_version"] == metadata.version("fstrain")
        assert code["source_commit"] == manifest["git_commit"]


def test_a_wheel_records_the_commit_stamped_at_build(tmp_path):
    from fstrain.kernel.build_info import COMMIT_FILE, source_info

    package = tmp_path / "site" / "fstrain"
    package.mkdir(parents=True)
    (package / COMMIT_FILE).write_text("a" * 40 + "\n")
    info = source_info.__wrapped__(package)
    assert info["source_commit"] == "a" * 40 and info["source"] == "build"
    assert source_info.__wrapped__(tmp_path / "nowhere")["source_commit"] is None


def test_project_returns_a_local_registry(tmp_path, model_dir):
    mr = Project(tmp_path / "store").get_model_registry()
    assert isinstance(mr, LocalModelRegistry)
    assert isinstance(mr, ModelRegistry)
    assert (
        mr.python.create_model("m")
        .save(model_dir)
        .model_path.is_relative_to(tmp_path / "store" / "model_registry")
    )


def test_the_jobs_wheel_carries_the_commit_it_was_built_from(fstrain_wheel):
    import zipfile

    import fstrain

    checkout = Path(fstrain.__file__).resolve().parents[1]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True,
                          text=True, check=True).stdout.strip()
    with zipfile.ZipFile(fstrain_wheel) as zf:
        assert zf.read("fstrain/_source_commit.txt").decode().strip() == head
    assert not (checkout / "fstrain" / "_source_commit.txt").exists()  # the checkout is untouched
