"""Data-parallel PyTorch on Ray Train, and the DeepSpeed ZeRO-2 config for larger models.

:func:`train_distributed` runs :func:`fstrain.trainers.loop.fit` in ``num_workers`` Ray Train
workers (``TorchTrainer``): gloo on CPU, nccl on GPUs. Each worker wraps the net in DDP
(``ray.train.torch.prepare_model``) and reads its own shard of every epoch
through Ray Data (an ``mlp``: :mod:`fstrain.trainers.stream.ray_feed`, every train row once per
epoch, shuffled through a buffer seeded by seed, epoch and rank) or in ``DistributedSampler``
order seeded by ``seed`` + epoch (a ``cnn``'s image paths); the global batch is
``batch_size × num_workers × grad_accum_steps``. Validation predictions are gathered from all
ranks so every rank computes the same metrics; the train loss is all-reduced. Rank 0 writes the
checkpoints (``workdir/checkpoints``, which must be on storage all workers see — true locally,
a shared file system on a cluster) and reports them to Ray Train; a mid-epoch one records every
rank's batch and a hash of the ranks' pieces, and a resumed rank starts its epoch there.

When to move to FSDP/DeepSpeed
------------------------------
DDP keeps a full copy of the parameters, gradients and AdamW state (≈16 bytes per parameter in
fp32 + mixed precision) on every device. Move on when that no longer fits:

- the model fits one device but its optimizer state does not (≈ >1–2B parameters on an 80 GB
  GPU): ZeRO-2 (shard optimizer state and gradients) — :func:`deepspeed_config` maps our
  config onto ``templates/deepspeed_zero2.json``; or PyTorch FSDP with
  ``ShardingStrategy.SHARD_GRAD_OP``;
- the parameters themselves do not fit: ZeRO-3 / FSDP ``FULL_SHARD`` (+ CPU offload if needed);
- a single layer does not fit: tensor parallelism (beyond this project).

Costs: sharded checkpoints (consolidate on save), more communication, wrapping policies to tune.
Nothing in fstrain's tabular and MNIST models needs this; DDP (or one device) is right for them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.trainers.config import TrainConfig, load_config
from fstrain.trainers.result import TrainResult
from fstrain.trainers.torch_predictor import TorchPredictor
from fstrain.kernel.errors import ConfigError
from fstrain.trainers import checkpoint as ckpt
from fstrain.trainers.distributed_record import distributed_record, pieces_each_row_once
from fstrain.trainers.metrics import resolve_metric
from fstrain.trainers.seeding import deterministic_mode, seed_everything
from fstrain.trainers.stream import ray_feed
from fstrain.trainers.stream.ray_feed import RankFeed, RayShardStream
from fstrain.trainers.stream.source import StreamSource
from fstrain.trainers.torch_models import (
    calibrated_metrics,
    prepare_torch_data,
    stream_torch_data,
    torch_curves,
)
from fstrain.trainers.tuning import ray_session

RANKS_FILE = "rank_metrics.json"
TEMPLATE = Path(__file__).with_name("templates") / "deepspeed_zero2.json"


def deepspeed_config(train_config: TrainConfig | dict[str, Any], world_size: int = 1,
                     steps_per_epoch: int | None = None) -> dict[str, Any]:
    """Map our :class:`TrainConfig` onto the shipped DeepSpeed ZeRO-2 template.

    Batch sizes (``train_micro_batch_size_per_gpu`` = ``torch.batch_size``, accumulation,
    ``train_batch_size`` = micro × accumulation × ``world_size``), clipping, precision (bf16 for
    ``auto``/``bf16``, fp16 with dynamic loss scaling for ``fp16``), AdamW (lr, betas, weight
    decay) and the scheduler (``warmup_cosine`` → ``WarmupCosineLR``, ``one_cycle`` →
    ``OneCycle``; ``plateau`` has no DeepSpeed equivalent and is left to the training script).
    """
    cfg = load_config(train_config)
    t = cfg.torch
    ds = json.loads(TEMPLATE.read_text())
    ds["train_micro_batch_size_per_gpu"] = t.batch_size
    ds["gradient_accumulation_steps"] = t.grad_accum_steps
    ds["train_batch_size"] = t.batch_size * t.grad_accum_steps * world_size
    ds["gradient_clipping"] = float(t.grad_clip) if t.grad_clip else 0.0
    ds["bf16"]["enabled"] = t.amp in ("auto", "bf16")
    ds["fp16"]["enabled"] = t.amp == "fp16"
    ds["optimizer"]["params"].update(
        lr=t.lr, betas=list(t.betas), weight_decay=t.weight_decay, eps=1e-8
    )
    total = t.epochs * steps_per_epoch if steps_per_epoch else None
    if t.scheduler == "warmup_cosine":
        ds["scheduler"] = {
            "type": "WarmupCosineLR",
            "params": {"warmup_num_steps": t.warmup_steps, "total_num_steps": total or "auto",
                       "cos_min_ratio": t.min_lr_ratio},
        }
    elif t.scheduler == "one_cycle":
        first = max(1, t.warmup_steps or (total or 1000) * 3 // 10)
        ds["scheduler"] = {
            "type": "OneCycle",
            "params": {"cycle_min_lr": t.lr / 25, "cycle_max_lr": t.lr,
                       "cycle_first_step_size": first},
        }
    else:
        ds.pop("scheduler", None)
    ds["seed_note"] = f"seed {cfg.seed}: call deepspeed.runtime.utils.set_random_seed yourself"
    return ds


def _worker(loop_config: dict[str, Any]) -> None:
    """Ray Train worker: build the net, wrap it in DDP, run the shared loop."""
    import ray.train
    import ray.train.torch
    import torch

    from fstrain.trainers.loop import LoopSpec, fit
    from fstrain.trainers.loop_resume import DistContext
    from fstrain.trainers.nets import build_net

    cfg = load_config(loop_config["config"])
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = ray.train.torch.get_device()
    torch.set_num_threads(max(1, loop_config["threads"]))
    dist = DistContext(rank=rank, world_size=world, device=device,
                       wrap=lambda m: ray.train.torch.prepare_model(m, move_to_device=True))
    ckdir = Path(loop_config["checkpoint_dir"])

    def report(row: dict[str, Any]) -> None:
        metrics = {k: v for k, v in row.items() if isinstance(v, (int, float))}
        metrics["world_size"] = world
        checkpoint = None
        if rank == 0 and (ckdir / "last").is_dir():
            checkpoint = ray.train.Checkpoint.from_directory(str(ckdir / "last"))
        ray.train.report(metrics, checkpoint=checkpoint)

    train_set, val_set = loop_config["train_set"], loop_config["val_set"]
    if getattr(train_set, "streamed", False):  # mlp: this rank's blocks from the feeder
        train_set = RayShardStream(RankFeed(loop_config["feeder"], rank), train_set,
                                   epochs=cfg.torch.epochs, start_now=not loop_config["resume"])
    with deterministic_mode(cfg.torch.deterministic):
        seed_everything(cfg.seed)  # same initial weights on every rank (DDP broadcasts anyway)
        net = build_net(loop_config["arch"])
        torch.manual_seed(cfg.seed + 1000 * rank)  # distinct dropout masks per rank
        out = fit(LoopSpec(
            model=net, train_set=train_set, val_set=val_set,
            n_classes=loop_config["n_classes"], options=cfg.torch, seed=cfg.seed,
            metric=loop_config["metric"], mode=loop_config["mode"],
            class_weight=loop_config["class_weight"], checkpoint_dir=ckdir,
            config=cfg.fingerprint_dict(), lineage=loop_config["lineage"],
            resume=loop_config["resume"], report=report, dist=dist,
            on_step=loop_config.get("on_step"),
        ))
        per_rank = dist.all_gather({k: float(v) for k, v in out.metrics.items()})
        if rank == 0:  # the synced metrics every rank computed, for the caller to check
            (ckdir / RANKS_FILE).write_text(json.dumps(
                {"world_size": world, "best_epoch": out.best_epoch, "rank_metrics": per_rank,
                 "resumed_from": out.resumed_from}))


def train_distributed(
    config: TrainConfig | dict[str, Any],
    X_train: pd.DataFrame | None = None,
    y_train: pd.DataFrame | None = None,
    X_val: pd.DataFrame | None = None,
    y_val: pd.DataFrame | None = None,
    *,
    workdir: Path,
    num_workers: int = 2,
    use_gpu: bool | None = None,
    ray_address: str | None = None,
    num_cpus: int = 2,
    image_loader: Callable[[str], np.ndarray] | None = None,
    lineage: dict[str, Any] | None = None,
    resume: bool | None = None,
    source: Any = None,
    on_step: Callable[[int], None] | None = None,
) -> TrainResult:
    """Data-parallel training of an ``mlp``/``cnn`` on Ray Train (see the module docstring).

    An ``mlp`` reads its train shards through Ray Data (:mod:`fstrain.trainers.stream.ray_feed`):
    from ``source`` (a :class:`~fstrain.trainers.stream.source.StreamSource` over a version's
    split files) or, given frames, from Parquet files they are written to once under
    ``workdir``. A ``cnn`` ships its image paths and labels. ``use_gpu=None`` uses GPUs when
    torch sees one. Returns the same :class:`TrainResult` as :func:`fstrain.trainers.train`,
    with the best epoch's weights (rank 0's checkpoint) and ``extra["rank_metrics_agree"]``.

    ``resume`` continues from the last checkpoint, a mid-epoch one
    (``torch.checkpoint_every_steps``) included: each rank starts its epoch at the checkpoint's
    batch with the rows an uninterrupted run would go on with (another world size or train
    split layout is refused). ``on_step`` (picklable) is called in every worker after each
    optimizer step with the global step.
    """
    import torch

    cfg = load_config(config)
    if not cfg.is_torch:
        raise ConfigError(
            f"train_distributed runs torch models (mlp, cnn); got model {cfg.model!r}. "
            "XGBoost scales with its own threads (or xgboost.ray / Spark on a cluster)."
        )
    if not cfg.torch.checkpoint:
        raise ConfigError("train_distributed returns the best epoch's weights from rank 0's "
                          "checkpoints; torch.checkpoint: false would leave none. Drop it.")
    if use_gpu is None:
        use_gpu = torch.cuda.is_available()
    workdir = Path(workdir).resolve()
    ckdir = workdir / "checkpoints"
    data, y_val_codes = _inputs(cfg, X_train, y_train, X_val, y_val, source, workdir,
                                image_loader)
    metric, mode = resolve_metric(cfg, data.labels.n_classes)
    loop_config = {
        "config": cfg.model_dump(mode="json"), "arch": data.arch, "train_set": data.train_set,
        "val_set": data.val_set, "n_classes": data.labels.n_classes, "metric": metric,
        "mode": mode, "class_weight": data.plan.class_weight, "checkpoint_dir": str(ckdir),
        "lineage": lineage, "resume": cfg.resume if resume is None else resume,
        "threads": max(1, num_cpus // num_workers), "on_step": on_step,
    }
    with ray_session(workdir, ray_address=ray_address, num_cpus=num_cpus) as notes:
        result = _fit_on_ray(loop_config, workdir, num_workers, num_cpus, use_gpu)
    notes = [*notes, (
        f"DDP over {num_workers} Ray Train workers ({'nccl' if use_gpu else 'gloo'}): gradient "
        "all-reduce order and per-rank dropout masks make results differ from a single-process "
        "run; a run is reproducible for a fixed world size on the same hardware"
    )]
    out = _distributed_result(cfg, data, ckdir, dict(result.metrics or {}), notes,
                              num_workers=num_workers, use_gpu=use_gpu,
                              image_loader=image_loader, metric=metric, mode=mode)

    out.metrics = calibrated_metrics(out.model, cfg.calibration,
                                     data.val_set if X_val is None or cfg.model == "mlp"
                                     else X_val, y_val_codes, data.plan.record, out.metrics)
    return out


def _inputs(cfg: TrainConfig, X_train: Any, y_train: Any, X_val: Any, y_val: Any, source: Any,
            workdir: Path, image_loader: Any) -> tuple[Any, np.ndarray]:
    """The run's datasets and the encoded validation labels: streamed splits for an ``mlp``
    (frames are written to Parquet once), in-memory path datasets for a ``cnn``."""
    if cfg.model == "cnn":
        if source is not None:
            raise ConfigError("a cnn reads image paths from frames; pass X/y, not a source.")
        data = prepare_torch_data(cfg, X_train, y_train, X_val, y_val, image_loader=image_loader)
        return data, data.labels.encode(y_val, split="validation")
    if cfg.imbalance in ("oversample", "undersample"):
        raise ConfigError(
            f"imbalance={cfg.imbalance!r} resamples train rows in memory; --workers streams "
            "each rank's rows through Ray Data. Use imbalance 'class_weight' (or one process).")
    if source is None:
        source = StreamSource.from_frames(workdir / "input",
                                          {"train": (X_train, y_train),
                                           "validation": (X_val, y_val)})
    data = stream_torch_data(cfg, source)
    return data, data.val_set.labels_and_rows()[0]


def _distributed_result(cfg: Any, data: Any, ckdir: Path, final: dict[str, Any],
                        notes: list[str], *, num_workers: int, use_gpu: bool,
                        image_loader: Callable[[str], np.ndarray] | None, metric: str,
                        mode: str) -> TrainResult:
    """The :class:`TrainResult` of a finished run: the best epoch's weights from rank 0's
    checkpoints, its validation metrics, and every rank's synced metrics."""
    from fstrain.trainers.torch_optim import effective_lr

    lr, lr_note = effective_lr(cfg.torch, num_workers)
    ranks = json.loads((ckdir / RANKS_FILE).read_text())
    per_rank = ranks["rank_metrics"]
    net, history, best_epoch = _best_from_checkpoints(ckdir, data.arch)
    best_row = next(r for r in history if r["epoch"] == best_epoch)
    metrics = {k[4:]: v for k, v in best_row.items() if k.startswith("val_")}
    predictor = TorchPredictor(
        kind=cfg.model, module=net, arch=data.arch, labels=data.labels, schema=data.schema,
        preprocessor=data.preprocessor, image_column=cfg.image_column, image_loader=image_loader,
    )
    return TrainResult(
        model=predictor, metrics=metrics, history=history,
        params={**data.arch, **cfg.torch.model_dump(mode="json")}, imbalance=data.plan.record,
        nondeterminism=notes + ([lr_note] if lr_note else []), config=cfg, metric=metric, mode=mode, best_iteration=best_epoch,
        device="cuda" if use_gpu else "cpu", checkpoint_dir=ckdir,
        curves=torch_curves(history, metric, mode, best_epoch),
        extra={
            "world_size": num_workers, "effective_lr": lr,
            "global_batch": cfg.torch.batch_size * num_workers * cfg.torch.grad_accum_steps,
            "rank_metrics": per_rank,
            "rank_metrics_agree": all(m == per_rank[0] for m in per_rank),
            "last_report": final,
            "resumed_from": ranks.get("resumed_from"),
            "steps_per_epoch": math.ceil(
                math.ceil(len(data.train_set) / num_workers) / cfg.torch.batch_size
            ),
            "distributed": ddp_record(data.train_set, num_workers, use_gpu=use_gpu,
                                      resumed_from=ranks.get("resumed_from")),
        },
    )


