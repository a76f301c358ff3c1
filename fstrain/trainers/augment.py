"""Batch augmentation of the torch loop: mixup and random image shifts.

Both draw from a generator the loop seeds per batch (from the run's seed, the rank, the epoch
and the batch), so a resumed run draws the same shifts and mixup pairs as an uninterrupted one.
"""

from __future__ import annotations

import numpy as np
import torch

from fstrain.kernel.errors import ConfigError


def mixup_draw(n: int, alpha: float, generator: torch.Generator) -> tuple[float, torch.Tensor]:
    """λ ~ Beta(α, α) and a permutation of ``n`` rows, drawn from ``generator`` (CPU).

    λ comes from a numpy generator seeded by one draw of ``generator``: torch's Beta sampler
    only reads the global RNG, which the run's other consumers (dropout) share."""
    seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
    lam = float(np.random.default_rng(seed).beta(alpha, alpha))
    return lam, torch.randperm(n, generator=generator)


def shift_images(x: torch.Tensor, max_shift: int, generator: torch.Generator) -> torch.Tensor:
    """Translate each image of ``x`` ``(B, C, H, W)`` by its own random ``(dy, dx)`` in
    ``[-max_shift, max_shift]`` (drawn from ``generator``); the uncovered border takes the
    image's smallest value (its background)."""
    if x.ndim != 4:
        raise ConfigError(f"torch.augment_shift needs image batches (B, C, H, W); got a batch of "
                          f"shape {tuple(x.shape)}.")
    b, _, h, w = x.shape
    shifts = torch.randint(-max_shift, max_shift + 1, (b, 2), generator=generator).to(x.device)
    rows = torch.arange(h, device=x.device)[None, :] - shifts[:, :1]  # (B, H) source rows
    cols = torch.arange(w, device=x.device)[None, :] - shifts[:, 1:]  # (B, W) source cols
    valid = (((rows >= 0) & (rows < h))[:, :, None] & ((cols >= 0) & (cols < w))[:, None, :])
    bidx = torch.arange(b, device=x.device)[:, None, None]
    src = x.permute(0, 2, 3, 1)[bidx, rows.clamp(0, h - 1)[:, :, None],
                                cols.clamp(0, w - 1)[:, None, :]]  # (B, H, W, C)
    fill = x.amin(dim=(1, 2, 3))[:, None, None, None]
    out = torch.where(valid[..., None], src, fill)
    return out.permute(0, 3, 1, 2).contiguous()
