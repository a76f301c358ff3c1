"""Overfit-one-batch smoke check."""

from __future__ import annotations

import pytest

from fstrain.trainers import SmokeCheckError, smoke_check


@pytest.mark.parametrize("model", ["mlp", "xgboost", "lightgbm", "sklearn_rf"])
def test_healthy_models_overfit_one_batch(model, binary_data):
    X_tr, y_tr, _, _ = binary_data
    result = smoke_check({"model": model}, X_tr, y_tr)
    assert result.final_loss < 0.05 < result.initial_loss


def test_cnn_overfits_one_batch(image_data):
    X_tr, y_tr, _, _ = image_data
    result = smoke_check({"model": "cnn", "params": {"channels": [4, 8], "hidden": 16}},
                         X_tr, y_tr, batch_size=16)
    assert result.final_loss < 0.05


def test_frozen_model_is_caught(binary_data):
    from fstrain.trainers.nets import MLP

    X_tr, y_tr, _, _ = binary_data
    def frozen(arch):
        net = MLP(arch["n_features"], arch["n_classes"])
        for p in net.parameters():
            p.requires_grad_(False)
        return net

    with pytest.raises(SmokeCheckError, match="every parameter is frozen"):
        smoke_check({"model": "mlp"}, X_tr, y_tr, model=frozen)


def test_frozen_body_with_tiny_head_is_caught(binary_data):
    from torch import nn

    X_tr, y_tr, _, _ = binary_data
    # only a zero-initialised bias learns: the loss cannot reach ~0 on a mixed batch
    def head_only(arch):
        net = nn.Sequential(nn.Linear(arch["n_features"], 2))
        net[0].weight.requires_grad_(False)
        net[0].weight.data.zero_()
        return net

    with pytest.raises(SmokeCheckError,
                       match=r"loss is .*started at.*frozen parameter tensor.*0\.weight"):
        smoke_check({"model": "mlp"}, X_tr, y_tr, model=head_only, max_steps=100)


def test_softmax_head_is_diagnosed(binary_data):
    from torch import nn

    from fstrain.trainers.nets import MLP

    X_tr, y_tr, _, _ = binary_data
    def softmax_head(arch):
        return nn.Sequential(MLP(arch["n_features"], 2, dropout=0.0), nn.Softmax(dim=1))

    with pytest.raises(SmokeCheckError, match="remove the final softmax"):
        smoke_check({"model": "mlp"}, X_tr, y_tr, model=softmax_head, max_steps=100)


def test_contradicting_labels_are_caught(binary_data):
    X_tr, y_tr, _, _ = binary_data
    X = X_tr.iloc[[0] * 32].reset_index(drop=True)  # one row repeated...
    y = y_tr.iloc[:32].reset_index(drop=True).copy()
    y["label"] = [0, 1] * 16  # ...with both labels
    with pytest.raises(SmokeCheckError, match="broken labels"):
        smoke_check({"model": "mlp"}, X, y, max_steps=60)
