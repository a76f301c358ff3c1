"""``mr.python`` / ``mr.sklearn`` / ``mr.torch``: ``create_model`` per framework (hsml)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from model_registry.local.model import Model
from model_registry.schema import ModelSchema

if TYPE_CHECKING:  # pragma: no cover - typing only
    from model_registry.local.registry import LocalModelRegistry


class ModelFramework:
    """The ``create_model`` entry point for one framework (``python``, ``sklearn``, ``torch``)."""

    def __init__(self, registry: LocalModelRegistry, framework: str) -> None:
        self._registry = registry
        self.framework = framework

    def create_model(
        self,
        name: str,
        version: int | None = None,
        metrics: Mapping[str, float] | None = None,
        description: str | None = None,
        input_example: Any = None,
        model_schema: ModelSchema | Mapping[str, Any] | None = None,
        feature_view: Any = None,
        training_dataset_version: int | None = None,
        tags: Mapping[str, Any] | None = None,
        *,
        hyperparameters: Mapping[str, Any] | None = None,
        training_config: Mapping[str, Any] | None = None,
    ) -> Model:
        """Create a model handle; nothing is written until ``model.save(path)``.

        Args:
            name: model name, ``[A-Za-z0-9_]+``.
            version: explicit version, or None for the next free one at save time.
            metrics: training metrics, ``dict[str, number]`` (finite).
            description: free text.
            input_example: a DataFrame (first row kept), Series, ndarray or JSON-like value.
            model_schema: a :class:`ModelSchema`; if omitted while ``feature_view`` and
                ``training_dataset_version`` are given, it is inferred (features → input,
                labels → output).
            feature_view: the feature view the model was trained from (duck-typed: ``name``,
                ``version``, ``labels``, helper columns, ``schema``).
            training_dataset_version: training dataset version used for training; defaults
                to the feature view's ``get_last_accessed_training_dataset()`` when it has one.
            tags: tags to attach at save time.
            hyperparameters: stored in the manifest (fstrain extension).
            training_config: stored in the manifest (fstrain extension).
        """
        return Model(
            self._registry,
            name,
            framework=self.framework,
            version=version,
            metrics=metrics,
            description=description,
            input_example=input_example,
            model_schema=model_schema,
            feature_view=feature_view,
            training_dataset_version=training_dataset_version,
            tags=tags,
            hyperparameters=hyperparameters,
            training_config=training_config,
        )

    def __repr__(self) -> str:
        return f"ModelFramework({self.framework!r})"
