"""The torch loop's optimizer, learning-rate schedule, device and mixed precision.

:func:`make_optimizer` builds AdamW (decoupled weight decay) or SGD with (Nesterov) momentum,
with no weight decay on biases and norm parameters (:func:`param_groups`);
:func:`effective_lr` scales the learning rate with the global batch; :func:`make_scheduler`
picks the LR scheduler and says whether it steps per optimizer step or per epoch;
:func:`resolve_device` and :func:`resolve_amp` turn ``auto`` into a device and an autocast dtype.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.config import TorchOptions

_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm, nn.LocalResponseNorm)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Optimizer groups (AdamW or SGD): weight decay on weight matrices/kernels, none on biases
    and norm params."""
    decay, no_decay = [], []
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if not param.requires_grad:
                continue
            if isinstance(module, _NORM_TYPES) or name.endswith("bias") or param.ndim < 2:
                no_decay.append(param)
            else:
                decay.append(param)
    if not decay and not no_decay:
        raise InvalidArgumentError(
            "The model has no trainable parameters (every parameter has requires_grad=False): "
            "unfreeze at least the head before training."
        )
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def make_optimizer(
    model: nn.Module, opts: TorchOptions, lr: float | None = None
) -> torch.optim.Optimizer:
    """AdamW with decoupled weight decay, or SGD with (Nesterov) momentum; no weight decay on
    biases/norms either way. ``lr`` overrides ``opts.lr`` (see :func:`effective_lr`)."""
    groups, lr = param_groups(model, opts.weight_decay), opts.lr if lr is None else lr
    if opts.optimizer == "sgd":
        momentum = 0.9 if opts.momentum is None else opts.momentum
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=bool(opts.nesterov))
    return torch.optim.AdamW(groups, lr=lr, betas=opts.betas)


def effective_lr(opts: TorchOptions, world_size: int = 1) -> tuple[float, str | None]:
    """The learning rate the optimizer starts from and a note saying how it was scaled.

    With ``lr_scaling`` ``linear``/``sqrt`` it is ``lr × r`` (or ``lr × √r``), where ``r`` is
    the global batch (``batch_size × grad_accum_steps × world_size``) over ``base_batch_size``.
    """
    if opts.lr_scaling == "none" or opts.base_batch_size is None:
        return opts.lr, None
    global_batch = opts.batch_size * opts.grad_accum_steps * world_size
    ratio = global_batch / opts.base_batch_size
    factor = math.sqrt(ratio) if opts.lr_scaling == "sqrt" else ratio
    lr = opts.lr * factor
    return lr, (f"lr scaling {opts.lr_scaling}: lr {opts.lr:g} x "
                f"{'sqrt' if opts.lr_scaling == 'sqrt' else ''}(global batch {global_batch} / "
                f"base {opts.base_batch_size}) = {lr:g}")


def make_scheduler(
    optimizer: torch.optim.Optimizer, opts: TorchOptions, total_steps: int, mode: str,
    *, steps_per_epoch: int = 1, lr: float | None = None,
) -> tuple[Any, bool]:
    """The LR scheduler and whether it steps per optimizer step (else per epoch on the metric).

    ``cosine_restarts`` (SGDR) restarts every ``restart_epochs × steps_per_epoch`` optimizer
    steps, each cycle ``restart_mult`` times longer than the last."""
    total_steps = max(total_steps, 1)
    lr = opts.lr if lr is None else lr
    if opts.scheduler == "cosine_restarts":
        return (
            torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
                optimizer, T_0=max(1, (opts.restart_epochs or 1) * steps_per_epoch),
                T_mult=opts.restart_mult or 1, eta_min=lr * opts.min_lr_ratio,
            ),
            True,
        )
    if opts.scheduler == "warmup_cosine":
        warmup, floor = opts.warmup_steps, opts.min_lr_ratio

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
            return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor), True
    if opts.scheduler == "one_cycle":
        pct = opts.warmup_steps / total_steps if opts.warmup_steps else 0.3
        return (
            torch.optim.lr_scheduler.OneCycleLR(
                optimizer, max_lr=lr, total_steps=total_steps,
                pct_start=min(max(pct, 0.01), 0.99),
            ),
            True,
        )
    if opts.scheduler == "plateau":
        if mode not in ("min", "max"):
            raise InvalidArgumentError(f"The plateau scheduler follows a metric to its 'min' or "
                                       f"'max'; got mode {mode!r}.")
        patience = max(1, (opts.patience or 4) // 2)
        return (
            torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer, mode="max" if mode == "max" else "min", factor=0.5, patience=patience
            ),
            False,
        )
    return None, True


def resolve_device(requested: str) -> torch.device:
    """``auto`` → CUDA when available, else CPU."""
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ConfigError("torch.device='cuda' but no CUDA device is available; use auto/cpu.")
        return torch.device("cuda")
    return torch.device("cpu")


def resolve_amp(amp: str, device: torch.device) -> tuple[torch.dtype | None, bool]:
    """The autocast dtype (None = off) and whether a GradScaler is needed (fp16)."""
    if amp == "off" or (amp == "auto" and device.type != "cuda"):
        return None, False
    if amp == "auto":
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16, False
        return torch.float16, True
    if amp == "bf16":
        if device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise ConfigError("torch.amp='bf16' but this GPU lacks bf16; use amp: fp16 or auto.")
        return torch.bfloat16, False
    return torch.float16, True
