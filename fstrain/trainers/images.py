"""Images indexed by path in a feature group → a torch ``Dataset``.

The MNIST feature group holds ``image_path`` (28×28 grayscale PNG) and ``label``; the CNN reads
the pixels through :class:`ImagePathDataset`, with Pillow by default or any ``image_loader``
callable ``path -> array (H, W)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from PIL import Image

ImageLoader = Callable[[str], np.ndarray]

#: MNIST pixel mean/std (after scaling to [0, 1]).
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def load_grayscale(path: str) -> np.ndarray:
    """Read an image file as a ``uint8`` ``(H, W)`` grayscale array (Pillow)."""
    with Image.open(path) as img:
        return np.asarray(img.convert("L"), dtype=np.uint8)


def to_float(pixels: np.ndarray) -> np.ndarray:
    """Pixels (uint8 0–255 or float 0–1) → normalised float32 ``(1, H, W)``."""
    arr = np.asarray(pixels)
    arr = arr.astype(np.float32) / 255.0 if arr.dtype == np.uint8 else arr.astype(np.float32)
    if arr.ndim == 2:
        arr = arr[None]
    return (arr - MNIST_MEAN) / MNIST_STD


def load_images(paths: Sequence[str], loader: ImageLoader | None = None) -> np.ndarray:
    """Load all ``paths`` into one normalised float32 array ``(N, 1, H, W)``."""
    loader = loader or load_grayscale
    if len(paths) == 0:
        return np.zeros((0, 1, 28, 28), dtype=np.float32)
    return np.stack([to_float(loader(str(p))) for p in paths])


class ImagePathDataset:
    """A map-style torch ``Dataset`` of ``(image, label)`` read from file paths.

    With ``cache=True`` (default) all images are read once, up front, into memory (5k MNIST
    images are 4 MB); otherwise each ``__getitem__`` reads its file (fine with DataLoader
    workers for data that does not fit in memory).
    """

    def __init__(
        self,
        paths: Sequence[str],
        labels: np.ndarray | None = None,
        *,
        loader: ImageLoader | None = None,
        cache: bool = True,
    ) -> None:
        self.paths = [str(p) for p in paths]
        self.labels = None if labels is None else np.asarray(labels, dtype=np.int64)
        self.loader = loader or load_grayscale
        self._cache = load_images(self.paths, self.loader) if cache else None

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import torch

        if self._cache is not None:
            x = torch.from_numpy(self._cache[index])
        else:
            x = torch.from_numpy(to_float(self.loader(self.paths[index])))
        y = -1 if self.labels is None else int(self.labels[index])
        return x, torch.tensor(y, dtype=torch.long)

    def __getitems__(self, indices: list[int]) -> Any:
        """A whole batch at once (one fancy index) when the images are cached."""
        import torch

        if self._cache is None:
            return [self[i] for i in indices]
        idx = np.asarray(indices, dtype=np.int64)
        labels = np.full(len(idx), -1) if self.labels is None else self.labels[idx]
        return torch.from_numpy(self._cache[idx]), torch.from_numpy(labels.astype(np.int64))
