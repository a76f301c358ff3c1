"""The ``"distributed"`` record of a data-parallel run: one schema for every trainer that runs on
several Ray Train workers (XGBoost/LightGBM in :mod:`fstrain.trainers.ray_boosting`, torch DDP
in :mod:`fstrain.trainers.distributed`). The trainer puts it in ``TrainResult.extra`` and the
training pipeline writes it into the registered model's training config unchanged.

The record is deterministic for a fixed seed, data and world size: world size, backend, each
rank's train rows per epoch, the exactly-once check and whether the run resumed mid-epoch.
Timings are refused here; a trainer reports them as ``extra["*_seconds"]`` (the training
config's ``"timings"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def distributed_record(*, world_size: int, backend: str, shards: Sequence[dict[str, Any]],
                       rows: int, each_row_once: bool,
                       resumed_mid_epoch: bool | None = None,
                       **details: Any) -> dict[str, Any]:
    """The record: ``world_size``, ``backend`` (``gloo``, ``nccl``, ``xgboost collective``...),
    ``shards`` (one ``{"rank", "rows", ...}`` per rank, in rank order: its train rows per epoch),
    ``rows`` (the train split's), ``each_row_once`` (every train row on exactly one rank per
    epoch), ``resumed_mid_epoch`` (None where the trainer cannot resume) and the trainer's
    ``details`` (e.g. ``threads_per_worker``, ``fingerprint``). Raises ValueError on a record
    that contradicts itself or holds a timing."""
    entries = [dict(s) for s in shards]
    if [s.get("rank") for s in entries] != list(range(world_size)):
        raise ValueError(f"one shard per rank 0..{world_size - 1} in order; got ranks "
                         f"{[s.get('rank') for s in entries]}")
    timed = sorted(k for part in (details, *entries) for k in part if k.endswith("_seconds"))
    if timed:
        raise ValueError(f"the distributed record is deterministic; timings {timed} belong in "
                         "extra['*_seconds']")
    return {"world_size": world_size, "backend": backend, "shards": entries, "rows": rows,
            "each_row_once": each_row_once, "resumed_mid_epoch": resumed_mid_epoch, **details}


def pieces_each_row_once(pieces_per_rank: Sequence[Sequence[tuple[int, int, int]]],
                         group_rows: Sequence[int]) -> bool:
    """Whether ranks' ``(group, offset, rows)`` pieces cover every row of every row group
    (sizes ``group_rows``) exactly once: no gap, no overlap."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for pieces in pieces_per_rank:
        for group, offset, n in pieces:
            spans.setdefault(group, []).append((offset, offset + n))
    for group, size in enumerate(group_rows):
        end = 0
        for start, stop in sorted(spans.pop(group, [])):
            if start != end:
                return False
            end = stop
        if end != size:
            return False
    return not spans
