"""`fstrain doctor` on real runs: an injected leak and untreated extreme imbalance are flagged,
a diverged torch run is diagnosed from its run folder, a record that the re-run cannot
reproduce is caught, and a healthy model passes (exit 0)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app
from fstrain.tools.doctor import diagnose


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A feature view whose `leak` column is the label plus a little noise; 3% positives."""
    import feature_store

    root = tmp_path_factory.mktemp("doctor") / "store"
    project = feature_store.login(root=root)
    fs = project.get_feature_store()
    rng = np.random.default_rng(0)
    n = 2000
    label = (rng.random(n) < 0.03).astype(np.int64)
    frame = pd.DataFrame({"id": np.arange(n), "x1": rng.normal(size=n), "x2": rng.normal(size=n),
                          "leak": label + rng.normal(0, 0.01, n), "label": label})
    fg = fs.get_or_create_feature_group("people", version=1, primary_key=["id"])
    fg.insert(frame)
    fv = fs.create_feature_view("people_view", query=fg.select(["x1", "x2", "leak", "label"]),
                                labels=["label"])
    version, _ = fv.create_train_validation_test_split(validation_size=0.25, test_size=0.2,
                                                        seed=1, stratify_column="label")
    return root, project, fv, version


def _register(project, fv, version, name, *, train_seed, record_seed, features=None,
              imbalance="none"):
    """Train XGBoost as a notebook would and register it with its curves and trainer config
    (``record_seed`` is the seed the record claims)."""
    from fstrain.trainers import load_config, train

    X_tr, X_va, _X_te, y_tr, y_va, _y_te = fv.get_train_validation_test_split(version)
    if features:
        X_tr, X_va = X_tr[features], X_va[features]
    # row and column sampling make the seed matter (plain hist boosting is seed-free)
    cfg = load_config({"model": "xgboost", "imbalance": imbalance, "seed": train_seed,
                       "params": {"n_estimators": 12, "subsample": 0.7,
                                  "colsample_bytree": 0.7}})
    with tempfile.TemporaryDirectory() as tmp:
        result = train(cfg, X_tr, y_tr, X_va, y_va, workdir=Path(tmp) / "w")
        model_dir = Path(tmp) / "m"
        model_dir.mkdir()
        result.model.save(model_dir)
        result.curves.write(model_dir)
        claimed = cfg.with_overrides({"seed": record_seed})
        model = project.get_model_registry().python.create_model(
            name, feature_view=fv, training_dataset_version=version,
            training_config={"trainer": claimed.model_dump(mode="json"),
                             "imbalance": result.imbalance, "device": "cpu",
                             "timings": {k: v for k, v in result.extra.items()
                                         if k.endswith("_seconds")}})
        model.save(str(model_dir))
    return model


def test_leak_and_untreated_imbalance_are_severe(store):
    root, project, fv, version = store
    _register(project, fv, version, "leaky", train_seed=0, record_seed=0)
    result = _cli(root, "doctor", "leaky", "--json", "--max-rows", "800")
    assert result.exit_code == 3, result.output
    report = json.loads(result.output)
    found = {f["check"]: f for f in report["findings"]}
    assert found["leakage"]["severity"] == "severe"
    assert [s["feature"] for s in found["leakage"]["evidence"]["suspects"]] == ["leak"]
    assert found["imbalance"]["severity"] == "severe"
    assert found["imbalance"]["evidence"]["minority_share"] < 0.05
    assert found["reproducibility"]["severity"] == "ok"  # same seeds, same first round
    assert found["input_pipeline"]["severity"] in ("ok", "warning")
    assert found["nan_loss"]["severity"] == "ok" and found["gpu"]["severity"] == "skipped"


def test_a_record_the_rerun_cannot_reproduce_is_severe(store):
    _root, project, fv, version = store
    model = _register(project, fv, version, "claims_other_seed", train_seed=7, record_seed=0,
                      features=["x1", "x2"], imbalance="scale_pos_weight")
    report = diagnose(project, f"{model.name}:{model.version}", max_rows=500)
    found = {f.check: f for f in report.findings}
    repro = found["reproducibility"]
    assert repro.severity == "severe" and "Not reproducible" in repro.title and report.severe
    assert found["leakage"].severity == "ok"  # the leak column is not among its inputs
    assert found["imbalance"].severity == "ok"  # treated with scale_pos_weight


def test_a_diverged_torch_run_is_diagnosed_from_its_run_folder(store):
    from fstrain.trainers import train
    from fstrain.trainers.divergence import TrainingDivergedError

    root, _project, fv, version = store
    X_tr, X_va, _X_te, y_tr, y_va, _y_te = fv.get_train_validation_test_split(version)
    cfg = {"model": "mlp", "torch": {"epochs": 2, "batch_size": 64, "lr": 1e30}}
    with pytest.raises(TrainingDivergedError, match="at epoch 0, batch 1"):
        train(cfg, X_tr, y_tr, X_va, y_va, workdir=Path(root) / "runs" / "people_mlp_td1")
    result = _cli(root, "doctor", "people_mlp_td1", "--json")
    assert result.exit_code == 3, result.output
    report = json.loads(result.output)
    nan = next(f for f in report["findings"] if f["check"] == "nan_loss")
    assert report["kind"] == "run" and nan["severity"] == "severe"
    assert (nan["evidence"]["epoch"], nan["evidence"]["batch"]) == (0, 1)
    text = _cli(root, "doctor", "people_mlp_td1").output
    assert "SEVERE" in text and "fix: Lower the learning rate" in text


def test_a_healthy_model_exits_zero(store):
    root, project, fv, version = store
    _register(project, fv, version, "healthy", train_seed=3, record_seed=3,
              features=["x1", "x2"], imbalance="scale_pos_weight")
    result = _cli(root, "doctor", "healthy:1", "--json", "--no-rerun", "--max-rows", "500")
    report = json.loads(result.output)
    assert result.exit_code == 0 and not report["severe"], result.output
    found = {f["check"]: f for f in report["findings"]}
    assert found["reproducibility"]["severity"] == "skipped"  # --no-rerun is honoured
    assert found["flat_loss"]["severity"] == "ok" and found["leakage"]["severity"] == "ok"
    assert _cli(root, "doctor", "no_such_model").exit_code == 2
    bad = _cli(root, "doctor", "healthy:x")
    assert bad.exit_code == 2 and "must be a positive integer" in bad.output
