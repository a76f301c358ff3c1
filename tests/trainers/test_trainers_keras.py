"""Keras 3 MLP on the torch backend: fit + callbacks, the explicit-gradient step, .keras files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fstrain.kernel.errors import ConfigError, FeatureStoreError
from fstrain.trainers import load_predictor, train

PARAMS = {"epochs": 15, "patience": 3, "hidden_sizes": [16], "learning_rate": 0.01,
          "batch_size": 64}


@pytest.fixture(scope="module")
def runs(binary_data, tmp_path_factory):
    X_tr, y_tr, X_va, y_va = binary_data
    out = {}
    for step in ("fit", "custom"):
        cfg = {"model": "keras_mlp", "imbalance": "class_weight",
               "params": {**PARAMS, "train_step": step}}
        out[step] = train(cfg, X_tr, y_tr, X_va, y_va,
                          workdir=tmp_path_factory.mktemp(f"keras-{step}"))
    return out


def test_fit_with_callbacks_early_stops_and_keeps_the_best_epoch(runs):
    import keras

    result = runs["fit"]
    assert keras.backend.backend() == "torch" and result.model.arch["backend"] == "torch"
    history = result.history
    best = result.best_iteration
    assert len(history) == best + 1 + 3 < 15  # EarlyStopping, patience 3
    aucs = [row["val_auc"] for row in history]
    assert aucs[best] == max(aucs)
    # ModelCheckpoint's best weights are the returned model's
    assert result.metrics["auc"] == pytest.approx(aucs[best], abs=1e-9)
    assert result.metrics["auc"] > 0.75
    lrs = [row["lr"] for row in history]  # cosine decay, one value per epoch
    assert lrs[0] == pytest.approx(0.01) and all(a > b for a, b in zip(lrs, lrs[1:]))
    assert result.imbalance["applied_to"] == "train" and "class_weight" in result.imbalance
    curves = result.curves
    assert curves.unit == "epoch" and curves.best_step == best and curves.val_metric == aucs
    assert None not in curves.train_loss + curves.train_metric + curves.val_loss
    assert curves.train_loss[-1] < curves.train_loss[0]


def test_the_explicit_gradient_step_matches_fits_own_step(runs, binary_data):
    fit, custom = runs["fit"], runs["custom"]
    assert type(custom.model.model).__name__ == "ExplicitStepMLP"
    assert type(fit.model.model).__name__ == "Sequential"
    X_va = binary_data[2]
    # the same forward, loss, backward and AdamW update: the same weights, bit for bit
    np.testing.assert_array_equal(custom.model.predict_proba(X_va), fit.model.predict_proba(X_va))
    assert [r["train_objective"] for r in custom.history] == pytest.approx(
        [r["train_objective"] for r in fit.history], rel=1e-6)


@pytest.mark.parametrize("step", ["fit", "custom"])
def test_saved_as_keras_and_reloaded_in_safe_mode(runs, binary_data, tmp_path, step):
    result = runs[step]
    info = result.model.save(tmp_path / "m")
    assert "model/model.keras" in info["files"]
    meta = json.loads((tmp_path / "m" / "model" / "keras_meta.json").read_text())
    assert meta["backend"] == "torch"
    loaded = load_predictor(tmp_path / "m")
    X_va = binary_data[2]
    np.testing.assert_array_equal(loaded.predict_proba(X_va), result.model.predict_proba(X_va))


def test_safe_mode_refuses_a_lambda_layer(tmp_path):
    import keras

    from fstrain.trainers import formats

    model = keras.Sequential([keras.Input((2,)), keras.layers.Lambda(lambda t: t * 2)])
    formats.save_keras(model, tmp_path / "m")
    with pytest.raises(ValueError, match="(?i)unsafe|safe_mode"):
        formats.load_keras(tmp_path / "m")


def test_bad_options_are_refused(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    with pytest.raises(ConfigError, match="params.train_step .* must be one of fit, custom"):
        train({"model": "keras_mlp", "params": {"train_step": "manual"}}, X_tr, y_tr, X_va, y_va,
              workdir=tmp_path)
    with pytest.raises(FeatureStoreError, match="hidden_sizes"):
        train({"model": "keras_mlp", "params": {"hidden_sizes": []}}, X_tr, y_tr, X_va, y_va,
              workdir=tmp_path)
