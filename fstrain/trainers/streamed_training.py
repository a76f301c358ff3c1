"""Training an ``mlp`` from a version's split files, a row group (Parquet) or a row-aligned
piece of text (csv, jsonl) at a time.

Two ways in, one input path (:mod:`fstrain.trainers.stream`):

- ``torch.streaming: true``: one process streams the train split (data larger than memory);
- ``--workers N``: every Ray Train worker reads its shard through Ray Data
  (:mod:`fstrain.trainers.stream.ray_feed`).

The files are the ones the feature view hands out for a streamed read of the version (each
checked against its recorded sha256 first) and the view's transformations are applied with the
statistics fitted on the version's train split, exactly as the in-memory read applies them. A
version that cannot be streamed (in memory, not ok, no validation split) is refused when
``torch.streaming`` asks for it; ``--workers`` then reads the frames and writes them to Parquet
once for Ray Data instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fstrain.kernel.errors import ConfigError

#: The formats of the versions streamed (a csv or jsonl file is read in row-aligned pieces)
STREAMED_FORMATS = ("parquet", "csv", "jsonl")


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


def stream_source(fv: Any, version: int, *, required: bool) -> Any:
    """The :class:`~fstrain.trainers.stream.source.StreamSource` of a materialized
    train/validation/test version (Parquet: its row groups; csv or jsonl: row-aligned pieces of
    its text), or None (``required=False``) when it cannot be streamed."""
    from fstrain.trainers.stream.source import StreamSource

    td = fv.get_training_dataset(version)
    if (td.type != "MATERIALIZED" or td.data_format not in STREAMED_FORMATS
            or td.state != "ok" or "validation" not in td.splits):
        if not required:
            return None
        raise ConfigError(
            f"torch.streaming reads the files of a materialized train/validation/test version "
            f"({', '.join(STREAMED_FORMATS)}); training dataset v{version} of {fv.name} "
            f"v{fv.version} is {td.type.lower()} {td.data_format} ({td.state}) with splits "
            f"{list(td.splits)}. Create one with `fstrain dataset <use case>` or set "
            "torch.streaming: false.")
    if not fv.streams_split_files(version):  # e.g. Hopsworks: its files stay on the cluster
        return _no_files(fv, version, required)
    if td.data_format != "parquet":  # the pieces the view's torch read streams
        parts = fv.get_train_validation_test_split(version, dataframe_type="torch")
        return StreamSource.from_text_pieces(
            {"train": parts[0].source, "validation": parts[1].source}, shaper=parts[0].shaper)
    parts = fv.get_train_validation_test_split(version, dataframe_type="arrow_batches")
    X_train, X_val = parts[0], parts[1]
    return StreamSource.from_files({"train": X_train.path, "validation": X_val.path},
                                   shaper=X_train.shaper)


def _no_files(fv: Any, version: int, required: bool) -> None:
    """None (the caller reads frames), or with ``required`` the streaming option's refusal."""
    if required:
        raise ConfigError(f"torch.streaming reads a version's split files, and {fv.name} "
                          f"v{fv.version} ({type(fv).__name__}) hands out no split files of "
                          f"training dataset v{version} to stream; set torch.streaming: false.")


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