def ddp_record(train_set: Any, num_workers: int, *, use_gpu: bool,
               resumed_from: dict[str, Any] | None) -> dict[str, Any]:
    """The run's ``"distributed"`` record (:func:`distributed_record`): each rank's train rows
    per epoch — a streamed split's dealt pieces (every row once, checked), or an in-memory
    one's ``DistributedSampler`` share (padded to equal shares: rows repeat unless the split
    divides evenly) — the backend, and whether the run resumed mid-epoch."""
    n = len(train_set)
    details: dict[str, Any] = {}
    if getattr(train_set, "streamed", False):
        dealt = [train_set.pieces(rank, num_workers) for rank in range(num_workers)]
        rows = [sum(p[2] for p in pieces) for pieces in dealt]
        once = (sum(rows) == n and pieces_each_row_once(
            dealt, train_set.source.group_rows[train_set.split]))
        details["pieces_sha256"] = train_set.shards(num_workers)["pieces_sha256"]
    else:
        rows = [math.ceil(n / num_workers)] * num_workers
        once = n % num_workers == 0
    return distributed_record(
        world_size=num_workers, backend="nccl" if use_gpu else "gloo",
        shards=[{"rank": r, "rows": k} for r, k in enumerate(rows)], rows=n,
        each_row_once=once,
        resumed_mid_epoch=bool(resumed_from and resumed_from.get("batch_in_epoch")),
        **details)


