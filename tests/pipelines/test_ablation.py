"""Ablations: a pure-noise feature's interval holds zero, the signal group's does not; the table
and plot are attached to the model version; bad items are refused naming what exists."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import ConfigError, NotFoundError
from fstrain.tools.ablation import ablate_model, paired_delta


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """signal group (s1, s2 drive the label) + noise group (pure noise), an XGBoost model."""
    import feature_store
    from fstrain.trainers import load_config, train

    project = feature_store.login(root=tmp_path_factory.mktemp("ablate") / "store")
    fs = project.get_feature_store()
    rng = np.random.default_rng(5)
    n = 1200
    s1, s2 = rng.normal(size=n), rng.normal(size=n)
    label = (s1 + 0.5 * s2 + rng.normal(0, 0.5, n) > 0).astype(np.int64)
    signal = fs.get_or_create_feature_group("signal", version=1, primary_key=["id"])
    signal.insert(pd.DataFrame({"id": np.arange(n), "s1": s1, "s2": s2, "label": label}))
    noise = fs.get_or_create_feature_group("noise", version=1, primary_key=["id"])
    noise.insert(pd.DataFrame({"id": np.arange(n), "junk": rng.normal(size=n)}))
    fv = fs.create_feature_view("ablate_view", query=signal.select_all().join(noise.select(["junk"])),
                                labels=["label"])
    version, _ = fv.create_train_validation_test_split(validation_size=0.3, test_size=0.2, seed=1)
    X_tr, X_va, _X_te, y_tr, y_va, _y_te = fv.get_train_validation_test_split(version)
    cfg = load_config({"model": "xgboost", "params": {"n_estimators": 40, "max_depth": 3}})
    with tempfile.TemporaryDirectory() as tmp:
        result = train(cfg, X_tr, y_tr, X_va, y_va, workdir=Path(tmp) / "w")
        model_dir = Path(tmp) / "m"
        model_dir.mkdir()
        result.model.save(model_dir)
        model = project.get_model_registry().python.create_model(
            "ablate_model", feature_view=fv, training_dataset_version=version,
            training_config={"trainer": cfg.model_dump(mode="json")})
        model.save(str(model_dir))
    return fv, model


def test_noise_interval_holds_zero_and_signal_group_helps(registered) -> None:
    fv, model = registered
    result = ablate_model(fv, model, groups=["signal"], features=["junk"], resamples=100)
    rows = {r["item"]: r for r in result.rows}
    assert result.metric == "roc_auc" and result.reference > 0.8
    junk = rows["feature junk"]
    assert junk["lower"] <= 0.0 <= junk["upper"] and junk["verdict"] == "no clear effect"
    group = rows["group signal"]
    assert group["dropped_columns"] == ["s1", "s2"]
    assert group["upper"] < 0 and group["verdict"] == "helps (worse without)"
    files = model.manifest["files"]
    stored = [f["path"] for f in files if "ablations/" in f["path"]]
    assert {Path(p).name for p in stored} == {"ablation.json", "ablation.csv", "ablation.png"}
    folder = Path(model.model_path) / Path(stored[0]).parent
    report = json.loads((folder / "ablation.json").read_text())
    assert report["items"][1]["item"] == "feature junk"
    assert (folder / "ablation.png").read_bytes()[:4] == b"\x89PNG"


def test_unknown_items_are_refused_naming_what_exists(registered) -> None:
    fv, model = registered
    with pytest.raises(NotFoundError, match="groups: noise, signal"):
        ablate_model(fv, model, groups=["weather"], features=[])
    with pytest.raises(NotFoundError, match="'nope'.*features: s1, s2, junk"):
        ablate_model(fv, model, groups=[], features=["nope"])
    with pytest.raises(ConfigError, match="at least one"):
        ablate_model(fv, model, groups=[], features=[])
    with pytest.raises(ConfigError, match="'validation' or 'test'"):
        ablate_model(fv, model, groups=["noise"], features=[], split="train")


def test_paired_delta_is_zero_for_identical_models_and_seeded() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    s = rng.random(200)
    assert paired_delta("roc_auc", y, s, s, resamples=50, seed=1) == (0.0, 0.0, 0.0)
    other = rng.random(200)
    assert paired_delta("rmse", y.astype(float), s, other, resamples=50, seed=3) == \
        paired_delta("rmse", y.astype(float), s, other, resamples=50, seed=3)
