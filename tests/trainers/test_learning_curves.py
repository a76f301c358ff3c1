"""Every trainer fills the learning-curve schema; the torch loop stops on a NaN loss."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fstrain.trainers import train
from fstrain.trainers.curves import CURVES_FILE, LearningCurves, read_curves


def _check(curves: LearningCurves, unit: str) -> None:
    assert curves.unit == unit and len(curves) >= 1
    for series in ("train_loss", "val_loss", "train_metric", "val_metric"):
        values = getattr(curves, series)
        assert len(values) == len(curves.steps) and all(v is not None for v in values), series


@pytest.mark.parametrize("model,params,unit", [
    ("xgboost", {"n_estimators": 15}, "round"),
    ("lightgbm", {"n_estimators": 15}, "round"),
    ("sklearn_logreg", {}, "fit"),
    ("sklearn_rf", {"n_estimators": 12}, "trees"),
])
def test_tabular_trainers_fill_the_curves(binary_data, tmp_path, model, params, unit):
    X_tr, y_tr, X_va, y_va = binary_data
    result = train({"model": model, "params": params}, X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    curves = result.curves
    _check(curves, unit)
    assert curves.metric == result.metric and curves.loss == "logloss"
    if unit == "round":
        assert len(curves) == len(result.history) and curves.best_step == result.best_iteration
        # the boosted train loss falls round after round
        assert curves.train_loss[-1] < curves.train_loss[0]
        # the validation values are the trainer's own history
        assert curves.val_metric[0] == pytest.approx(result.history[0][f"val_{result.metric}"])
    if unit == "trees":
        assert curves.steps[0] == 1 and curves.steps[-1] == 12
    # the saved file round-trips
    curves.write(tmp_path)
    again = read_curves(tmp_path)
    assert again is not None and again.to_dict() == json.loads((tmp_path / CURVES_FILE).read_text())


def test_torch_curves_have_grad_norms_and_input_time(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    cfg = {"model": "mlp", "torch": {"epochs": 2, "batch_size": 128, "checkpoint": False}}
    result = train(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    curves = result.curves
    _check(curves, "epoch")
    assert curves.steps == [0, 1]
    assert all(v is not None and v > 0 for v in curves.extra["grad_norm_max"])
    assert all(v is not None and v >= 0 for v in curves.extra["data_seconds"])
    assert curves.extra["train_objective"] == [r["train_loss"] for r in result.history]


def test_the_loop_stops_on_a_nan_loss_naming_epoch_and_batch(tmp_path):
    import torch

    from fstrain.trainers.config import TorchOptions
    from fstrain.trainers.divergence import TrainingDivergedError
    from fstrain.trainers.loop import LoopSpec, fit
    from fstrain.trainers.torch_inputs import ArrayDataset

    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    X[:, 2] = np.nan  # every row: the first batch's loss is NaN
    opts = TorchOptions(epochs=3, batch_size=16, checkpoint=True)
    spec = LoopSpec(model=torch.nn.Linear(3, 2), train_set=ArrayDataset(X, y),
                    val_set=ArrayDataset(X[:8], y[:8]), n_classes=2, options=opts, seed=0,
                    metric="logloss", mode="min", checkpoint_dir=tmp_path / "ck")
    with pytest.raises(TrainingDivergedError, match=r"loss was nan at epoch 0, batch 0") as err:
        fit(spec)
    assert (err.value.epoch, err.value.batch, err.value.global_step) == (0, 0, 0)
    written = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert written == ["diverged.json"]  # no checkpoint of a diverged model
    record = json.loads((tmp_path / "ck" / "diverged.json").read_text())
    assert (record["epoch"], record["batch"], record["value"]) == (0, 0, "nan")


def test_schema_refuses_ragged_series_and_unknown_units():
    from fstrain.kernel.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="unit"):
        LearningCurves(unit="batch", loss="logloss", metric="auc", mode="max")
    good = LearningCurves(unit="epoch", loss="logloss", metric="auc", mode="max")
    good.add(0, train_loss=0.5, val_loss=float("nan"), train_metric=0.7, val_metric=0.6)
    assert good.val_loss == [None] and good.non_finite == {"val_loss": 1}
    data = good.to_dict()
    data["val_loss"] = []
    with pytest.raises(InvalidArgumentError, match="one value per step"):
        LearningCurves.from_dict(data)
