"""Training-dataset pipeline: feature view + split spec → a new immutable version.

``run(project, config)`` gets or creates the use case's feature view and materializes a
train/validation/test split (the use case's default split, overridden by the config). The
version pins every feature group's commit, the seed and the split, so it re-reads identically.

A re-run on unchanged inputs creates nothing: when the newest version was made with the same
split parameters (a seed drawn at random is not compared), the same data format and label
window, and every feature group is still at the commit it pinned, that version is returned
with ``reused=True`` (``force=True`` creates a new one anyway). ``start``/``end`` keep the
labels whose root event time is in ``[start, end)``, as Hopsworks' ``create_training_data(
start_time, end_time)``; they never default from ``HOPS_START_TIME``/``HOPS_END_TIME``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal
import inspect

from fstrain.kernel.config import PipelineConfig
from fstrain.kernel.refs import TrainingDatasetRef
from feature_views import get_source, get_use_case
from fstrain.kernel.errors import ConfigError, NotFoundError
from fstrain.kernel.timeutil import required_utc
from fstrain.kernel.versions import resolve_training_dataset_version
from fstrain.kernel.window import Window, resolve_window, scheduler_bounds

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
    start: str | None = None  # labels whose root event time is >= start (never $HOPS_START_TIME)
    end: str | None = None  # ... and < end (never $HOPS_END_TIME)
    force: bool = False  # create a new version even when the newest one matches


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
    if anchor in (None, "", "data"):
        return None
    if anchor in ("end-time", "end_time"):
        end = scheduler_bounds()[1]
        if not end:
            raise ConfigError(
                "anchor 'end-time' takes the window end from HOPS_END_TIME, which is not set. "
                "Set it, give a date, or use anchor 'data' (the data's last event time)."
            )

        return required_utc(end, what="HOPS_END_TIME (anchor 'end-time')").isoformat()
    return anchor


def run(project: Project, config: TrainingDatasetConfig) -> TrainingDatasetRef:
    """A train/validation/test version of the use case's feature view: a new one, or the
    newest one when it was made from the same inputs (``reused``; see the module docstring)."""
    use_case, root, window, args = check_config(config)
    fs = project.get_feature_store()
    fv = use_case.build_feature_view(fs)
    args = _dated_if_needed(fv, args)
    default_format = args.pop("data_format", config.data_format)  # the use case's storage
    data_format = config.data_format if "data_format" in config.model_fields_set else default_format
    window_filter = _window_filter(fs, root, window)
    if not config.force:
        reused = _reusable(fs, fv, args, data_format, window)
        if reused is not None:
            return TrainingDatasetRef(fv.name, fv.version, reused, reused=True)
    version, _ = fv.create_train_validation_test_split(
        data_format=data_format, description=config.description or _describe(window),
        extra_filter=window_filter, **args,
    )
    return TrainingDatasetRef(fv.name, fv.version, version)


def check_config(config: TrainingDatasetConfig) -> tuple[Any, Any, Any, dict[str, Any]]:
    """The use case, its root feature-group spec, the label window and the split arguments of
    ``config``, checked without opening a store (an unknown use case, an unreadable window or
    anchor, a window or time split on a use case without event time): :func:`run` starts with
    it, and the CLI calls it before it opens the store."""
    use_case = get_use_case(config.use_case)
    root = get_source(config.use_case).FEATURE_GROUPS[0]  # the view's root where it has a time
    window = (Window() if config.start in (None, "") and config.end in (None, "")
              else resolve_window(config.start, config.end, environ={},
                                  names=("--start", "--end")))
    args = split_arguments(use_case.split, config)
    _check_event_time(config.use_case, root, args, window)
    return use_case, root, window, args


def _check_event_time(use_case: str, root: Any, args: dict[str, Any], window: Any) -> None:
    """A label window or a time split on a use case without event time is refused, in one
    sentence, before any work."""
    if root.event_time is not None:
        return
    if window.start is not None or window.end is not None:
        raise ConfigError(
            f"use case {use_case!r} has no event time (none of its feature groups has an "
            "event_time), so --start/--end cannot select its labels; run it without them.")
    if args.get("split") == "time":
        raise ConfigError(
            f"use case {use_case!r} has no event time (none of its feature groups has an "
            "event_time), so it cannot be split by time; use --split random, stratified or "
            "group.")


def _describe(window: Any) -> str:
    return "" if window.start is None and window.end is None else f"labels in {window.describe()}"


def _window_filter(fs: Any, root: Any, window: Any) -> Any:
    """``[start, end)`` on the root group's event time as an extra filter, or None."""
    if window.start is None and window.end is None:
        return None
    column = fs.get_feature_group(root.name, root.version).get_feature(root.event_time)
    parts = ([column >= window.start] if window.start is not None else []) + \
            ([column < window.end] if window.end is not None else [])
    return parts[0] if len(parts) == 1 else parts[0] & parts[1]


def _reusable(fs: Any, fv: Any, args: dict[str, Any], data_format: str,
              window: Any) -> int | None:
    """The newest version of ``fv`` when it was made from these inputs, else None."""
    try:
        td = fv.get_training_dataset(resolve_training_dataset_version(fv, "latest"))
    except NotFoundError:
        return None
    if td.data_format != data_format or td.description != _describe(window):
        return None
    if not _same_split(td, args) or not (td.extra_filter is None) == (window.start is None
                                                                     and window.end is None):
        return None
    for key, commit in (td.feature_group_commits or {}).items():
        name, _, version = key.rpartition(":")
        if fs.get_feature_group(name, int(version)).latest_commit_id() != commit:
            return None
    return int(td.version)


_COMPARED = ("strategy", "test_size", "validation_size", "gap", "group_column", "three_way",
             "test_window", "validation_window", "train_window", "anchor")


def _same_split(td: Any, args: dict[str, Any]) -> bool:
    """Whether the version's recorded split is the one ``args`` ask for: the same strategy,
    sizes, windows, gap, columns and, for explicit bounds, the same dates; its seed only when
    one is given (a seed drawn at random is not compared)."""
    from feature_store.core.splits import make_split_spec

    stored = dict(td.split_spec or {})
    given = dict(args)
    seed = given.pop("seed", None)
    if seed is not None and int(seed) != int(stored.get("seed", -1)):
        return False
    wanted = make_split_spec(given.pop("split", None), seed=int(stored.get("seed") or 0),
                             three_way=True, **given).to_dict()
    keys = list(_COMPARED)
    if wanted.get("test_window") is None:  # explicit (or size-cut) bounds are part of the ask
        keys += [k for k in wanted if k.endswith(("_start", "_end"))]
    if wanted.get("stratify_column") is not None:
        keys.append("stratify_column")
    return all(wanted.get(k) == stored.get(k) for k in keys)


def _dated_if_needed(fv: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Relative windows for a backend whose views only take dates (Hopsworks): resolved here
    when anchored at a date or the scheduler's end time; the data's end cannot be known
    without reading the data, so that is refused with what to do instead."""
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
