"""Training-dataset pipeline: feature view + split spec → a new immutable version.

``run(project, config)`` gets or creates the use case's feature view and materializes a
train/validation/test split (the use case's default split, overridden by the config). The
version pins every feature group's commit, the seed and the split, so it re-reads identically.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pipelines.config_base import PipelineConfig
from pipelines.refs import TrainingDatasetRef

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
    data_format: Literal["parquet", "csv", "jsonl"] = "parquet"
    description: str = ""


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
    for key in ("seed", "validation_size", "test_size", "group_column", "gap"):
        value = getattr(config, key)
        if value is not None:
            args[key] = value
    return args


def run(project: Project, config: TrainingDatasetConfig) -> TrainingDatasetRef:
    """Create a new train/validation/test version of the use case's feature view."""
    from feature_views import get_use_case

    use_case = get_use_case(config.use_case)
    fv = use_case.build_feature_view(project.get_feature_store())
    version, _ = fv.create_train_validation_test_split(
        data_format=config.data_format, description=config.description,
        **split_arguments(use_case.split, config),
    )
    return TrainingDatasetRef(fv.name, fv.version, version)
