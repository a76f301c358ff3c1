"""Training an ``mlp`` from a version's split files, a row group (Parquet) or a row-aligned
piece of text (csv, jsonl) at a time.

Two ways in, one input path (:mod:`fstrain.trainers.stream`):

- ``torch.streaming: true``: one process streams the train split (data larger than memory);
- ``--workers N``: every Ray Train worker reads its shard through Ray Data
  (:mod:`fstrain.trainers.stream.ray_feed`).

The files come by the one route to a version's files,
:func:`fstrain.trainers.stream.source.version_source` (each checked against its recorded sha256
as the view hands it out), and the view's transformations are applied with the
statistics fitted on the version's train split, exactly as the in-memory read applies them. A
version that cannot be streamed (in memory, not ok, no validation split) is refused when
``torch.streaming`` asks for it; ``--workers`` then reads the frames and writes them to Parquet
once for Ray Data instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fstrain.kernel.errors import ConfigError


def wants_stream(cfg: Any, config: Any) -> bool:
    """Whether this run trains from streamed input: an ``mlp`` with ``torch.streaming``, or
    with ``--workers`` when no option needs the frames (tuning, cross-validation)."""
    frames = config.tune or config.cv is not None or config.find_label_issues
    return bool(cfg.model == "mlp"
                and (cfg.torch.streaming or (config.workers > 1 and not frames)))


def check_streaming_options(cfg: Any, config: Any) -> None:
    """Refuse the pipeline options that work on in-memory frames with ``torch.streaming``
    (mid-epoch checkpoints are fine: one process and the Ray Data shards of ``--workers`` both
    start an epoch at any batch)."""
    if not cfg.torch.streaming:
        return
    given = [flag for flag, on in (("--tune", config.tune), ("--cv", config.cv is not None),
                                   ("--find-label-issues", config.find_label_issues))
             if on]
    if given:
        raise ConfigError(f"torch.streaming trains from the version's files a row group (or a "
                          f"piece of csv/jsonl text) at a time; {', '.join(given)} work on "
                          "in-memory frames. Drop them or set torch.streaming: false.")


def train_streamed(cfg: Any, config: Any, source: Any, workdir: Path,
                   lineage: dict[str, Any]) -> tuple[Any, Any]:
    """Train from ``source`` in this process or on Ray Train workers; the result and one train
    row (the registry's input example)."""
    if config.workers > 1:
        from fstrain.trainers import train_distributed

        result = train_distributed(cfg, source=source, workdir=workdir,
                                   num_workers=config.workers, ray_address=config.ray_address,
                                   num_cpus=config.ray_cpus, lineage=lineage,
                                   resume=config.resume)
    else:
        from fstrain.trainers.torch_models import train_torch_streamed

        result = train_torch_streamed(cfg, source, workdir=workdir, lineage=lineage,
                                      resume=config.resume)
    example = source.read("train", (0, 0, 1))[0]
    return result, example
