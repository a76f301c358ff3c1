"""Changed, missing and extra files are detected on download, verify and load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from fstrain.kernel.errors import IntegrityError
from fstrain.trainers.formats import load_xgboost, save_xgboost


@pytest.fixture
def saved(registry, model_dir):
    return registry.python.create_model("m").save(model_dir)


def test_changed_file_is_named(saved):
    (saved.model_path / "sub" / "vocab.txt").write_text("a\nc\n")  # same size, other content
    with pytest.raises(IntegrityError, match=r"changed file\(s\) 'sub/vocab.txt'"):
        saved.download()
    with pytest.raises(IntegrityError, match="sub/vocab.txt"):
        saved.verify()


def test_missing_file_is_named(saved):
    (saved.model_path / "weights.bin").unlink()
    with pytest.raises(IntegrityError, match=r"missing file\(s\) 'weights.bin'"):
        saved.download()


def test_extra_file_is_named(saved):
    (saved.model_path / "images").mkdir()
    (saved.model_path / "images" / "evil.png").write_bytes(b"x")
    with pytest.raises(IntegrityError, match=r"extra file\(s\) 'images/evil.png'"):
        saved.verify()


def test_changed_manifest_is_detected(saved):
    path = saved.model_path / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["metrics"] = {"auc": 1.0}
    path.write_text(json.dumps(manifest))
    with pytest.raises(IntegrityError, match="manifest.json' was changed"):
        saved.download()
    with pytest.raises(IntegrityError):
        _ = saved.manifest


def test_failed_download_leaves_target_empty(saved, tmp_path):
    (saved.model_path / "weights.bin").write_bytes(b"tampered")
    target = tmp_path / "dl"
    target.mkdir()
    with pytest.raises(IntegrityError):
        saved.download(target)
    assert list(target.iterdir()) == []


def test_untouched_version_verifies(saved):
    saved.verify()
    assert Path(saved.download()).is_dir()


def test_load_functions_verify_a_downloaded_folder(registry, tmp_path):
    rng = np.random.default_rng(0)
    booster = xgb.train({"max_depth": 2}, xgb.DMatrix(rng.random((40, 3)), label=rng.random(40)), 3)
    save_xgboost(booster, tmp_path / "xgb")
    model = registry.python.create_model("xgb").save(tmp_path / "xgb")
    folder = Path(model.download())
    assert isinstance(load_xgboost(folder), xgb.Booster)
    meta = folder / "xgboost_meta.json"
    meta.write_text(meta.read_text().replace('"Booster"', '"XGBRegressor"'))
    with pytest.raises(IntegrityError, match="xgboost_meta.json"):
        load_xgboost(folder)


def test_loading_from_a_subfolder_verifies_the_whole_version(registry, tmp_path):
    rng = np.random.default_rng(1)
    booster = xgb.train({}, xgb.DMatrix(rng.random((30, 2)), label=rng.random(30)), 2)
    src = tmp_path / "src"
    save_xgboost(booster, src / "model")
    (src / "preprocessor").mkdir()
    (src / "preprocessor" / "params.json").write_text('{"mean": 0}')
    folder = Path(registry.python.create_model("sub").save(src).download())
    assert isinstance(load_xgboost(folder / "model"), xgb.Booster)
    (folder / "preprocessor" / "params.json").write_text('{"mean": 1}')
    with pytest.raises(IntegrityError, match="preprocessor/params.json"):
        load_xgboost(folder / "model")
