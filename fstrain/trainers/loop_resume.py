"""The torch loop across ranks and resumes: the process-group context and the resume checks.

:class:`DistContext` is what the loop needs from a process group (rank, world size, device, the
DDP wrapper; filled in by :mod:`fstrain.trainers.distributed`, single-process by default).
A checkpoint holds every rank's RNG states (:func:`rank_snapshot`), and a resuming rank takes
its own back (:func:`rank_rng`). The checks refuse, before any weight is loaded, a resume that
could not replay the rest of an epoch exactly: another world size, a streamed input that cannot
start an epoch part way through, other pieces or another train split than the checkpoint's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
import torch.distributed

from fstrain.kernel.errors import ConfigError
from fstrain.trainers.config import TorchOptions
from fstrain.trainers.seeding import numpy_rng_state, python_rng_state, torch_rng_tensors
from fstrain.trainers.torch_inputs import StreamedSplit


@dataclass
class DistContext:
    """What the loop needs from a process group; single-process defaults."""

    rank: int = 0
    world_size: int = 1
    device: torch.device | None = None
    wrap: Callable[[nn.Module], nn.Module] | None = None

    @property
    def is_main(self) -> bool:
        """Rank 0 writes checkpoints."""
        return self.rank == 0

    def all_reduce_mean(self, value: float) -> float:
        """Mean of ``value`` over ranks."""
        if self.world_size == 1:
            return value

        t = torch.tensor([value], dtype=torch.float64, device=self._comm_device())
        torch.distributed.all_reduce(t)
        return float(t.item()) / self.world_size

    def all_gather(self, obj: Any) -> list[Any]:
        """``obj`` from every rank, in rank order."""
        if self.world_size == 1:
            return [obj]

        out: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj)
        return out

    def _comm_device(self) -> torch.device:
        nccl = torch.distributed.get_backend() == "nccl"
        return self.device if nccl and self.device else torch.device("cpu")


def rank_snapshot(generator: Any, epoch_loss_sum: float, batch_in_epoch: int) -> dict[str, Any]:
    """What differs between ranks at a checkpoint: RNG states (JSON-able host states and torch
    tensors), the rank's partial train-loss sum of the epoch and the batch it resumes at."""
    return {"host": {"python": python_rng_state(), "numpy": numpy_rng_state(),
                     "epoch_loss_sum": epoch_loss_sum, "batch_in_epoch": batch_in_epoch},
            "tensors": torch_rng_tensors(generator)}


def rank_rng(
    meta: dict[str, Any], tensors: dict[str, Any], dist: DistContext
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The RNG states a resuming rank restores: its own when the checkpoint holds one per rank
    for the same world size, else rank 0's."""
    per_rank = meta.get("rng_by_rank")
    if dist.rank == 0 or not per_rank or len(per_rank) != dist.world_size:
        return meta["rng"], tensors
    prefix = f"rank{dist.rank}."
    return per_rank[dist.rank], {k[len(prefix):]: v for k, v in tensors.items()
                                 if k.startswith(prefix)}


def check_mid_epoch_checkpoints(train_set: Any, opts: TorchOptions) -> None:
    """Refuse ``checkpoint_every_steps`` on a streamed train set that cannot start an epoch at
    a given batch (one without ``resumes_mid_epoch``; the streams of one process and of
    ``--workers`` both can): its checkpoints could not be resumed from without training on
    some rows twice."""
    if opts.checkpoint_every_steps and not getattr(train_set, "resumes_mid_epoch", False):
        raise ConfigError(
            f"torch.checkpoint_every_steps={opts.checkpoint_every_steps} writes mid-epoch "
            f"checkpoints, but the streamed input {type(train_set).__name__} cannot resume an "
            "epoch part way through. Drop torch.checkpoint_every_steps (checkpoints at every "
            "epoch's end still resume).")


def check_mid_epoch_resume(meta: dict[str, Any], dist: DistContext,
                            streamed: StreamedSplit | None) -> None:
    """Refuse to resume a mid-epoch checkpoint where the rest of its epoch cannot be replayed
    exactly: another world size deals other rows to each rank (``--workers``), and a streamed
    input without mid-epoch starts would restart the epoch."""
    loop = meta.get("loop") or {}
    start = int(loop.get("batch_in_epoch") or 0)
    if not start:
        return
    was = int(meta.get("world_size") or 1)
    where = (f"the checkpoint was written after batch {start} of epoch {loop.get('epoch')} "
             f"(global step {loop.get('global_step')})")
    if was != dist.world_size:
        raise ConfigError(
            f"Cannot resume: {where} with world size {was} (--workers {was}); now world size "
            f"{dist.world_size} (--workers {dist.world_size}) would deal the epoch's rows to "
            f"the ranks differently. Resume with --workers {was}.")
    if streamed is not None and not getattr(streamed, "resumes_mid_epoch", False):
        raise ConfigError(
            f"Cannot resume: {where}, and the streamed input {type(streamed).__name__} cannot "
            "start an epoch part way through (torch.checkpoint_every_steps). Resume in one "
            "process with torch.streaming: true, or start fresh.")
    now = stream_shards(streamed, dist.world_size)
    had = (meta.get("train_stream") or {}).get("pieces_sha256")
    if had and now and had != now["pieces_sha256"]:
        raise ConfigError(
            f"Cannot resume: {where}; the checkpoint's ranks read pieces {had}, these ranks "
            f"would read pieces {now['pieces_sha256']} (other row groups or another dealing "
            "of them), so the rest of the epoch would not be its unseen rows. Resume with the "
            "same training dataset version and fstrain version, or start fresh.")


def stream_shards(streamed: Any, world_size: int) -> dict[str, Any] | None:
    """A streamed train set's pieces as dealt to ``world_size`` ranks (hashed), if it says."""
    shards = getattr(streamed, "shards", None)
    return shards(world_size) if shards is not None else None


def check_stream_layout(meta: dict[str, Any], streamed: Any) -> None:
    """Refuse to resume, at any batch, over a train split of other rows or row groups than
    the checkpoint's."""
    had = meta.get("train_stream")
    now = getattr(streamed, "layout", None)
    if not had or now is None:
        return
    diffs = [f"{k}: checkpoint has {had.get(k)!r}, now {v!r}" for k, v in now().items()
             if had.get(k) != v]
    if diffs:
        raise ConfigError(f"Cannot resume: the checkpoint was written over another train "
                          f"split ({'; '.join(diffs)}). Resume on the training dataset it "
                          "was written for, or start fresh.")
