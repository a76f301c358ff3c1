"""The PyTorch training loop, one function for every net (MLP, CNN; single process or DDP).

Per micro-batch: forward under autocast → loss (in fp32) → scaled backward. Every
``grad_accum_steps`` micro-batches (and at the end of an epoch): unscale → clip the gradient
norm → optimizer step → scaler update → ``zero_grad(set_to_none=True)`` → per-step scheduler
step. Per epoch: validation metrics, plateau scheduler step, early stopping on the validation
metric, ``best``/``last`` checkpoints; every ``checkpoint_every_steps`` optimizer steps, a
mid-epoch ``last`` checkpoint. ``resume=True`` continues from ``last`` exactly where it stopped:
same batch order (the epoch's shuffle is a function of ``seed`` and ``epoch``), same RNG states,
same optimizer/scheduler/scaler states — on CPU with ``deterministic=True`` a killed and resumed
run ends with bitwise the same weights as an uninterrupted one.

AMP: ``auto`` is bf16 on GPUs that support it, fp16 with a ``GradScaler`` on older GPUs, and off
on CPU; ``bf16``/``fp16`` force a dtype (CPU autocast included); ``off`` disables it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from typing_extensions import TypeIs

import numpy as np
import torch
from torch import nn

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers import checkpoint as ckpt
from fstrain.trainers.config import TorchOptions
from fstrain.trainers.divergence import TrainingDivergedError
from fstrain.trainers.metrics import classification_metrics, is_better
from fstrain.trainers.seeding import (
    numpy_rng_state,
    python_rng_state,
    set_numpy_rng_state,
    set_python_rng_state,
    set_torch_rng_tensors,
    torch_generator,
    torch_rng_tensors,
    worker_init_fn,
)

#: train rows scored in eval mode after every epoch (a fixed seeded sample), for the curves
TRAIN_EVAL_ROWS = 2048
#: fewer when each row is loaded from a file (images)
TRAIN_EVAL_ROWS_FILES = 512
#: on a GPU the loss is checked for NaN every this many batches (a host sync), and at epoch end
NAN_CHECK_EVERY = 50
#: written next to the checkpoints when the loss becomes NaN/inf
DIVERGED_FILE = "diverged.json"

_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm, nn.LocalResponseNorm)


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


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


class _IndexSampler(torch.utils.data.Sampler[int]):
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
    from torch.utils.data.distributed import DistributedSampler

    # torch annotates the dataset as a Dataset, but the sampler only reads its len()
    sampler: DistributedSampler[int] = DistributedSampler(
        range(n), num_replicas=world_size, rank=rank, shuffle=True, seed=seed,  # type: ignore[arg-type]
        drop_last=False,
    )
    sampler.set_epoch(epoch)
    return list(sampler)


# --------------------------------------------------------------------------------------------
# Optimizer, scheduler, AMP
# --------------------------------------------------------------------------------------------


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


def _streamed_train(dataset: torch.utils.data.Dataset[Any] | StreamedSplit,
                    ) -> TypeIs[StreamedSplit]:
    return bool(getattr(dataset, "streamed", False))


def _streamed_val(dataset: torch.utils.data.Dataset[Any] | StreamedValSplit,
                  ) -> TypeIs[StreamedValSplit]:
    return bool(getattr(dataset, "streamed", False))


def _rows(dataset: object, what: str) -> int:
    """The rows of a map-style dataset; one without a length is refused by name."""
    if not isinstance(dataset, Sized):
        raise InvalidArgumentError(
            f"The {what} set {type(dataset).__name__} has no length: the loop reads a map-style "
            "dataset (__len__ and __getitem__) or a streamed split.")
    return len(dataset)


def _batches(dataset: Any, loader: Any, indices: list[int], batch_size: int,
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


# --------------------------------------------------------------------------------------------
# Distributed hooks (filled in by fstrain.trainers.distributed)
# --------------------------------------------------------------------------------------------


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
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self._comm_device())
        dist.all_reduce(t)
        return float(t.item()) / self.world_size

    def all_gather(self, obj: Any) -> list[Any]:
        """``obj`` from every rank, in rank order."""
        if self.world_size == 1:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def _comm_device(self) -> torch.device:
        import torch.distributed as dist

        return self.device if dist.get_backend() == "nccl" and self.device else torch.device("cpu")


def _rank_snapshot(generator: Any, epoch_loss_sum: float, batch_in_epoch: int) -> dict[str, Any]:
    """What differs between ranks at a checkpoint: RNG states (JSON-able host states and torch
    tensors), the rank's partial train-loss sum of the epoch and the batch it resumes at."""
    return {"host": {"python": python_rng_state(), "numpy": numpy_rng_state(),
                     "epoch_loss_sum": epoch_loss_sum, "batch_in_epoch": batch_in_epoch},
            "tensors": torch_rng_tensors(generator)}


