"""The two networks: a feed-forward net for tabular features and a small CNN for 28×28 images.

Each is rebuilt from a JSON-able ``arch`` dict (saved next to the safetensors weights), so a
saved model never needs pickle: ``build_net(arch)`` + ``load_state_dict``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def run_blocks(seq: nn.Sequential, ends: list[int], x: torch.Tensor, checkpointing: bool,
               training: bool) -> torch.Tensor:
    """Run ``seq``; with ``checkpointing`` while training with gradients on, each block
    ``seq[start:end]`` (``end`` in ``ends``) keeps only its input and recomputes its activations
    in backward (``torch.utils.checkpoint``, non-reentrant; the RNG state is restored for the
    recompute, so dropout masks match). Layers after the last block run normally."""
    if not (checkpointing and training and torch.is_grad_enabled()):
        return seq(x)

    start = 0
    for end in ends:
        x = checkpoint(seq[start:end], x, use_reentrant=False)
        start = end
    return seq[start:](x) if start < len(seq) else x


_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "tanh": nn.Tanh}


class MLP(nn.Module):
    """Linear → norm → activation → dropout blocks, then a linear head of ``n_classes``."""

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        hidden_sizes: list[int] | tuple[int, ...] = (64, 32),
        dropout: float = 0.1,
        norm: str = "layer",
        activation: str = "relu",
    ) -> None:
        super().__init__()
        #: recompute the hidden blocks in backward (torch option activation_checkpointing)
        self.activation_checkpointing = False
        layers: list[nn.Module] = []
        self._block_ends: list[int] = []
        width = n_features
        for size in hidden_sizes:
            layers.append(nn.Linear(width, int(size)))
            if norm == "layer":
                layers.append(nn.LayerNorm(int(size)))
            elif norm == "batch":
                layers.append(nn.BatchNorm1d(int(size)))
            layers.append(_ACTIVATIONS[activation]())
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = int(size)
            self._block_ends.append(len(layers))
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, n_classes)``."""
        return run_blocks(self.net, self._block_ends, x, self.activation_checkpointing,
                          self.training)


class SmallCNN(nn.Module):
    """Two conv blocks (conv 3×3 → ReLU → max-pool 2) and a two-layer head."""

    def __init__(
        self,
        n_classes: int,
        channels: list[int] | tuple[int, ...] = (16, 32),
        hidden: int = 64,
        dropout: float = 0.1,
        image_size: int = 28,
        in_channels: int = 1,
    ) -> None:
        super().__init__()
        #: recompute the conv blocks in backward (torch option activation_checkpointing)
        self.activation_checkpointing = False
        blocks: list[nn.Module] = []
        width, size = in_channels, image_size
        for ch in channels:
            blocks += [nn.Conv2d(width, int(ch), 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            width, size = int(ch), size // 2
        self.features = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(width * size * size, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, n_classes)`` for images ``(batch, C, H, W)``."""
        ends = list(range(3, len(self.features) + 1, 3))  # conv → ReLU → pool
        feats = run_blocks(self.features, ends, x, self.activation_checkpointing, self.training)
        return self.head(feats)


def mlp_arch(params: dict[str, Any], n_features: int, n_classes: int) -> dict[str, Any]:
    """The JSON arch dict of an MLP from config ``params``."""
    return {
        "net": "mlp",
        "n_features": int(n_features),
        "n_classes": int(n_classes),
        "hidden_sizes": [int(h) for h in params.get("hidden_sizes", [64, 32])],
        "dropout": float(params.get("dropout", 0.1)),
        "norm": str(params.get("norm", "layer")),
        "activation": str(params.get("activation", "relu")),
    }


def cnn_arch(params: dict[str, Any], n_classes: int) -> dict[str, Any]:
    """The JSON arch dict of the CNN from config ``params``."""
    return {
        "net": "cnn",
        "n_classes": int(n_classes),
        "channels": [int(c) for c in params.get("channels", [16, 32])],
        "hidden": int(params.get("hidden", 64)),
        "dropout": float(params.get("dropout", 0.1)),
        "image_size": int(params.get("image_size", 28)),
        "in_channels": int(params.get("in_channels", 1)),
    }


def build_net(arch: dict[str, Any]) -> nn.Module:
    """Instantiate a network from its arch dict."""
    spec = dict(arch)
    kind = spec.pop("net")
    if kind == "mlp":
        return MLP(**spec)
    if kind == "cnn":
        return SmallCNN(**spec)
    raise ValueError(f"Unknown net {kind!r} in arch {arch}.")
