"""When training again would make the same model: the same training dataset, the same
configuration.

A model registered by the training pipeline records what was asked for (``training_config.
request``: the trainer configuration after the use case's defaults and every override, and the
options that change what is trained: tuning, cross-validation, workers, label issues). A run
asking for the same on the same feature view and training-dataset version gets that model back
instead of a new version (``fstrain train`` and ``fstrain run`` say ``reused``); a resumed run
and ``force`` always train.
"""

from __future__ import annotations

from typing import Any

#: The pipeline options that change what is trained (the rest say where or how it runs).
TRAINING_OPTIONS = ("tune", "cv", "nested", "workers", "find_label_issues", "drop_label_issues")


def training_request(config: Any, trainer: Any) -> dict[str, Any]:
    """What a run asks to train, as JSON values: ``trainer`` (the validated trainer config)
    and the options of ``config`` (a TrainingPipelineConfig) that change the model."""
    return {"trainer": trainer.model_dump(mode="json"),
            **{option: getattr(config, option) for option in TRAINING_OPTIONS}}


def reusable_model(project: Any, name: str, fv: Any, training_dataset_version: int,
                   request: dict[str, Any]) -> int | None:
    """The newest version of model ``name`` trained on this feature view's version
    ``training_dataset_version`` from the same ``request``, or None."""
    models = project.get_model_registry().get_models(name)  # [] when there is none yet
    for model in sorted(models, key=lambda m: m.version, reverse=True):
        recorded = (model.training_config or {}).get("request")
        if (recorded == request and model.feature_view_name == fv.name
                and model.feature_view_version == fv.version
                and model.training_dataset_version == training_dataset_version):
            return int(model.version)
    return None
