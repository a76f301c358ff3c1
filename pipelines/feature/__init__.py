"""Feature pipeline: source data → feature groups, validated by Great Expectations.

``run(project, config)`` loads one use case's source over a window (``--start/--end``, else
``HOPS_START_TIME``/``HOPS_END_TIME``, else everything), derives features, and upserts each
feature group with its expectation suite attached (ingestion policy from the config). Re-running
the same window writes nothing (no new commit; the ref says ``unchanged``), and a window in which
the root group has no rows writes nothing at all (the ref says ``empty``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import model_validator

from fstrain.kernel.window import Window, from_environment, resolve_window
from fstrain.kernel.config import PipelineConfig
from fstrain.kernel.refs import FeatureGroupRef, FeaturePipelineRef
from feature_views import get_source
from fstrain.kernel.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from feature_store.api import Project


class FeaturePipelineConfig(PipelineConfig):
    """Configuration of one feature-pipeline run."""


    use_case: str
    start: str | None = None
    end: str | None = None
    ingestion_policy: Literal["always", "strict"] = "strict"
    sample: int | None = None  # flights/adult: deterministic subsample of the root rows
    n_transactions: int = 100_000  # ccfraud generator size
    seed: int = 42
    image_dir: str | None = None  # mnist: where PNGs are written (default: <root>/mnist_images)

    @model_validator(mode="after")
    def _options_of_the_use_case(self) -> FeaturePipelineConfig:
        """Options that the use case's source does not read are refused, not ignored."""
        takes = get_source(self.use_case).LOAD_OPTIONS
        for option in ("sample", "n_transactions", "image_dir"):
            if option in self.model_fields_set and getattr(self, option) is not None \
                    and option not in takes:
                raise ValueError(f"{option} does not apply to use case {self.use_case!r} (it "
                                 f"takes {', '.join(takes)}); drop it")
        return self


def run(project: Project, config: FeaturePipelineConfig) -> FeaturePipelineRef:
    """Load, engineer, validate and upsert every feature group of ``config.use_case``."""
    from pipelines.feature.engineering import engineer, restrict

    source = get_source(config.use_case)
    window, described = _window(source, config)
    loaded = _load(source, project, config, window)
    frames = restrict(config.use_case, engineer(config.use_case, loaded), window.start, window.end)
    root = source.FEATURE_GROUPS[0].name
    if len(frames[root]) == 0:
        # the detail groups are not windowed: writing them alone would be a silent partial run
        return FeaturePipelineRef(config.use_case, (), window=described, empty=True)
    fs = project.get_feature_store()
    refs = []
    for spec in source.FEATURE_GROUPS:
        frame = frames[spec.name]
        if len(frame) == 0:
            continue  # nothing in this window for this group
        check = getattr(source, "check_written", None)
        if check is not None:
            check(frame)
        fg = fs.get_or_create_feature_group(
            spec.name, spec.version, primary_key=list(spec.primary_key),
            event_time=spec.event_time, description=spec.description, tags=dict(spec.tags),
            expectation_suite={"name": f"{spec.name}_suite",
                               "expectations": [{"type": e.type, "kwargs": dict(e.kwargs)}
                                                for e in spec.expectations]},
            validation_ingestion_policy=config.ingestion_policy, **_extensions(fs, spec),
        )
        new = fg.id is None
        before = None if new else fg.latest_commit_id()
        if not new and spec.ingestion_time and spec.ingestion_time not in _names(fg):
            frame = frame.drop(columns=[spec.ingestion_time])  # a store made before it was declared
        fg.insert(frame)
        if new:
            _describe(fg, spec)
        commit = fg.latest_commit_id()
        if commit == before:
            refs.append(FeatureGroupRef(spec.name, spec.version, commit, unchanged=True))
            continue
        details = fg.commit_details(limit=1).get(commit, {})
        refs.append(FeatureGroupRef(spec.name, spec.version, commit,
                                    details.get("rowsInserted", 0), details.get("rowsUpdated", 0)))
    return FeaturePipelineRef(config.use_case, tuple(refs), window=described)


def _names(fg: Any) -> list[str]:
    """The names of an existing group's features."""
    return [f.name for f in fg.features]


def _extensions(fs: Any, spec: Any) -> dict[str, Any]:
    """The fstrain extensions a group declares, where the backend has them: a declared
    ``ingestion_time`` column is passed on the local store; on Hopsworks (which refuses it by
    name) the column is written as a plain one, which the views leave out of their features."""
    accepted: frozenset[str] = getattr(fs, "FSTRAIN_EXTENSIONS", frozenset())
    if spec.ingestion_time is not None and "ingestion_time" in accepted:
        return {"ingestion_time": spec.ingestion_time}
    return {}


def _window(source: Any, config: FeaturePipelineConfig) -> tuple[Window, str]:
    """The run window and how the ref describes it. A use case whose root group has no event
    time cannot select rows by time: ``--start``/``--end`` are refused (before any work); the
    scheduler's ``HOPS_START_TIME``/``HOPS_END_TIME``, exported for every stage, are read, said
    not to apply, and every row is loaded."""
    window = resolve_window(config.start, config.end, names=("--start", "--end"))
    if any(spec.event_time is not None for spec in source.FEATURE_GROUPS):
        return window, window.describe()
    if not from_environment(config.start, config.end):
        raise ConfigError(
            f"use case {config.use_case!r} has no event time (none of its feature groups has an "
            "event_time), so a window --start/--end cannot select its rows; run it without "
            "them (it loads every row).")
    if window.start is None and window.end is None:
        return window, "[-inf, +inf)"
    return Window(), (f"[-inf, +inf) (use case {config.use_case!r} has no event time: the "
                      f"scheduler window {window.describe()} from HOPS_START_TIME/HOPS_END_TIME "
                      "does not apply; every row is loaded)")


def _load(source: Any, project: Any, config: FeaturePipelineConfig, window: Any) -> dict[str, Any]:
    """The source's frames for ``window``, plus the earlier history engineering needs."""
    from pipelines.feature.engineering import history_start

    kwargs: dict[str, Any] = {"start": history_start(config.use_case, window.start),
                              "end": window.end}
    for option in source.LOAD_OPTIONS:
        value = getattr(config, option)
        if option == "image_dir":
            value = Path(value) if value else Path(project.root) / f"{config.use_case}_images"
        kwargs[option] = value
    return source.load(**kwargs)


def _describe(fg: Any, spec: Any) -> None:
    """Feature descriptions and per-feature tags from the source spec (first write only)."""
    fg.update_feature_descriptions(dict(spec.feature_descriptions))
    for feature, tags in spec.feature_tags.items():
        for name, value in tags.items():
            fg.add_feature_tag(feature, name, value)