def _rank_rng(
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


def _check_mid_epoch_checkpoints(train_set: Any, opts: TorchOptions) -> None:
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


def _check_mid_epoch_resume(meta: dict[str, Any], dist: DistContext,
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
    now = _shards(streamed, dist.world_size)
    had = (meta.get("train_stream") or {}).get("pieces_sha256")
    if had and now and had != now["pieces_sha256"]:
        raise ConfigError(
            f"Cannot resume: {where}; the checkpoint's ranks read pieces {had}, these ranks "
            f"would read pieces {now['pieces_sha256']} (other row groups or another dealing "
            "of them), so the rest of the epoch would not be its unseen rows. Resume with the "
            "same training dataset version and fstrain version, or start fresh.")


def _shards(streamed: Any, world_size: int) -> dict[str, Any] | None:
    """A streamed train set's pieces as dealt to ``world_size`` ranks (hashed), if it says."""
    shards = getattr(streamed, "shards", None)
    return shards(world_size) if shards is not None else None


def _check_stream_layout(meta: dict[str, Any], streamed: Any) -> None:
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


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


@dataclass
class LoopSpec:
    """Inputs of :func:`fit`."""

    model: nn.Module
    train_set: torch.utils.data.Dataset[Any] | StreamedSplit
    val_set: torch.utils.data.Dataset[Any] | StreamedValSplit
    n_classes: int
    options: TorchOptions
    seed: int
    metric: str
    mode: str
    class_weight: np.ndarray | None = None
    checkpoint_dir: Path | None = None
    config: dict[str, Any] = field(default_factory=dict)
    lineage: dict[str, Any] | None = None
    resume: bool = False
    report: Callable[[dict[str, Any]], None] | None = None
    on_step: Callable[[int], None] | None = None
    on_checkpoint: Callable[[Path, dict[str, Any]], None] | None = None
    dist: DistContext = field(default_factory=DistContext)


@dataclass
class LoopResult:
    """Outputs of :func:`fit`; ``model`` holds the best epoch's weights (unwrapped)."""

    model: nn.Module
    history: list[dict[str, Any]]
    best_metric: float | None
    best_epoch: int
    metrics: dict[str, float]
    device: str
    amp: str
    global_step: int
    resumed_from: dict[str, Any] | None
    notes: list[str]
    lr: float | None = None  # the (scaled) learning rate the optimizer started from


def _clone_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


@torch.inference_mode()
def evaluate(
    model: nn.Module,
    loader: Iterable[Any],
    device: torch.device,
    amp_dtype: torch.dtype | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities (fp32 softmax) and labels over ``loader``."""
    was_training = model.training
    model.eval()
    probs, labels = [], []
    for xb, yb in loader:
        xb = xb.to(device, non_blocking=True)
        with torch.autocast(device_type=device.type, dtype=amp_dtype or torch.float32,
                            enabled=amp_dtype is not None):
            logits = model(xb)
        probs.append(torch.softmax(logits.float(), dim=1).cpu().numpy())
        labels.append(yb.numpy())
    model.train(was_training)
    if not probs:
        return np.zeros((0, 0)), np.zeros((0,), dtype=np.int64)
    return np.concatenate(probs), np.concatenate(labels)


def fit(spec: LoopSpec) -> LoopResult:
    """Train ``spec.model``; see the module docstring for the exact step order."""
    run = _Run(spec)
    if spec.resume:
        run.resume()
    return run.train()


class _Run:
    """One call of :func:`fit`: the model, optimiser, loaders and loop state it works on."""

    def __init__(self, spec: LoopSpec) -> None:
        self.spec, self.opts, self.dist = spec, spec.options, spec.dist
        opts, dist = self.opts, self.dist
        self.device = dist.device or resolve_device(opts.device)
        self.amp_dtype, self.use_scaler = resolve_amp(opts.amp, self.device)
        self.raw_model = spec.model.to(self.device)
        if opts.activation_checkpointing:
            enable_activation_checkpointing(self.raw_model)
        self.model = dist.wrap(self.raw_model) if dist.wrap else self.raw_model
        self.lr, self.lr_note = effective_lr(opts, dist.world_size)
        self.optimizer = make_optimizer(self.raw_model, opts, self.lr)
        self.n_train = _rows(spec.train_set, "train")
        # a streamed split (fstrain.trainers.stream) deals its own shards and batches
        self.stream = spec.train_set if _streamed_train(spec.train_set) else None
        self.streamed = self.stream is not None
        if self.streamed and opts.num_workers:
            raise ConfigError("torch.num_workers applies to in-memory datasets; a streamed split "
                              "reads its pieces itself. Set torch.num_workers: 0.")
        if self.stream is not None:
            self.n_batches = self.stream.steps(dist.world_size, opts.batch_size)
            _check_mid_epoch_checkpoints(self.stream, opts)
        else:
            per_rank = len(epoch_indices(self.n_train, seed=spec.seed, epoch=0, rank=dist.rank,
                                         world_size=dist.world_size))
            self.n_batches = max(1, math.ceil(per_rank / opts.batch_size))
        opt_steps_per_epoch = math.ceil(self.n_batches / opts.grad_accum_steps)
        self.scheduler, self.per_step = make_scheduler(
            self.optimizer, opts, opts.epochs * opt_steps_per_epoch, spec.mode,
            steps_per_epoch=opt_steps_per_epoch, lr=self.lr,
        )
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.use_scaler)
        weight = None
        if spec.class_weight is not None:
            weight = torch.as_tensor(spec.class_weight, dtype=torch.float32, device=self.device)
        self.loss_fn = nn.CrossEntropyLoss(weight=weight, label_smoothing=opts.label_smoothing)
        self.generator = torch_generator(spec.seed)
        self.sampler = _IndexSampler()
        self.train_loader, self.val_loader = self._loaders()
        self.train_eval_loader = self._train_eval_loader()
        self.bad_batch = torch.full((), -1, dtype=torch.int64, device=self.device)
        self.bad_value = torch.zeros((), dtype=torch.float32, device=self.device)
        self._reset_epoch_stats()
        self.state: dict[str, Any] = {
            "epoch": 0, "batch_in_epoch": 0, "global_step": 0, "best_metric": None,
            "best_epoch": -1, "bad_epochs": 0, "history": [], "epoch_loss_sum": 0.0,
            "epoch_batches": 0, "stopped_early": False,
        }
        self.best_state: dict[str, torch.Tensor] | None = None
        self.resumed_from: dict[str, Any] | None = None
        self.ckdir = spec.checkpoint_dir if opts.checkpoint else None
        self.samples_seen = 0
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)

    def _loaders(self) -> tuple[torch.utils.data.DataLoader[Any] | None, Iterable[Any]]:
        """The train loader (None for a streamed train split) and the validation batches."""
        spec, opts, dist = self.spec, self.opts, self.dist
        loader_kwargs: dict[str, Any] = {
            "batch_size": opts.batch_size, "num_workers": opts.num_workers, "collate_fn": collate,
            "pin_memory": self.device.type == "cuda", "worker_init_fn": worker_init_fn,
            "generator": self.generator,
        }
        if opts.num_workers > 0:
            loader_kwargs["persistent_workers"] = True
        train_set, val_set = spec.train_set, spec.val_set
        train = (None if _streamed_train(train_set) else
                 torch.utils.data.DataLoader(train_set, sampler=self.sampler, **loader_kwargs))
        if _streamed_val(val_set):
            from fstrain.trainers.stream.pieces import Reiterable

            streamed_val = val_set
            return train, Reiterable(lambda: streamed_val.batches(
                dist.rank, dist.world_size, max(opts.batch_size, 256)))
        val_indices = list(range(dist.rank, _rows(val_set, "validation"), dist.world_size))
        val = torch.utils.data.DataLoader(
            torch.utils.data.Subset(val_set, val_indices),
            batch_size=max(opts.batch_size, 256), shuffle=False, num_workers=0, collate_fn=collate,
        )
        return train, val

    def _train_eval_loader(self) -> torch.utils.data.DataLoader:
        """A fixed, seeded sample of train rows (this rank's share), scored every epoch."""
        spec, dist = self.spec, self.dist
        dataset = spec.train_set
        if _streamed_train(dataset):  # a seeded sample read from the stream, held in memory
            dataset = ArrayDataset(*dataset.sample(TRAIN_EVAL_ROWS, spec.seed))
            rows = list(range(len(dataset)))[dist.rank::dist.world_size]
        else:
            cap = TRAIN_EVAL_ROWS if isinstance(dataset, ArrayDataset) else TRAIN_EVAL_ROWS_FILES
            drawn = np.random.default_rng(spec.seed).permutation(self.n_train)[:cap]
            rows = np.sort(drawn)[dist.rank::dist.world_size].tolist()
        return torch.utils.data.DataLoader(
            torch.utils.data.Subset(dataset, rows), batch_size=max(self.opts.batch_size, 256),
            shuffle=False, num_workers=0, collate_fn=collate,
        )

    def _reset_epoch_stats(self) -> None:
        """Per-epoch gradient-norm and input-pipeline accumulators (device tensors: no sync)."""
        self.gn_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        self.gn_max = torch.zeros((), dtype=torch.float64, device=self.device)
        self.gn_nonfinite = torch.zeros((), dtype=torch.int64, device=self.device)
        self.gn_count = 0
        self.data_seconds = 0.0

    # ------------------------------------------------------------------ checkpoints

    def resume(self) -> None:
        """Restore model, optimiser, scheduler, scaler, RNG and loop state from ``last``."""
        ckdir = self.ckdir
        if ckdir is None:
            raise ConfigError(
                "resume=True needs checkpoints (torch.checkpoint: true and a workdir)."
            )
        if ckpt.locate(ckdir, "last") is None:
            return
        model_state, tensors, meta = ckpt.read(ckdir, "last")
        ckpt.check_compatible(meta, self.spec.config, self.spec.lineage)
        _check_stream_layout(meta, self.stream)
        _check_mid_epoch_resume(meta, self.dist, self.stream)
        self.raw_model.load_state_dict(model_state)
        self.optimizer.load_state_dict(ckpt.unflatten(meta["optimizer"], tensors))
        if self.scheduler is not None and meta.get("scheduler") is not None:
            self.scheduler.load_state_dict(ckpt.unflatten(meta["scheduler"], tensors))
        if meta.get("scaler"):
            self.scaler.load_state_dict(ckpt.unflatten(meta["scaler"], tensors))
        host, rank_tensors = _rank_rng(meta, tensors, self.dist)
        start = meta["loop"].get("batch_in_epoch") or 0
        if host.get("batch_in_epoch", start) != start:
            raise ConfigError(f"Cannot resume: the checkpoint has rank {self.dist.rank} at "
                              f"batch {host['batch_in_epoch']} of its epoch, rank 0 at batch "
                              f"{start}; it is not from one data-parallel run. Start fresh.")
        set_python_rng_state(host["python"])
        set_numpy_rng_state(host["numpy"])
        set_torch_rng_tensors(rank_tensors, self.generator)
        state = self.state
        state.update(meta["loop"])
        state["epoch_loss_sum"] = host.get("epoch_loss_sum", state["epoch_loss_sum"])
        if state.get("epoch_grad_norms"):  # a mid-epoch checkpoint: the epoch's stats so far
            gn_sum, gn_max, nonfinite, self.gn_count = state["epoch_grad_norms"]
            self.gn_sum.fill_(gn_sum)
            self.gn_max.fill_(gn_max)
            self.gn_nonfinite.fill_(nonfinite)
        if ckpt.locate(ckdir, "best") is not None:
            self.best_state = ckpt.read(ckdir, "best")[0]
        self.resumed_from = {"epoch": state["epoch"], "batch_in_epoch": state["batch_in_epoch"],
                             "global_step": state["global_step"]}

    def save(self, name: str) -> None:
        """Write checkpoint ``name`` (every rank's RNG states, collected by rank 0)."""
        ckdir, dist = self.ckdir, self.dist
        if ckdir is None:
            return
        # every rank's RNG states (dropout masks differ per rank), collected by rank 0
        ranks = (dist.all_gather(_rank_snapshot(self.generator, self.state["epoch_loss_sum"],
                                                self.state["batch_in_epoch"]))
                 if dist.world_size > 1 else None)
        if not dist.is_main:
            return
        tensors = torch_rng_tensors(self.generator)
        meta = self._checkpoint_meta(tensors)
        if ranks is not None:
            meta["rng_by_rank"] = [r["host"] for r in ranks]
            for rank, snapshot in enumerate(ranks[1:], start=1):
                tensors.update({f"rank{rank}.{k}": v for k, v in snapshot["tensors"].items()})
        path = ckpt.write(ckdir, name, model_state=self.raw_model.state_dict(),
                          state_tensors=tensors, meta=meta)
        if self.spec.on_checkpoint is not None:
            self.spec.on_checkpoint(path, meta)

    def _checkpoint_meta(self, tensors: dict[str, Any]) -> dict[str, Any]:
        scheduler = self.scheduler
        return {
            "loop": self.state,
            "optimizer": ckpt.flatten(self.optimizer.state_dict(), tensors, "optimizer"),
            "scheduler": (ckpt.flatten(scheduler.state_dict(), tensors, "scheduler")
                          if scheduler is not None else None),
            "scaler": (ckpt.flatten(self.scaler.state_dict(), tensors, "scaler")
                       if self.use_scaler else None),
            "rng": {"python": python_rng_state(), "numpy": numpy_rng_state()},
            "config": self.spec.config,
            "lineage": self.spec.lineage,
            "torch_version": torch.__version__,
            "world_size": self.dist.world_size,
            "selection": {"metric": self.spec.metric, "mode": self.spec.mode},
            # a streamed train set's rows and each rank's pieces: where a resume picks up
            "train_stream": _shards(self.stream, self.dist.world_size),
        }

    # ------------------------------------------------------------------ the loop

    def train(self) -> LoopResult:
        """Run the remaining epochs (early stopping permitting) and return the best model."""
        t_start = time.perf_counter()
        while self.state["epoch"] < self.opts.epochs and not self.state["stopped_early"]:
            t_epoch = time.perf_counter()
            self._train_epoch()
            self._end_epoch(t_epoch)
        if self.best_state is not None:
            self.raw_model.load_state_dict(self.best_state)
        self.raw_model.eval()
        return self._result(time.perf_counter() - t_start)

    def _train_epoch(self) -> None:
        spec, opts, state = self.spec, self.opts, self.state
        bs = opts.batch_size
        start = state["batch_in_epoch"]
        if not self.streamed:
            indices = epoch_indices(self.n_train, seed=spec.seed, epoch=state["epoch"],
                                    rank=self.dist.rank, world_size=self.dist.world_size)
            self.sampler.indices = indices[start * bs:]
        self.loss_sum.fill_(state["epoch_loss_sum"])
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        if self.stream is not None:  # the same seeded order from batch `start`
            batches = iter(self.stream.epoch_batches(
                state["epoch"], self.dist.rank, self.dist.world_size, bs,
                **({"start": start} if start else {})))
        else:
            batches = iter(_batches(spec.train_set, self.train_loader, self.sampler.indices, bs,
                                    opts.num_workers))
        i = start
        while True:
            t_wait = time.perf_counter()
            batch = next(batches, None)
            self.data_seconds += time.perf_counter() - t_wait  # the input pipeline's share
            if batch is None:
                break
            self._train_batch(i, *batch)
            i += 1
        self._check_finite(force=True)

    def _train_batch(self, i: int, xb: torch.Tensor, yb: torch.Tensor) -> None:
        accum, device = self.opts.grad_accum_steps, self.device
        xb = xb.to(device, non_blocking=True)
        yb = yb.to(device, non_blocking=True)
        mix = None
        if self.opts.augment_shift or self.opts.mixup_alpha:
            gen = self._batch_generator(i)
            if self.opts.augment_shift:
                xb = shift_images(xb, self.opts.augment_shift, gen)
            if self.opts.mixup_alpha:
                mix = self._mixup(xb, gen)
                xb = mix[0]
        group_start = (i // accum) * accum
        group_size = min(accum, self.n_batches - group_start)
        boundary = (i + 1) % accum == 0 or i + 1 == self.n_batches
        model = self.model
        no_sync = getattr(model, "no_sync", None)  # DistributedDataParallel's
        sync_ctx = no_sync() if (not boundary and no_sync is not None) else _null()
        with sync_ctx:
            if self.amp_dtype is not None:
                with torch.autocast(device_type=device.type, dtype=self.amp_dtype):
                    logits = model(xb)
                logits = logits.float()
            else:
                logits = model(xb)
            loss = self.loss_fn(logits, yb)
            if mix is not None:
                lam, perm = mix[1], mix[2]
                loss = lam * loss + (1.0 - lam) * self.loss_fn(logits, yb[perm])
            self._watch(i, loss)
            scaled = loss / group_size if group_size > 1 else loss
            (self.scaler.scale(scaled) if self.use_scaler else scaled).backward()
        self.loss_sum += loss.detach()
        self.state["epoch_batches"] += 1
        self.samples_seen += len(yb)
        if boundary:
            self._optimizer_step(i)

    def _batch_generator(self, i: int) -> torch.Generator:
        """The augmentation generator of batch ``i`` of this epoch on this rank: seeded from
        ``(seed, rank, epoch, i)``, so a resumed run draws the same shifts and mixup pairs
        as an uninterrupted one, whatever else consumed the loader's generator."""
        key = [self.spec.seed, self.dist.rank, self.state["epoch"], i]
        seed = int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0])
        return torch.Generator().manual_seed(seed)

    def _mixup(self, xb: torch.Tensor,
               gen: torch.Generator) -> tuple[torch.Tensor, float, torch.Tensor]:
        """Mixup: λ ~ Beta(α, α) and a permutation drawn from the batch's seeded generator;
        the inputs mixed as ``λ·x + (1-λ)·x[perm]``."""
        lam, perm = mixup_draw(len(xb), self.opts.mixup_alpha, gen)
        perm = perm.to(xb.device)
        return lam * xb + (1.0 - lam) * xb[perm], lam, perm

    def _watch(self, i: int, loss: torch.Tensor) -> None:
        """Remember the first non-finite loss of the run; check it (a host sync) on CPU every
        batch, on a GPU every :data:`NAN_CHECK_EVERY` batches."""
        bad = ~torch.isfinite(loss.detach()) & (self.bad_batch < 0)
        self.bad_batch = torch.where(bad, torch.full_like(self.bad_batch, i), self.bad_batch)
        self.bad_value = torch.where(bad, loss.detach().float(), self.bad_value)
        self._check_finite(force=self.device.type == "cpu" or i % NAN_CHECK_EVERY == 0)

    def _check_finite(self, *, force: bool) -> None:
        """Raise :class:`TrainingDivergedError` naming the epoch and batch of a NaN/inf loss."""
        if not force:
            return
        batch = int(self.bad_batch.item())
        if batch >= 0:
            error = TrainingDivergedError(
                model=type(self.raw_model).__name__, epoch=self.state["epoch"], batch=batch,
                global_step=self.state["global_step"], value=float(self.bad_value.item()),
                hint=self._last_grad_hint())
            self._record_divergence(error)
            raise error

    def _record_divergence(self, error: TrainingDivergedError) -> None:
        """``checkpoints/diverged.json``: where the loss broke and the epochs before it, for
        ``fstrain doctor`` on the run folder (no model is registered for a diverged run)."""
        if self.ckdir is None or not self.dist.is_main:
            return
        import json

        self.ckdir.mkdir(parents=True, exist_ok=True)
        record = {"epoch": error.epoch, "batch": error.batch, "global_step": error.global_step,
                  "value": str(error.value), "message": str(error),
                  "metric": self.spec.metric, "mode": self.spec.mode,
                  "history": self.state["history"]}
        (self.ckdir / DIVERGED_FILE).write_text(json.dumps(record, indent=1, default=str))

    def _last_grad_hint(self) -> str:
        history = self.state["history"]
        if not history or history[-1].get("grad_norm_max") is None:
            return ""
        return (f"The previous epoch's largest gradient norm was "
                f"{history[-1]['grad_norm_max']:.3g}.")

    def _grad_norm(self) -> None:
        """The total gradient norm of this step (before clipping), into the epoch's stats."""
        opts, params = self.opts, self.raw_model.parameters()
        if self.use_scaler:
            self.scaler.unscale_(self.optimizer)
        if opts.grad_clip is not None:
            norm = nn.utils.clip_grad_norm_(params, opts.grad_clip)
        else:
            grads = [p.grad for p in params if p.grad is not None]
            if not grads:
                return
            norm = nn.utils.get_total_norm(grads)
        norm = norm.detach().to(torch.float64)
        finite = torch.isfinite(norm)
        self.gn_nonfinite += (~finite).to(torch.int64)
        norm = torch.where(finite, norm, torch.zeros_like(norm))
        self.gn_sum += norm
        self.gn_max = torch.maximum(self.gn_max, norm)
        self.gn_count += 1

    def _optimizer_step(self, i: int) -> None:
        opts, state, optimizer = self.opts, self.state, self.optimizer
        self._grad_norm()
        if self.use_scaler:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None and self.per_step:
            self.scheduler.step()
        state["global_step"] += 1
        if (
            opts.checkpoint_every_steps
            and state["global_step"] % opts.checkpoint_every_steps == 0
            and i + 1 < self.n_batches
        ):
            state["batch_in_epoch"] = i + 1
            state["epoch_loss_sum"] = float(self.loss_sum.item())
            state["epoch_grad_norms"] = [float(self.gn_sum.item()), float(self.gn_max.item()),
                                         int(self.gn_nonfinite.item()), self.gn_count]
            self._check_finite(force=True)  # never checkpoint a diverged model
            self.save("last")
        if self.spec.on_step is not None:
            self.spec.on_step(state["global_step"])

    def _end_epoch(self, t_epoch: float) -> None:
        """Metrics, schedulers, early stopping and checkpoints at the end of an epoch."""
        spec, state, dist = self.spec, self.state, self.dist
        epoch = state["epoch"]
        train_loss = dist.all_reduce_mean(float(self.loss_sum.item())
                                          / max(state["epoch_batches"], 1))
        t_train = time.perf_counter() - t_epoch
        value, val = self._validate()
        train_eval = self._score(self.train_eval_loader)
        if self.scheduler is not None and not self.per_step:
            self.scheduler.step(value)
        row = {
            "epoch": epoch,
            "train_loss": train_loss,
            **{f"val_{k}": v for k, v in val.items() if k != "n"},
            **{f"train_{k}": v for k, v in train_eval.items() if k != "n"},
            "lr": self.optimizer.param_groups[0]["lr"],
            "global_step": state["global_step"],
            "epoch_seconds": time.perf_counter() - t_epoch,
            **self._epoch_stats(t_train),
        }
        self._reset_epoch_stats()
        state["history"].append(row)
        improved = is_better(value, state["best_metric"], spec.mode)
        if improved:
            state["best_metric"], state["best_epoch"], state["bad_epochs"] = value, epoch, 0
            self.best_state = _clone_state(self.raw_model)
        else:
            state["bad_epochs"] += 1
            if self.opts.patience is not None and state["bad_epochs"] >= self.opts.patience:
                state["stopped_early"] = True
        state["epoch"] = epoch + 1
        state["batch_in_epoch"] = 0
        state["epoch_loss_sum"] = 0.0
        state["epoch_batches"] = 0
        state["epoch_grad_norms"] = None
        self.save("last")
        if improved and self.ckdir is not None and dist.is_main:
            ckpt.copy(self.ckdir, "last", "best")
        if spec.report is not None:
            spec.report(dict(row))

    def _validate(self) -> tuple[float, dict[str, Any]]:
        """The selection metric and every validation metric, over all ranks' shards."""
        val = self._score(self.val_loader)
        return val[self.spec.metric], val

    def _score(self, loader: Iterable[Any]) -> dict[str, Any]:
        """Eval-mode metrics over every rank's shard of ``loader``."""
        probs, labels = evaluate(self.model, loader, self.device, self.amp_dtype)
        gathered = self.dist.all_gather((probs, labels))
        probs = np.concatenate([g[0] for g in gathered if len(g[1])])
        labels = np.concatenate([g[1] for g in gathered if len(g[1])])
        return classification_metrics(labels, probs, self.spec.n_classes)

    def _epoch_stats(self, train_seconds: float) -> dict[str, Any]:
        """Gradient norms (before clipping) and the input pipeline's time in this epoch."""
        count = max(self.gn_count, 1)
        return {
            "grad_norm_mean": self.dist.all_reduce_mean(float(self.gn_sum.item()) / count),
            "grad_norm_max": float(self.gn_max.item()),
            "grad_norm_nonfinite": int(self.gn_nonfinite.item()),
            "data_seconds": self.data_seconds,
            "train_seconds": train_seconds,
        }

    def _result(self, elapsed: float) -> LoopResult:
        state, amp_dtype = self.state, self.amp_dtype
        best_row = next((r for r in state["history"] if r["epoch"] == state["best_epoch"]), None)
        metrics = {k[4:]: v for k, v in (best_row or {}).items() if k.startswith("val_")}
        return LoopResult(
            model=self.raw_model, history=state["history"], best_metric=state["best_metric"],
            best_epoch=state["best_epoch"], metrics=metrics, device=self.device.type,
            amp=str(amp_dtype).removeprefix("torch.") if amp_dtype else "off",
            global_step=state["global_step"], resumed_from=self.resumed_from, lr=self.lr,
            notes=self._notes()
            + [f"throughput: {self.samples_seen / max(elapsed, 1e-9):.0f} samples/s"],
        )

    def _notes(self) -> list[str]:
        notes = []
        if self.amp_dtype is not None:
            notes.append(f"AMP {str(self.amp_dtype).removeprefix('torch.')} on "
                         f"{self.device.type}: low-precision matmuls; bitwise results depend on "
                         "the kernel selection of the device")
        if self.dist.world_size > 1:
            notes.append(
                f"DDP over {self.dist.world_size} ranks: gradient all-reduce sums in bucket "
                "order (reproducible for a fixed world size and hardware); checkpoints hold "
                "every rank's RNG states, and a resume with another world size continues from "
                "rank 0's"
            )
        if self.lr_note is not None:
            notes.append(self.lr_note)
        if self.opts.num_workers > 0:
            notes.append(f"DataLoader workers={self.opts.num_workers}: seeded from the loader "
                         "generator")
        return notes


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


def enable_activation_checkpointing(model: nn.Module) -> None:
    """Turn on activation checkpointing of a net's hidden blocks (see :mod:`.nets`)."""
    if not hasattr(model, "activation_checkpointing"):
        raise ConfigError(f"torch.activation_checkpointing is not supported by model "
                          f"{type(model).__name__} (it has no hidden blocks to recompute).")
    # a plain flag the nets declare (nn.Module types attribute assignment as Tensor | Module)
    setattr(model, "activation_checkpointing", True)  # noqa: B010


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
