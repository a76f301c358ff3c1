"""What the torch loop reads: in-memory arrays, map-style datasets and streamed splits.

:class:`ArrayDataset` holds features and labels in memory and hands out a whole batch with one
fancy index; :func:`epoch_indices` is a rank's shuffled rows of an epoch (``DistributedSampler``
order, a function of ``seed`` and ``epoch`` only, so a resumed run reads the same batches);
:func:`train_batches` slices in-memory arrays directly and leaves anything else to the
DataLoader. :class:`StreamedSplit` and :class:`StreamedValSplit` are the shapes of the splits
that deal their own shards and batches (:mod:`fstrain.trainers.stream`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any, Protocol

from typing_extensions import TypeIs

import numpy as np
import torch
from torch.utils.data.distributed import DistributedSampler

from fstrain.kernel.errors import InvalidArgumentError


class ArrayDataset(torch.utils.data.Dataset):
    """In-memory features/labels; a whole batch is fetched with one fancy index."""

    def __init__(self, X: np.ndarray, y: np.ndarray) -> None:
        self.X = torch.from_numpy(np.ascontiguousarray(X))
        self.y = torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.X[index], self.y[index]

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.long)
        return self.X[idx], self.y[idx]


def collate(batch: Any) -> Any:
    """Pass through batches already built by ``__getitems__``; default-collate the rest."""
    if isinstance(batch, tuple):
        return batch
    return torch.utils.data.default_collate(batch)


class IndexSampler(torch.utils.data.Sampler[int]):
    """Yields the indices set for the current (part of the) epoch."""

    def __init__(self) -> None:
        self.indices: list[int] = []

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def epoch_indices(
    n: int, *, seed: int, epoch: int, rank: int = 0, world_size: int = 1
) -> list[int]:
    """This rank's shuffled indices for ``epoch`` (``DistributedSampler`` order, padded)."""
    # torch annotates the dataset as a Dataset, but the sampler only reads its len()
    sampler: DistributedSampler[int] = DistributedSampler(
        range(n), num_replicas=world_size, rank=rank, shuffle=True, seed=seed,  # type: ignore[arg-type]
        drop_last=False,
    )
    sampler.set_epoch(epoch)
    return list(sampler)


class StreamedSplit(Protocol):
    """A train split that deals its own shards and batches (``streamed = True``:
    :class:`fstrain.trainers.stream.split.SplitStream`, or a Ray Data shard of
    :mod:`fstrain.trainers.stream.ray_feed`): the loop asks it for batches, not rows."""

    def __len__(self) -> int: ...

    def steps(self, world_size: int, batch_size: int) -> int: ...

    def sample(self, cap: int, seed: int) -> tuple[np.ndarray, np.ndarray]: ...

    def epoch_batches(self, epoch: int, rank: int, world_size: int,
                      batch_size: int) -> Iterator[tuple[Any, Any]]: ...


class StreamedValSplit(Protocol):
    """A validation split read as this rank's rows in file order (``streamed = True``)."""

    def batches(self, rank: int, world_size: int,
                batch_size: int) -> Iterator[tuple[Any, Any]]: ...


def is_streamed_train(dataset: torch.utils.data.Dataset[Any] | StreamedSplit,
                    ) -> TypeIs[StreamedSplit]:
    return bool(getattr(dataset, "streamed", False))


def is_streamed_val(dataset: torch.utils.data.Dataset[Any] | StreamedValSplit,
                  ) -> TypeIs[StreamedValSplit]:
    return bool(getattr(dataset, "streamed", False))


def map_rows(dataset: object, what: str) -> int:
    """The rows of a map-style dataset; one without a length is refused by name."""
    if not isinstance(dataset, Sized):
        raise InvalidArgumentError(
            f"The {what} set {type(dataset).__name__} has no length: the loop reads a map-style "
            "dataset (__len__ and __getitem__) or a streamed split.")
    return len(dataset)


def train_batches(dataset: Any, loader: Any, indices: list[int], batch_size: int,
             num_workers: int) -> Any:
    """Batches of the epoch: in-memory arrays are sliced directly (the same batches the
    DataLoader would build, without its per-batch Python work); anything else uses the loader."""
    if num_workers > 0 or not isinstance(dataset, ArrayDataset):
        yield from loader
        return
    order = torch.as_tensor(indices, dtype=torch.long)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        yield dataset.X[idx], dataset.y[idx]