def _fit_on_ray(loop_config: dict[str, Any], workdir: Path, num_workers: int, num_cpus: int,
                use_gpu: bool) -> Any:
    """Run :func:`_worker` on ``num_workers`` Ray Train workers (gloo on CPU, nccl on GPU).

    A streamed train set (``mlp``) is read by a :class:`~fstrain.trainers.stream.ray_feed.ShardFeeder`
    created first, which starts a fresh run's first epoch while Ray Train starts its workers."""
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    streamed = getattr(loop_config["train_set"], "streamed", False)
    feeder = None
    if streamed:
        epochs = load_config(loop_config["config"]).torch.epochs
        feeder = ray_feed.start_feeder(loop_config["train_set"], num_workers, epochs,
                                        start_epoch=None if loop_config["resume"] else 0)
        loop_config = {**loop_config, "feeder": feeder}
    share = max(1, num_cpus // num_workers)
    trainer = TorchTrainer(
        _worker,
        train_loop_config=loop_config,
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        scaling_config=ScalingConfig(
            num_workers=num_workers, use_gpu=use_gpu,
            # Ray Data's read tasks need a slice of each worker's CPU share
            resources_per_worker={"CPU": share - (ray_feed.READ_TASK_CPUS if streamed else 0)}
            if not use_gpu else None,
        ),
        run_config=RunConfig(name="ddp", storage_path=str(workdir / "ray_results")),
    )
    try:
        return trainer.fit()
    finally:
        if feeder is not None:
            ray.kill(feeder)


def _best_from_checkpoints(ckdir: Path, arch: dict[str, Any]) -> tuple[Any, list[dict[str, Any]], int]:
    """Rank 0's best network (eval mode), the epoch history and the best epoch."""
    from fstrain.trainers.nets import build_net

    model_state, _, _ = ckpt.read(ckdir, "best")
    net = build_net(arch)
    net.load_state_dict(model_state)
    net.eval()
    _, _, last_meta = ckpt.read(ckdir, "last")
    return net, last_meta["loop"]["history"], int(last_meta["loop"]["best_epoch"])
