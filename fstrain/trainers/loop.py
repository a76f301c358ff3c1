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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
import json

import numpy as np
import torch
from torch import nn

from fstrain.kernel.errors import ConfigError
from fstrain.trainers import checkpoint as ckpt
from fstrain.trainers.augment import mixup_draw, shift_images
from fstrain.trainers.config import TorchOptions
from fstrain.trainers.divergence import TrainingDivergedError
from fstrain.trainers.loop_resume import (
    DistContext,
    check_mid_epoch_checkpoints,
    check_mid_epoch_resume,
    check_stream_layout,
    rank_rng,
    rank_snapshot,
    stream_shards,
)
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
from fstrain.trainers.stream.pieces import Reiterable
from fstrain.trainers.torch_inputs import (
    ArrayDataset,
    IndexSampler,
    StreamedSplit,
    StreamedValSplit,
    collate,
    epoch_indices,
    is_streamed_train,
    is_streamed_val,
    map_rows,
    train_batches,
)
from fstrain.trainers.torch_optim import (
    effective_lr,
    make_optimizer,
    make_scheduler,
    resolve_amp,
    resolve_device,
)

#: train rows scored in eval mode after every epoch (a fixed seeded sample), for the curves
TRAIN_EVAL_ROWS = 2048
#: fewer when each row is loaded from a file (images)
TRAIN_EVAL_ROWS_FILES = 512
#: on a GPU the loss is checked for NaN every this many batches (a host sync), and at epoch end
NAN_CHECK_EVERY = 50
#: written next to the checkpoints when the loss becomes NaN/inf
DIVERGED_FILE = "diverged.json"

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
        self.n_train = map_rows(spec.train_set, "train")
        # a streamed split (fstrain.trainers.stream) deals its own shards and batches
        self.stream = spec.train_set if is_streamed_train(spec.train_set) else None
        self.streamed = self.stream is not None
        if self.streamed and opts.num_workers:
            raise ConfigError("torch.num_workers applies to in-memory datasets; a streamed split "
                              "reads its pieces itself. Set torch.num_workers: 0.")
        if self.stream is not None:
            self.n_batches = self.stream.steps(dist.world_size, opts.batch_size)
            check_mid_epoch_checkpoints(self.stream, opts)
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
        self.sampler = IndexSampler()
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
        train = (None if is_streamed_train(train_set) else
                 torch.utils.data.DataLoader(train_set, sampler=self.sampler, **loader_kwargs))
        if is_streamed_val(val_set):
            streamed_val = val_set
            return train, Reiterable(lambda: streamed_val.batches(
                dist.rank, dist.world_size, max(opts.batch_size, 256)))
        val_indices = list(range(dist.rank, map_rows(val_set, "validation"), dist.world_size))
        val = torch.utils.data.DataLoader(
            torch.utils.data.Subset(val_set, val_indices),
            batch_size=max(opts.batch_size, 256), shuffle=False, num_workers=0, collate_fn=collate,
        )
        return train, val

    def _train_eval_loader(self) -> torch.utils.data.DataLoader:
        """A fixed, seeded sample of train rows (this rank's share), scored every epoch."""
        spec, dist = self.spec, self.dist
        dataset = spec.train_set
        if is_streamed_train(dataset):  # a seeded sample read from the stream, held in memory
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
        check_stream_layout(meta, self.stream)
        check_mid_epoch_resume(meta, self.dist, self.stream)
        self.raw_model.load_state_dict(model_state)
        self.optimizer.load_state_dict(ckpt.unflatten(meta["optimizer"], tensors))
        if self.scheduler is not None and meta.get("scheduler") is not None:
            self.scheduler.load_state_dict(ckpt.unflatten(meta["scheduler"], tensors))
        if meta.get("scaler"):
            self.scaler.load_state_dict(ckpt.unflatten(meta["scaler"], tensors))
        host, rank_tensors = rank_rng(meta, tensors, self.dist)
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
        ranks = (dist.all_gather(rank_snapshot(self.generator, self.state["epoch_loss_sum"],
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
            "train_stream": stream_shards(self.stream, self.dist.world_size),
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
            batches = iter(train_batches(spec.train_set, self.train_loader, self.sampler.indices, bs,
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
