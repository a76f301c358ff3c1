"""Label-noise finding: injected label flips are found far above chance, by primary key, with
the feature-group commits; dropping them trains on the rest; options are checked."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app
from fstrain.trainers.label_issues import label_issues_step
from fstrain.trainers import load_config
from pipelines.training import TrainingPipelineConfig

N, FLIPPED = 800, 40


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    """A clean rule (x1 + x2 > 0) whose label is flipped on 40 known ids."""
    import feature_store

    project = feature_store.login(root=tmp_path_factory.mktemp("noise") / "store")
    fs = project.get_feature_store()
    rng = np.random.default_rng(3)
    x1, x2 = rng.normal(size=N), rng.normal(size=N)
    label = (x1 + x2 > 0).astype(np.int64)
    flipped = np.sort(rng.choice(N, size=FLIPPED, replace=False))
    label[flipped] = 1 - label[flipped]
    frame = pd.DataFrame({"id": np.arange(N) + 1000, "x1": x1, "x2": x2, "label": label})
    fg = fs.get_or_create_feature_group("noisy", version=1, primary_key=["id"])
    fg.insert(frame)
    fv = fs.create_feature_view("noisy_view", query=fg.select_all(), labels=["label"])
    version, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=1)
    return fv, version, set((flipped + 1000).tolist())


def _splits(fv, version):
    X_tr, X_va, _X_te, y_tr, y_va, _y_te = fv.get_train_validation_test_split(version)
    assert "id" not in X_tr.columns  # the key is not a feature
    return X_tr, X_va, y_tr, y_va


def test_injected_flips_are_found_far_above_chance_and_dropped(noisy, tmp_path) -> None:
    fv, version, flipped = noisy
    cfg = load_config({"model": "xgboost", "params": {"n_estimators": 30, "max_depth": 2}})
    splits = _splits(fv, version)
    issues, cv, kept = label_issues_step(fv, version, None, cfg, splits, k=3,
                                         workdir=tmp_path, drop=True)
    found = set(issues.issues["id"].tolist())
    in_train = flipped & set(fv.get_train_validation_test_split(version, primary_key=True)[0]["id"])
    precision = len(found & in_train) / len(found)
    assert precision > 0.5 > 3 * FLIPPED / N  # chance would be about 5%
    assert len(found & in_train) / len(in_train) > 0.6
    assert issues.feature_group_commits == {"noisy:1": 1}
    assert cv["k"] == 3 and issues.dropped
    assert len(kept[0]) == len(splits[0]) - len(found) == len(kept[2])
    # the suspects are ranked: the lowest label quality first
    assert issues.issues["label_quality"].is_monotonic_increasing
    files = issues.write(tmp_path)
    report = json.loads(files[0].read_text())
    assert report["n_issues"] == len(found) and report["issues"][0]["id"] in found


def test_options_need_their_partners() -> None:
    with pytest.raises(ValueError, match="--cv 5 --find-label-issues"):
        TrainingPipelineConfig(use_case="adult", training_dataset_version=1,
                               find_label_issues=True)
    with pytest.raises(ValueError, match="add --cv K --find-label-issues"):
        TrainingPipelineConfig(use_case="adult", training_dataset_version=1, cv=3,
                               drop_label_issues=True)


@pytest.mark.slow
def test_cli_train_with_label_issues_dropped(tmp_path) -> None:
    root = str(tmp_path)
    runner = CliRunner()
    assert runner.invoke(app, ["features", "adult", "--sample", "2000", "--root", root]).exit_code == 0
    assert runner.invoke(app, ["dataset", "adult", "--root", root]).exit_code == 0
    result = runner.invoke(app, ["train", "adult", "-t", "1", "--cv", "3", "--find-label-issues",
                                 "--drop-label-issues", "--param", "n_estimators=40",
                                 "--root", root])
    assert result.exit_code == 0, result.output
    assert "dropped from training" in result.output
    model_dir = tmp_path / "model_registry" / "adult_income" / "1"
    manifest = (model_dir / "manifest.json").read_text()
    assert "label_issues.csv" in manifest and "label_issues.json" in manifest
    suspects = pd.read_csv(model_dir / "label_issues.csv")
    assert len(suspects) > 0 and "person_id" in suspects.columns
    import feature_store

    model = feature_store.login(root=root).get_model_registry().get_model("adult_income", 1)
    record = model.training_config["label_issues"]
    assert record["dropped_from_training"] and record["n_issues"] == len(suspects)
