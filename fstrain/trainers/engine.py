"""Which engine trains a run, decided once from the trainer config, the run's options and the
training-dataset version; the training pipeline dispatches on the answer and branches nowhere
else.

- ``spark`` — ``spark_gbt`` / ``spark_lr``: Spark MLlib reads the version's Parquet files.
- ``streamed`` — an ``mlp`` with ``torch.streaming: true`` in one process: the torch loop
  reads the version's files a piece at a time.
- ``ray-train`` — ``mlp`` / ``cnn`` with ``--workers N``: torch DDP on Ray Train workers, fed
  from the version's files when an ``mlp``'s version streams and no option needs frames
  (``--tune``, ``--cv``, ``--find-label-issues``), else from the frames.
- ``ray-boosting`` — ``xgboost`` / ``lightgbm`` with ``--workers N``: data-parallel boosting
  on Ray Train from the version's files (the frames are read too for ``--cv`` or
  ``--find-label-issues``).
- ``ray-tune`` — ``--tune``: Ray Tune trials on the frames, the best configuration refitted.
- ``in-memory`` — everything else: one process, the frames.

Engines that read files get them by the one route,
:func:`fstrain.trainers.stream.source.version_source`, resolved here once. Options an engine
cannot honour are refused by :func:`check_engine_options` from the configs alone, before the
store is read.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Protocol

from fstrain.kernel.errors import ConfigError
from fstrain.trainers.config import BOOSTED_TREE_MODELS, SPARK_MODELS, TrainConfig
from fstrain.trainers.ray_boosting import refuse_unsupported
from fstrain.trainers.spark_mllib import check_view
from fstrain.trainers.stream.source import (
    RAY_BOOSTING,
    RAY_TRAIN,
    SPARK,
    TORCH_STREAMING,
    StreamSource,
    version_source,
)


class Engine(enum.StrEnum):
    """What trains a run (see the module docstring)."""

    SPARK = "spark"
    STREAMED = "streamed"
    RAY_TRAIN = "ray-train"
    RAY_BOOSTING = "ray-boosting"
    RAY_TUNE = "ray-tune"
    IN_MEMORY = "in-memory"


class RunOptions(Protocol):
    """The options of a training run the choice reads (the training pipeline's config)."""

    @property
    def workers(self) -> int: ...
    @property
    def tune(self) -> bool: ...
    @property
    def cv(self) -> int | None: ...
    @property
    def find_label_issues(self) -> bool: ...
    @property
    def drop_label_issues(self) -> bool: ...
    @property
    def resume(self) -> bool: ...
    @property
    def resume_or_start(self) -> bool: ...
    @property
    def spark_master(self) -> str | None: ...


@dataclass(frozen=True)
class EngineChoice:
    """The engine of a run, the version's files when it reads them (``source``), and whether
    the splits are read into this process as frames too (``frames``)."""

    engine: Engine
    source: StreamSource | None = None
    frames: bool = False


def needs_frames(run: RunOptions) -> bool:
    """Whether an option works on in-memory frames (tuning, cross-validation, label issues)."""
    return bool(run.tune or run.cv is not None or run.find_label_issues)


def check_engine_options(cfg: TrainConfig, run: RunOptions) -> None:
    """Refuse, from the configs alone and before the store is read, the options the run's
    engine cannot honour (one :class:`ConfigError` naming the option and the way out)."""
    _check_spark_options(cfg.model, run)
    if run.workers > 1 and cfg.model in BOOSTED_TREE_MODELS:
        refuse_unsupported(cfg, tune=run.tune, drop_label_issues=run.drop_label_issues)
    elif run.workers > 1 and not cfg.is_torch:
        raise ConfigError(
            f"workers={run.workers} needs a PyTorch model (mlp or cnn), xgboost or "
            f"lightgbm; {cfg.model!r} trains on one process. Use workers=1.")
    _check_streaming_options(cfg, run)


def choose_engine(cfg: TrainConfig, run: RunOptions, fv: Any, version: int) -> EngineChoice:
    """The engine of a run on training dataset ``version`` of ``fv``, with the version's files
    (:func:`~fstrain.trainers.stream.source.version_source`, verified) for an engine that
    reads them. A version the engine cannot read is refused here, before any training."""
    if cfg.model in SPARK_MODELS:
        check_view(fv, cfg.model)
        return EngineChoice(Engine.SPARK, version_source(fv, version, reader=SPARK))
    if run.workers > 1 and cfg.model in BOOSTED_TREE_MODELS:
        return EngineChoice(Engine.RAY_BOOSTING,
                            version_source(fv, version, reader=RAY_BOOSTING),
                            frames=run.cv is not None or run.find_label_issues)
    streaming = cfg.model == "mlp" and cfg.torch.streaming
    if streaming or (cfg.model == "mlp" and run.workers > 1 and not needs_frames(run)):
        source = version_source(fv, version, reader=TORCH_STREAMING if streaming else RAY_TRAIN,
                                required=streaming)
        if source is not None:  # else (--workers, not streaming): Ray Train from the frames
            return EngineChoice(Engine.RAY_TRAIN if run.workers > 1 else Engine.STREAMED, source)
    if run.tune:
        return EngineChoice(Engine.RAY_TUNE, frames=True)
    if run.workers > 1:
        return EngineChoice(Engine.RAY_TRAIN, frames=True)
    return EngineChoice(Engine.IN_MEMORY, frames=True)


def _check_streaming_options(cfg: TrainConfig, run: RunOptions) -> None:
    """Refuse the options that work on in-memory frames with ``torch.streaming`` (mid-epoch
    checkpoints are fine: one process and the Ray Data shards of ``--workers`` both start an
    epoch at any batch)."""
    if not cfg.torch.streaming:
        return
    given = [flag for flag, on in (("--tune", run.tune), ("--cv", run.cv is not None),
                                   ("--find-label-issues", run.find_label_issues))
             if on]
    if given:
        raise ConfigError(f"torch.streaming trains from the version's files a row group (or a "
                          f"piece of csv/jsonl text) at a time; {', '.join(given)} work on "
                          "in-memory frames. Drop them or set torch.streaming: false.")


def _check_spark_options(model: str, run: RunOptions) -> None:
    """Options a run would ignore are refused: --spark-master without a Spark model, and the
    pandas-side options (tuning, Ray workers, cross-validation, resume) with one."""
    if model not in SPARK_MODELS:
        if run.spark_master is not None:
            raise ConfigError(f"--spark-master is used by the Spark MLlib models "
                              f"({', '.join(sorted(SPARK_MODELS))}); {model!r} does not run on "
                              "Spark. Drop it or pick a Spark model.")
        return
    given = [flag for flag, on in (("--tune", run.tune), ("--workers", run.workers > 1),
                                   ("--cv", run.cv is not None),
                                   ("--resume", run.resume or run.resume_or_start))
             if on]
    if given:
        raise ConfigError(f"{model} trains one MLlib pipeline in Spark; {', '.join(given)} "
                          "work on pandas frames (Ray, torch) and would be ignored. Drop them.")
