"""Optimiser practice of the torch loop: SGD, SGDR, LR scaling, label smoothing, mixup, image
shifts, activation checkpointing — each option changes what it should, and each option that
would not apply is refused."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers import train
from fstrain.trainers.config import TorchOptions, load_config
from fstrain.trainers.augment import mixup_draw, shift_images
from fstrain.trainers.nets import MLP, SmallCNN
from fstrain.trainers.torch_optim import effective_lr, make_optimizer, make_scheduler

FAST = {"epochs": 2, "batch_size": 64, "lr": 0.01, "device": "cpu", "checkpoint": False}


def _fresh(root):
    """A new workdir under ``root`` for each run."""
    import tempfile

    return tempfile.mkdtemp(dir=root)


def _opts(**kw) -> TorchOptions:
    return load_config({"model": "mlp", "torch": kw}).torch


def test_sgd_has_momentum_buffers_and_same_groups():
    net = MLP(5, 2, hidden_sizes=[4])
    opt = make_optimizer(net, _opts(optimizer="sgd", nesterov=True, weight_decay=0.1))
    assert isinstance(opt, torch.optim.SGD)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]
    assert opt.param_groups[0]["momentum"] == 0.9 and opt.param_groups[0]["nesterov"]
    net(torch.randn(8, 5)).sum().backward()
    opt.step()
    assert all("momentum_buffer" in opt.state[p] for p in net.parameters())
    adam = make_optimizer(net, _opts())
    assert isinstance(adam, torch.optim.AdamW)


def test_plateau_refuses_a_metric_mode_by_name():
    """The plateau scheduler follows the metric up or down; another mode is refused by the
    project's error naming it (torch's ReduceLROnPlateau raised a bare ValueError)."""
    net = MLP(3, 2, hidden_sizes=[4])
    opts = _opts(scheduler="plateau")
    with pytest.raises(InvalidArgumentError, match="got mode 'maximum'"):
        make_scheduler(make_optimizer(net, opts), opts, 100, "maximum")
    sched, per_step = make_scheduler(make_optimizer(net, opts), opts, 100, "max")
    assert isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau) and sched.mode == "max"
    assert not per_step


def test_the_loop_refuses_a_train_set_without_a_length():
    """The loop samples rows of a map-style dataset; one without __len__ (an iterable
    dataset) is refused by name before training (it failed with len()'s TypeError)."""
    from fstrain.trainers.loop import LoopSpec, fit

    class Rows(torch.utils.data.IterableDataset):
        def __iter__(self):
            yield torch.zeros(3), torch.tensor(0)

    spec = LoopSpec(model=MLP(3, 2, hidden_sizes=[4]), train_set=Rows(), val_set=Rows(),
                    n_classes=2, options=_opts(epochs=1, device="cpu"), seed=0,
                    metric="logloss", mode="min")
    with pytest.raises(InvalidArgumentError, match="The train set Rows has no length"):
        fit(spec)


def test_cosine_restarts_returns_to_base_lr_at_cycle_boundary():
    net = MLP(3, 2, hidden_sizes=[4])
    opts = _opts(scheduler="cosine_restarts", restart_epochs=2, restart_mult=2, lr=0.1)
    opt = make_optimizer(net, opts)
    sched, per_step = make_scheduler(opt, opts, 100, "max", steps_per_epoch=5)
    assert per_step
    lrs = []
    for _ in range(31):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    # first cycle: 2 epochs x 5 steps = 10 steps; second: 20 steps
    assert lrs[0] == pytest.approx(0.1) and lrs[9] < 0.01
    assert lrs[10] == pytest.approx(0.1) and lrs[29] < 0.01 and lrs[30] == pytest.approx(0.1)


def test_scaled_lr_equals_formula_and_is_recorded(binary_data, tmp_path):
    opts = _opts(lr=0.01, batch_size=32, grad_accum_steps=2, lr_scaling="linear",
                 base_batch_size=16)
    assert effective_lr(opts, world_size=3)[0] == pytest.approx(0.01 * 32 * 2 * 3 / 16)
    sqrt = opts.model_copy(update={"lr_scaling": "sqrt"})
    assert effective_lr(sqrt)[0] == pytest.approx(0.01 * math.sqrt(4))
    assert effective_lr(_opts(lr=0.01))[0] == 0.01
    X_tr, y_tr, X_va, y_va = binary_data
    result = train({"model": "mlp", "torch": {**FAST, "epochs": 1, "scheduler": "none",
                                              "lr_scaling": "linear", "base_batch_size": 32}},
                   X_tr, y_tr, X_va, y_va, workdir=_fresh(tmp_path))
    assert result.extra["effective_lr"] == pytest.approx(0.02)
    assert result.history[0]["lr"] == pytest.approx(0.02)
    assert any("lr scaling linear" in n and "= 0.02" in n for n in result.nondeterminism)


def test_label_smoothing_changes_the_loss(multiclass_data, tmp_path):
    X_tr, y_tr, X_va, y_va = multiclass_data
    runs = [train({"model": "mlp", "torch": {**FAST, "epochs": 1, "label_smoothing": ls}},
                  X_tr, y_tr, X_va, y_va, workdir=_fresh(tmp_path)) for ls in (0.0, 0.0, 0.2)]
    assert runs[0].history[0]["train_loss"] == runs[1].history[0]["train_loss"]
    # smoothed targets cannot be fit to zero loss: the optimised loss is higher
    assert runs[2].history[0]["train_loss"] > runs[0].history[0]["train_loss"]


def test_mixup_is_seeded_and_changes_the_loss(multiclass_data, tmp_path):
    gen_a, gen_b = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    lam_a, perm_a = mixup_draw(10, 0.4, gen_a)
    lam_b, perm_b = mixup_draw(10, 0.4, gen_b)
    assert lam_a == lam_b and 0 < lam_a < 1 and torch.equal(perm_a, perm_b)
    assert sorted(perm_a.tolist()) == list(range(10))
    X_tr, y_tr, X_va, y_va = multiclass_data
    runs = [train({"model": "mlp", "torch": {**FAST, "epochs": 1, "mixup_alpha": a}},
                  X_tr, y_tr, X_va, y_va, workdir=_fresh(tmp_path)) for a in (0.4, 0.4, 0.0)]
    assert runs[0].history[0]["train_loss"] == runs[1].history[0]["train_loss"]  # reproducible
    assert runs[0].history[0]["train_loss"] != runs[2].history[0]["train_loss"]


def test_shifted_images_differ_and_keep_their_sum():
    x = torch.zeros(6, 1, 28, 28)
    x[:, :, 10:18, 12:16] = torch.arange(1, 33, dtype=torch.float32).reshape(8, 4)
    gen = torch.Generator().manual_seed(0)
    out = shift_images(x, 3, gen)
    assert out.shape == x.shape
    assert not torch.equal(out, x)
    torch.testing.assert_close(out.sum(dim=(1, 2, 3)), x.sum(dim=(1, 2, 3)))
    again = shift_images(x, 3, torch.Generator().manual_seed(0))
    assert torch.equal(out, again)  # seeded


def test_cnn_trains_with_shift_augmentation(image_data, tmp_path):
    X_tr, y_tr, X_va, y_va = image_data
    cfg = {"model": "cnn", "params": {"channels": [4, 8], "hidden": 16},
           "torch": {**FAST, "epochs": 1, "batch_size": 32}}
    plain = train(cfg, X_tr, y_tr, X_va, y_va, workdir=_fresh(tmp_path))
    shifted = train({**cfg, "torch": {**cfg["torch"], "augment_shift": 2}},
                    X_tr, y_tr, X_va, y_va, workdir=_fresh(tmp_path))
    assert shifted.history[0]["train_loss"] != plain.history[0]["train_loss"]


@pytest.mark.parametrize("net_fn", [lambda: MLP(6, 3, hidden_sizes=[8, 8], dropout=0.3),
                                    lambda: SmallCNN(3, channels=[2, 4], hidden=8, image_size=8)])
def test_activation_checkpointing_gives_equal_gradients(net_fn):
    torch.manual_seed(0)
    net = net_fn()
    x = torch.randn(5, 6) if isinstance(net, MLP) else torch.randn(5, 1, 8, 8)
    grads = []
    for on in (False, True):
        net.zero_grad()
        net.activation_checkpointing = on
        torch.manual_seed(1)  # same dropout masks
        net(x).square().sum().backward()
        grads.append([p.grad.clone() for p in net.parameters()])
    for a, b in zip(*grads, strict=True):
        assert torch.equal(a, b)


def test_activation_checkpointing_run_matches_plain(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    runs = [train({"model": "mlp", "torch": {**FAST, "epochs": 1, "deterministic": True,
                                             "activation_checkpointing": on}},
                  X_tr, y_tr, X_va, y_va, workdir=_fresh(tmp_path)) for on in (False, True)]
    np.testing.assert_array_equal(runs[0].model.predict_proba(X_va),
                                  runs[1].model.predict_proba(X_va))


@pytest.mark.parametrize(
    ("cfg", "pattern"),
    [
        ({"torch": {"momentum": 0.5}}, r"torch\.momentum applies to optimizer 'sgd'"),
        ({"torch": {"nesterov": True}}, r"torch\.nesterov applies to optimizer 'sgd'"),
        ({"torch": {"optimizer": "sgd", "betas": [0.8, 0.99]}},
         r"torch\.betas applies to optimizer 'adamw'"),
        ({"torch": {"optimizer": "sgd", "momentum": 0, "nesterov": True}},
         r"torch\.nesterov needs momentum > 0"),
        ({"torch": {"restart_epochs": 2}},
         r"torch\.restart_epochs applies to scheduler 'cosine_restarts'"),
        ({"torch": {"scheduler": "plateau", "restart_mult": 2}},
         r"torch\.restart_mult applies to scheduler 'cosine_restarts'"),
        ({"torch": {"scheduler": "cosine_restarts", "warmup_steps": 5}},
         r"torch\.warmup_steps does not apply"),
        ({"torch": {"base_batch_size": 64}}, r"torch\.base_batch_size applies with lr_scaling"),
        ({"torch": {"lr_scaling": "sqrt"}}, r"needs torch\.base_batch_size"),
        ({"torch": {"augment_shift": 2}}, r"torch\.augment_shift .*got model 'mlp'"),
        ({"model": "xgboost", "task": "regression", "torch": {"mixup_alpha": 0.2}},
         r"torch: options.*'xgboost' would ignore them"),
    ],
)
def test_options_that_would_not_apply_are_refused(cfg, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config({"model": "mlp", **cfg})


def test_sgd_with_restarts_trains_end_to_end(multiclass_data, tmp_path):
    X_tr, y_tr, X_va, y_va = multiclass_data
    result = train({"model": "mlp", "torch": {**FAST, "optimizer": "sgd", "lr": 0.05,
                                              "scheduler": "cosine_restarts", "patience": None,
                                              "restart_epochs": 1, "checkpoint": True}},
                   X_tr, y_tr, X_va, y_va, workdir=tmp_path)
    # each epoch is one cycle: at its end the schedule is back at the base LR
    assert [row["lr"] for row in result.history] == pytest.approx([0.05, 0.05])
    assert result.metrics["accuracy"] > 0.5, result.history
    meta = (tmp_path / "checkpoints" / "last" / "state.json").read_text()
    assert "momentum_buffer" in meta


class _Stop(Exception):
    pass


def test_resume_with_mixup_shift_sgd_restarts_is_bitwise(image_data, tmp_path):
    """The mixup/shift draws come from the loop's checkpointed generator: a run interrupted
    mid-epoch and resumed ends with the same weights as an uninterrupted one."""
    from fstrain.trainers.torch_models import train_torch

    X_tr, y_tr, X_va, y_va = image_data
    cfg = load_config({"model": "cnn", "params": {"channels": [2, 4], "hidden": 8},
                       "torch": {**FAST, "checkpoint": True, "batch_size": 32,
                                 "deterministic": True, "checkpoint_every_steps": 4,
                                 "optimizer": "sgd", "scheduler": "cosine_restarts",
                                 "mixup_alpha": 0.4, "augment_shift": 2}})
    full = train_torch(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path / "full")

    def stop(step: int) -> None:
        if step == 9:
            raise _Stop

    with pytest.raises(_Stop):
        train_torch(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path / "cut", on_step=stop)
    resumed = train_torch(cfg, X_tr, y_tr, X_va, y_va, workdir=tmp_path / "cut", resume=True)
    assert resumed.extra["resumed_from"]["global_step"] == 8
    def untimed(history):
        return [{k: v for k, v in row.items() if not k.endswith("seconds")} for row in history]

    assert untimed(resumed.history) == untimed(full.history)
    for a, b in zip(full.model.module.state_dict().values(),
                    resumed.model.module.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_torch_options_on_a_model_without_the_torch_loop_are_refused():
    """A torch: block with xgboost used to be accepted and silently ignored."""
    from fstrain.kernel.errors import ConfigError
    from fstrain.trainers.config import load_config

    with pytest.raises(ConfigError, match=r"torch: options.*'xgboost' would ignore them"):
        load_config({"model": "xgboost", "torch": {"lr": 0.1}})
    assert load_config({"model": "mlp", "torch": {"lr": 0.1}}).torch.lr == 0.1
