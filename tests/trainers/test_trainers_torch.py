"""PyTorch trainers: MLP and CNN end to end, loop options, checkpoints, resume, safe I/O."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fstrain.kernel.errors import ConfigError
from fstrain.trainers import load_predictor, train

WORKER = Path(__file__).with_name("resume_worker.py")
FAST = {"epochs": 6, "batch_size": 64, "lr": 0.01, "device": "cpu"}


def test_mlp_end_to_end_and_round_trip(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    result = train({"model": "mlp", "torch": FAST, "imbalance": "class_weight"},
                   X_tr, y_tr, X_va, y_va, workdir=tmp_path / "run")
    assert result.metrics["auc"] > 0.7, result.metrics
    assert len(result.history) >= 1 and {"train_loss", "val_auc", "lr"} <= set(result.history[0])
    assert result.imbalance["strategy"] == "class_weight"
    ck = tmp_path / "run" / "checkpoints"
    for name in ("last", "best"):
        files = sorted(p.name for p in (ck / name).iterdir())
        assert files == ["model.safetensors", "state.json", "state.safetensors"]
    info = result.model.save(tmp_path / "model")
    assert info["framework"] == "torch" and "model/model.safetensors" in info["files"]
    loaded = load_predictor(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict_proba(X_va), result.model.predict_proba(X_va))
    target = loaded.explain_target
    assert target.transform(X_va.iloc[:4]).shape[0] == 4


def test_cnn_on_image_paths(image_data, tmp_path):
    X_tr, y_tr, X_va, y_va = image_data
    result = train({"model": "cnn", "params": {"channels": [8, 16], "hidden": 32},
                    "torch": {**FAST, "epochs": 4, "batch_size": 32, "lr": 0.005}},
                   X_tr, y_tr, X_va, y_va, workdir=tmp_path / "run")
    assert result.metrics["accuracy"] > 0.6, result.history  # chance is 1/3
    proba = result.model.predict_proba(X_va)
    assert proba.shape == (len(X_va), 3)
    result.model.save(tmp_path / "model")
    loaded = load_predictor(tmp_path / "model")
    np.testing.assert_array_equal(loaded.predict_proba(X_va), proba)
    assert loaded.explain_target.transform(X_va.iloc[:2]).shape == (2, 1, 28, 28)


@pytest.mark.parametrize(
    "opts",
    [
        {"scheduler": "one_cycle", "grad_accum_steps": 3, "grad_clip": 0.5},
        {"scheduler": "plateau", "amp": "bf16", "grad_clip": None},
        {"scheduler": "warmup_cosine", "warmup_steps": 4, "amp": "fp16", "num_workers": 1},
    ],
)
def test_loop_options(opts, multiclass_data, tmp_path):
    X_tr, y_tr, X_va, y_va = multiclass_data
    result = train({"model": "mlp", "torch": {**FAST, "epochs": 3, **opts}},
                   X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    assert result.metrics["accuracy"] > 0.5, result.history
    if opts.get("amp") in ("bf16", "fp16"):
        assert result.extra["amp"] == {"bf16": "bfloat16", "fp16": "float16"}[opts["amp"]]
    meta = json.loads((tmp_path / "checkpoints" / "last" / "state.json").read_text())
    assert meta["loop"]["epoch"] == len(result.history)
    if opts["scheduler"] == "warmup_cosine":
        assert result.history[0]["lr"] < FAST["lr"]  # still warming up / decaying


def test_no_weight_decay_on_bias_and_norm():
    from torch import nn

    from fstrain.trainers.torch_optim import param_groups
    from fstrain.trainers.nets import MLP

    net = MLP(5, 2, hidden_sizes=[4], norm="layer")
    decay, no_decay = param_groups(net, 0.1)
    names = {id(p): n for n, p in net.named_parameters()}
    # Linear(5,4) -> LayerNorm -> ReLU -> Dropout -> Linear(4,2)
    assert sorted(names[id(p)] for p in decay["params"]) == ["net.0.weight", "net.4.weight"]
    assert sorted(names[id(p)] for p in no_decay["params"]) == [
        "net.0.bias", "net.1.bias", "net.1.weight", "net.4.bias"]
    assert no_decay["weight_decay"] == 0.0 and isinstance(net.net[1], nn.LayerNorm)


def _run_worker(workdir: Path, mode: str, kill_at: int = -1) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WORKER), str(workdir), mode, str(kill_at)],
                          capture_output=True, text=True, timeout=300)


def test_resume_after_sigkill_equals_uninterrupted(tmp_path, assert_resumed_run_equals_full):
    full, killed = tmp_path / "full", tmp_path / "killed"
    proc = _run_worker(full, "full")
    assert proc.returncode == 0, proc.stderr
    proc = _run_worker(killed, "kill", 27)  # last checkpoint at step 24 (mid-epoch)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (killed / "final.safetensors").exists()
    meta = json.loads((killed / "checkpoints" / "last" / "state.json").read_text())
    assert meta["loop"]["global_step"] == 24 and meta["loop"]["batch_in_epoch"] > 0
    proc = _run_worker(killed, "resume")
    assert proc.returncode == 0, proc.stderr
    assert_resumed_run_equals_full(full, killed, resumed_from_step=24)


def test_resume_refuses_other_config_or_lineage(binary_data, tmp_path):
    from fstrain.trainers.config import load_config
    from fstrain.trainers.torch_models import train_torch

    X_tr, y_tr, X_va, y_va = binary_data
    cfg = load_config({"model": "mlp", "torch": {**FAST, "epochs": 1}})
    lineage = {"training_dataset": "adult", "version": 3}
    train_torch(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path, lineage=lineage)
    other = cfg.with_overrides({"lr": 0.02})
    with pytest.raises(ConfigError, match=r"config\.torch\.lr: checkpoint has 0\.01, now 0\.02"):
        train_torch(other, X_tr, y_tr, X_va, y_va, workdir=tmp_path, lineage=lineage, resume=True)
    with pytest.raises(ConfigError, match=r"lineage\.version: checkpoint has 3, now 4"):
        train_torch(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path,
                    lineage={**lineage, "version": 4}, resume=True)
    # same config + lineage resumes (nothing left to do: the one epoch is done)
    res = train_torch(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path, lineage=lineage, resume=True)
    assert res.extra["resumed_from"]["epoch"] == 1 and len(res.history) == 1
