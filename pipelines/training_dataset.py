"""Training-dataset pipeline: feature view + split spec → a new immutable version.

``run(project, config)`` gets or creates the use case's feature view and materializes a
train/validation/test split (the use case's default split, overridden by the config). The
version pins every feature group's commit, the seed and the split, so it re-reads identically.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from fstrain.kernel.config import PipelineConfig
from fstrain.kernel.refs import TrainingDatasetRef

if TYPE_CHECKING:  # pragma: no cover - typing only
    from feature_store.api import Project


class TrainingDatasetConfig(PipelineConfig):
    """Configuration of one training-dataset-pipeline run (None = the use case's default)."""


    use_case: str
    split: Literal["random", "stratified", "group", "time"] | None = None
    seed: int | None = None
    validation_size: float | None = None
    test_size: float | None = None
    group_column: str | None = None
    gap: str | None = None
    test_window: str | None = None  # time split: the last test_window before the anchor, e.g. 30D
    validation_window: str | None = None  # time split: the validation_window before test
    anchor: str | None = None  # "data" (last event time), "end-time" ($HOPS_END_TIME) or a date
    data_format: Literal["parquet", "csv", "jsonl"] = "parquet"
    description: str = ""


_RELATIVE = ("test_window", "validation_window", "train_window", "anchor")
_BOUNDS = ("train_start", "train_end", "validation_start", "validation_end", "test_start",
           "test_end")


def split_arguments(default: dict[str, Any], config: TrainingDatasetConfig) -> dict[str, Any]:
    """The use case's split arguments with the config's overrides applied."""
    args = dict(default)
    if config.split is not None and config.split != args.get("split"):
        # a different strategy drops the default's strategy-specific bounds
        args = {k: v for k, v in args.items() if k in ("seed", "validation_size", "test_size")}
        args["split"] = config.split
        if config.split != "time":
            args.setdefault("validation_size", 0.15)
            args.setdefault("test_size", 0.2)
    if config.test_size is not None or config.validation_size is not None:
        # sizes replace the default's windows (relative or dated)
        args = {k: v for k, v in args.items() if k not in _RELATIVE + _BOUNDS}
    if config.test_window is not None or config.validation_window is not None:
        args = {k: v for k, v in args.items() if k not in _BOUNDS + ("validation_size", "test_size")}
    for key in ("seed", "validation_size", "test_size", "group_column", "gap", "test_window",
                "validation_window"):
        value = getattr(config, key)
        if value is not None:
            args[key] = value
    anchor = resolve_anchor(config.anchor if config.anchor is not None else args.get("anchor"))
    args.pop("anchor", None)
    if anchor is not None:
        args["anchor"] = anchor
    return args


def resolve_anchor(anchor: str | None) -> str | None:
    """The anchor of relative windows: ``None`` for the data's end, else a timestamp.

    ``"end-time"`` is the scheduler's ``HOPS_END_TIME`` (its window end), so a backfill of an
    older window splits that window's data as the original run did.
    """
    from fstrain.kernel.errors import ConfigError
    from fstrain.kernel.window import scheduler_bounds

    if anchor in (None, "", "data"):
        return None
    if anchor in ("end-time", "end_time"):
        end = scheduler_bounds()[1]
        if not end:
            raise ConfigError(
                "anchor 'end-time' takes the window end from HOPS_END_TIME, which is not set. "
                "Set it, give a date, or use anchor 'data' (the data's last event time)."
            )
        return str(end)
    return anchor


def run(project: Project, config: TrainingDatasetConfig) -> TrainingDatasetRef:
    """Create a new train/validation/test version of the use case's feature view."""
    from feature_views import get_use_case

    use_case = get_use_case(config.use_case)
    fv = use_case.build_feature_view(project.get_feature_store())
    args = _dated_if_needed(fv, split_arguments(use_case.split, config))
    default_format = args.pop("data_format", config.data_format)  # the use case's storage
    data_format = config.data_format if "data_format" in config.model_fields_set else default_format
    version, _ = fv.create_train_validation_test_split(
        data_format=data_format, description=config.description, **args,
    )
    return TrainingDatasetRef(fv.name, fv.version, version)


def _dated_if_needed(fv: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Relative windows for a backend whose views only take dates (Hopsworks): resolved here
    when anchored at a date or the scheduler's end time; the data's end cannot be known
    without reading the data, so that is refused with what to do instead."""
    import inspect

    from fstrain.kernel.errors import ConfigError

    if "test_window" not in args:
        return args
    accepted = inspect.signature(fv.create_train_validation_test_split).parameters
    if "test_window" in accepted:
        return args
    if args.get("anchor") is None:
        raise ConfigError(
            f"feature view '{fv.name}' on this backend takes dated time splits only; relative "
            "windows (test_window/validation_window) anchored at the data's end need the local "
            "store. Anchor them at a date or the scheduler's window end: --anchor 2024-07-01 "
            "or --anchor end-time."
        )
    from feature_store.core.splits import make_split_spec, relative_bounds

    rel = {k: args.pop(k) for k in ("test_window", "validation_window", "train_window", "anchor")
           if k in args}
    spec = make_split_spec("time", seed=0, three_way=True, gap=args.get("gap"), **rel)
    bounds = relative_bounds(spec, None)
    args.update({k: v.isoformat() for k, v in bounds.items() if v is not None})
    return args
