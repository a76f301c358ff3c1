"""JAX/Flax MLP: explicit state, pure jitted update, separate PRNG keys, checkpoints, resume."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from fstrain.kernel.errors import ConfigError
from fstrain.trainers import load_predictor, train

CFG = {"model": "flax_mlp", "imbalance": "class_weight",
       "params": {"epochs": 6, "patience": 3, "hidden_sizes": [16], "learning_rate": 0.01,
                  "batch_size": 64, "dropout": 0.2}}
LINEAGE = {"training_dataset": "toy", "version": 1}


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def full(binary_data, tmp_path_factory):
    X_tr, y_tr, X_va, y_va = binary_data
    workdir = tmp_path_factory.mktemp("flax")
    return train(CFG, X_tr, y_tr, X_va, y_va, workdir=workdir, lineage=LINEAGE), workdir


def test_keys_are_separate_recorded_and_the_best_epoch_is_kept(full):
    result, _ = full
    keys = result.model.arch["prng_keys"]
    assert set(keys) == {"init", "dropout", "shuffle"} and len({tuple(v) for v in
                                                                  keys.values()}) == 3
    assert result.model.arch["seed"] == 42
    best = result.best_iteration
    scores = [row["val_auc"] for row in result.history]
    assert scores[best] == max(scores) and result.metrics["auc"] == pytest.approx(scores[best])
    assert result.metrics["auc"] > 0.75
    curves = result.curves
    assert curves.unit == "epoch" and curves.best_step == best and len(curves) == len(scores)
    assert None not in curves.train_loss + curves.train_metric
    lrs = [row["lr"] for row in result.history]  # optax cosine decay
    assert all(a > b for a, b in zip(lrs, lrs[1:]))


def test_interrupted_run_resumes_to_the_same_parameters(full, binary_data, tmp_path):
    result, _ = full
    X_tr, y_tr, X_va, y_va = binary_data

    def stop_after_epoch_1(row):
        if row["epoch"] == 1:
            raise Interrupted

    with pytest.raises(Interrupted):
        train(CFG, X_tr, y_tr, X_va, y_va, workdir=tmp_path, lineage=LINEAGE,
              report=stop_after_epoch_1)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["ckpt_00000.json", "ckpt_00000.msgpack", "ckpt_00001.json",
                     "ckpt_00001.msgpack"]
    resumed = train(CFG, X_tr, y_tr, X_va, y_va, workdir=tmp_path, lineage=LINEAGE, resume=True)
    assert resumed.extra["resumed_from"] == 2
    assert resumed.history == result.history
    np.testing.assert_array_equal(resumed.model.predict_proba(X_va),
                                  result.model.predict_proba(X_va))


def test_resume_refuses_another_config_lineage_or_changed_bytes(full, binary_data, tmp_path):
    _, workdir = full
    X_tr, y_tr, X_va, y_va = binary_data
    shutil.copytree(workdir / "checkpoints", tmp_path / "checkpoints")
    other = {**CFG, "seed": 7}
    with pytest.raises(ConfigError, match="another config or training dataset"):
        train(other, X_tr, y_tr, X_va, y_va, workdir=tmp_path, lineage=LINEAGE, resume=True)
    with pytest.raises(ConfigError, match="another config or training dataset"):
        train(CFG, X_tr, y_tr, X_va, y_va, workdir=tmp_path, lineage={"version": 2},
              resume=True)
    newest = sorted((tmp_path / "checkpoints").glob("*.msgpack"))[-1]
    newest.write_bytes(newest.read_bytes()[:-1] + b"\x00")
    with pytest.raises(ConfigError, match="does not match the sha256"):
        train(CFG, X_tr, y_tr, X_va, y_va, workdir=tmp_path, lineage=LINEAGE, resume=True)
    with pytest.raises(ConfigError, match="no Flax checkpoint"):
        train(CFG, X_tr, y_tr, X_va, y_va, workdir=tmp_path / "empty", resume=True)


def test_saved_as_safetensors_and_reloaded(full, binary_data, tmp_path):
    result, _ = full
    info = result.model.save(tmp_path / "m")
    assert "model/flax_params.safetensors" in info["files"]
    config = json.loads((tmp_path / "m" / "model" / "flax_config.json").read_text())
    assert config["prng_keys"] == result.model.arch["prng_keys"]
    loaded = load_predictor(tmp_path / "m")
    X_va = binary_data[2]
    np.testing.assert_array_equal(loaded.predict_proba(X_va), result.model.predict_proba(X_va))
