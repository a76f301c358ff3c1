""""Overfit one batch first": train on one small batch until the loss is near zero.

A model that cannot memorise 32 rows has a bug, not a tuning problem: frozen parameters, a
loss/activation mismatch (softmax fed to ``CrossEntropyLoss``), an output layer of the wrong
width, labels that contradict each other, a broken input pipeline. :func:`smoke_check` runs
before the full training and raises :class:`SmokeCheckError` with a diagnosis.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, FeatureStoreError
from fstrain.trainers.config import MODEL_PARAMS, TrainConfig, load_config
from fstrain.trainers.lightgbm_trainer import train_lightgbm
from fstrain.trainers.metrics import classification_metrics
from fstrain.trainers.seeding import seed_everything
from fstrain.trainers.tabular import Prepared, train_sklearn, train_xgboost
from fstrain.trainers.torch_models import prepare_torch_data


class SmokeCheckError(FeatureStoreError):
    """The model could not overfit a single batch; ``diagnostics`` says what was seen."""

    def __init__(self, message: str, diagnostics: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics or {}


@dataclass
class SmokeResult:
    """Loss before/after, steps taken and any warnings."""

    model: str
    initial_loss: float
    final_loss: float
    steps: int
    batch_size: int
    warnings: list[str] = field(default_factory=list)


def smoke_check(
    config: TrainConfig | dict[str, Any],
    X: pd.DataFrame,
    y: pd.DataFrame,
    *,
    batch_size: int = 32,
    max_steps: int = 300,
    target_loss: float = 0.05,
    lr: float = 1e-2,
    image_loader: Callable[[str], np.ndarray] | None = None,
    model: Any = None,
    loss_fn: Any = None,
) -> SmokeResult:
    """Train the configured model on the first ``batch_size`` rows until loss < ``target_loss``.

    Args:
        config: the training config (dropout/regularisation are switched off for the check).
        X, y: any split (usually train); a batch of ``batch_size`` rows is taken from it,
            stratified by class (see :func:`stratified_batch`).
        model / loss_fn: torch only — check this module / loss instead of the configured ones
            (e.g. a model being debugged). ``model`` is a module or a factory called with the
            arch dict (``n_features``, ``n_classes``, ...); it must output logits
            ``(batch, n_classes)``.

    Raises:
        SmokeCheckError: the loss did not get near zero, with the likely cause.
    """
    cfg = load_config(config)
    rows = stratified_batch(y, batch_size)
    Xb, yb = X.iloc[rows], y.iloc[rows]
    if cfg.is_torch:
        return _smoke_torch(cfg, Xb, yb, max_steps, target_loss, lr, image_loader, model, loss_fn)
    return _smoke_tabular(cfg, Xb, yb, target_loss)


def stratified_batch(y: pd.DataFrame | pd.Series, batch_size: int) -> np.ndarray:
    """Row positions of a small batch holding every class: classes take turns (in order of
    first appearance, each its rows in order) until ``batch_size`` rows are taken, so a rare
    class (0.5% fraud) is in the batch. Deterministic. A label with more distinct values than
    ``batch_size`` (a regression) gets the first rows."""
    labels = y.iloc[:, 0] if isinstance(y, pd.DataFrame) else y
    n = min(int(batch_size), len(labels))
    codes, uniques = pd.factorize(labels, use_na_sentinel=False)
    if len(uniques) > n or len(uniques) < 2:
        return np.arange(n)
    per_class = [np.flatnonzero(codes == k) for k in range(len(uniques))]
    picked: list[int] = []
    depth = 0
    while len(picked) < n:
        for rows in per_class:
            if depth < len(rows) and len(picked) < n:
                picked.append(int(rows[depth]))
        depth += 1
    return np.sort(np.asarray(picked, dtype=np.int64))


def _smoke_torch(
    cfg: TrainConfig,
    X: pd.DataFrame,
    y: pd.DataFrame,
    max_steps: int,
    target_loss: float,
    lr: float,
    image_loader: Any,
    model: Any,
    loss_fn: Any,
) -> SmokeResult:
    from torch import nn

    cfg, net, xb, yb, k = _torch_batch(cfg, X, y, image_loader, model)
    loss_fn = loss_fn if loss_fn is not None else nn.CrossEntropyLoss()
    diagnostics: dict[str, Any] = {"batch_size": len(yb), "n_classes": k}
    trainable = _trainable_parameters(cfg, net, diagnostics)
    warnings = _input_warnings(xb, yb, diagnostics)
    net.train()
    warnings += _forward_warnings(cfg, net, xb, k, diagnostics)
    losses = _overfit(cfg, net, loss_fn, (xb, yb), trainable, diagnostics,
                      max_steps=max_steps, target_loss=target_loss, lr=lr)
    diagnostics["losses"] = losses[:: max(1, len(losses) // 20)]
    if losses[-1] >= target_loss:
        hint = _hint(losses, warnings)
        raise SmokeCheckError(
            f"Smoke check failed for model {cfg.model!r}: after {len(losses)} steps on one batch "
            f"of {len(yb)} rows the loss is {losses[-1]:.4f} (started at {losses[0]:.4f}; "
            f"target < {target_loss}). {hint}",
            diagnostics,
        )
    return SmokeResult(cfg.model, losses[0], losses[-1], len(losses), len(yb), warnings)


def _torch_batch(
    cfg: TrainConfig, X: pd.DataFrame, y: pd.DataFrame, image_loader: Any, model: Any
) -> tuple[TrainConfig, Any, Any, Any, int]:
    """The unregularised config, the seeded net, the batch tensors and the number of classes."""
    from torch import nn

    from fstrain.trainers.nets import build_net

    cfg = cfg.with_overrides({"dropout": 0.0}) if "dropout" in _arch_keys(cfg) else cfg
    cfg = cfg.model_copy(update={"imbalance": "none"})
    data = prepare_torch_data(cfg, X, y, X, y, image_loader=image_loader)
    seed_everything(cfg.seed)
    if model is None:
        net = build_net(data.arch)
    elif isinstance(model, nn.Module):
        net = model
    else:  # a factory: arch dict -> module (knows the input width of this batch)
        net = model(data.arch)
    xb, yb = data.train_set.__getitems__(list(range(len(data.train_set))))
    return cfg, net, xb, yb, data.labels.n_classes


def _trainable_parameters(cfg: TrainConfig, net: Any, diagnostics: dict[str, Any]) -> list[Any]:
    """The parameters that can learn (records the frozen ones; none at all fails the check)."""
    trainable = [p for p in net.parameters() if p.requires_grad]
    frozen = [n for n, p in net.named_parameters() if not p.requires_grad]
    diagnostics["frozen_parameters"] = frozen
    if not trainable:
        raise SmokeCheckError(
            f"Smoke check failed for model {cfg.model!r}: every parameter is frozen "
            f"(requires_grad=False: {', '.join(frozen[:6])}{'...' if len(frozen) > 6 else ''}); "
            "the loss cannot go down. Unfreeze the parameters that should learn.",
            diagnostics,
        )
    return trainable


def _input_warnings(xb: Any, yb: Any, diagnostics: dict[str, Any]) -> list[str]:
    """Identical inputs with different labels, and frozen parameter tensors."""
    import torch

    warnings: list[str] = []
    flat = xb.reshape(len(xb), -1)
    _, groups = torch.unique(flat, dim=0, return_inverse=True)
    conflicting = sum(
        int(len(torch.unique(yb[groups == g])) > 1) for g in torch.unique(groups).tolist()
    )
    if conflicting:
        diagnostics["conflicting_duplicate_inputs"] = conflicting
        warnings.append(
            f"{conflicting} group(s) of identical inputs carry different labels (broken labels "
            "or a join that duplicated rows)"
        )
    frozen = diagnostics["frozen_parameters"]
    if frozen:
        warnings.append(f"{len(frozen)} frozen parameter tensor(s): {', '.join(frozen[:6])}")
    return warnings


def _forward_warnings(
    cfg: TrainConfig, net: Any, xb: Any, k: int, diagnostics: dict[str, Any]
) -> list[str]:
    """One forward pass: it must run and output ``(batch, k)`` logits, not probabilities."""
    import torch

    try:
        with torch.no_grad():
            out = net(xb)
    except RuntimeError as exc:
        raise SmokeCheckError(
            f"Smoke check failed for model {cfg.model!r}: the forward pass fails on a batch of "
            f"shape {tuple(xb.shape)}: {exc}",
            diagnostics,
        ) from exc
    if out.ndim != 2 or out.shape[1] != k:
        raise SmokeCheckError(
            f"Smoke check failed for model {cfg.model!r}: the net outputs shape "
            f"{tuple(out.shape)} but the label has {k} classes; the head must output "
            f"(batch, {k}) logits.",
            diagnostics,
        )
    if bool(((out >= 0) & (out <= 1)).all()) and torch.allclose(
        out.sum(dim=1), torch.ones(len(out)), atol=1e-4
    ):
        return [(
            "outputs look like probabilities (rows in [0,1] summing to 1): CrossEntropyLoss "
            "expects raw logits — remove the final softmax"
        )]
    return []


def _overfit(
    cfg: TrainConfig,
    net: Any,
    loss_fn: Any,
    batch: tuple[Any, Any],
    trainable: list[Any],
    diagnostics: dict[str, Any],
    *,
    max_steps: int,
    target_loss: float,
    lr: float,
) -> list[float]:
    """Adam on the one batch until the loss is under ``target_loss``; the loss of each step."""
    import torch

    xb, yb = batch
    opt = torch.optim.Adam(trainable, lr=lr)
    losses: list[float] = []
    for step in range(max_steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(xb), yb)
        if not loss.requires_grad:
            raise SmokeCheckError(
                f"Smoke check failed for model {cfg.model!r}: the loss does not depend on any "
                "trainable parameter (frozen parameters or a detached forward pass).",
                diagnostics,
            )
        loss.backward()
        if step == 0:
            _check_gradients(cfg, net, len(trainable), diagnostics)
        opt.step()
        value = float(loss.detach())
        losses.append(value)
        if not math.isfinite(value):
            raise SmokeCheckError(
                f"Smoke check failed for model {cfg.model!r}: the loss became {value} at step "
                f"{step} (learning rate too high, invalid inputs, or fp16 overflow).",
                diagnostics,
            )
        if value < target_loss:
            break
    return losses


def _check_gradients(
    cfg: TrainConfig, net: Any, n_trainable: int, diagnostics: dict[str, Any]
) -> None:
    """After the first backward pass: some trainable parameter must have a gradient."""
    no_grad = [n for n, p in net.named_parameters()
               if p.requires_grad and (p.grad is None or not bool(p.grad.abs().sum() > 0))]
    diagnostics["parameters_without_gradient"] = no_grad
    if len(no_grad) == n_trainable:
        raise SmokeCheckError(
            f"Smoke check failed for model {cfg.model!r}: no parameter received a "
            "gradient (dead activations, a detached tensor, or frozen layers).",
            diagnostics,
        )


def _arch_keys(cfg: TrainConfig) -> set[str]:
    return set(MODEL_PARAMS[cfg.model])


def _hint(losses: list[float], warnings: list[str]) -> str:
    if warnings:
        return "Likely cause: " + "; ".join(warnings) + "."
    if losses[-1] > 0.9 * losses[0]:
        return ("The loss barely moved: check for frozen parameters, a wrong loss/activation "
                "pair, labels that do not match the inputs, or a learning rate of ~0.")
    return ("The loss went down but not to ~0: check for duplicated inputs with different "
            "labels (broken labels), too little capacity, or too strong regularisation.")


def _smoke_tabular(
    cfg: TrainConfig, X: pd.DataFrame, y: pd.DataFrame, target_loss: float
) -> SmokeResult:
    unregularised = {
        "xgboost": {"n_estimators": 300, "learning_rate": 0.3, "max_depth": 6,
                    "min_child_weight": 0, "reg_lambda": 0.0, "subsample": 1.0,
                    "colsample_bytree": 1.0},
        # min_child_weight > 0: LightGBM aborts a split search whose hessian floor is 0
        "lightgbm": {"n_estimators": 300, "learning_rate": 0.3, "num_leaves": 64,
                     "min_child_samples": 1, "min_child_weight": 1e-5, "reg_lambda": 0.0,
                     "subsample": 1.0, "colsample_bytree": 1.0},
        "sklearn_rf": {"n_estimators": 50, "min_samples_leaf": 1, "bootstrap": False},
        "sklearn_logreg": {"C": 1e4},
    }.get(cfg.model)
    if unregularised is None:
        raise ConfigError(f"--smoke overfits one batch with xgboost, lightgbm, scikit-learn and "
                          f"torch models; {cfg.model!r} has no smoke check. Drop --smoke.")
    smoke_cfg = cfg.model_copy(update={"params": unregularised, "early_stopping_rounds": None,
                                       "imbalance": "none"})

    trainer = {"xgboost": train_xgboost, "lightgbm": train_lightgbm}.get(cfg.model, train_sklearn)
    result = trainer(smoke_cfg, X, y, X, y)
    data = Prepared(smoke_cfg, X, y, X, y, framework="sklearn")
    proba = result.model.predict_proba(X)
    logloss = classification_metrics(data.y_val, proba, data.labels.n_classes)["logloss"]
    start = math.log(data.labels.n_classes)
    threshold = target_loss if cfg.model != "sklearn_logreg" else max(target_loss, 0.3)
    if logloss >= threshold:
        raise SmokeCheckError(
            f"Smoke check failed for model {cfg.model!r}: on one batch of {len(X)} rows the "
            f"training log loss is {logloss:.4f} (target < {threshold}). Check for identical "
            "feature rows with different labels (broken labels) or constant features.",
            {"logloss": logloss},
        )
    return SmokeResult(cfg.model, start, logloss, 1, len(X))
