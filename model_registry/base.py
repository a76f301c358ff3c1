"""The ``ModelRegistry`` protocol every backend (local, Hopsworks) implements."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover - typing only
    from model_registry.model import Model
    from model_registry.signature import ModelFramework


@runtime_checkable
class ModelRegistry(Protocol):
    """What pipelines may use of a model registry (a subset of ``hsml.ModelRegistry``)."""

    @property
    def python(self) -> ModelFramework:
        """``create_model`` for generic Python models."""
        ...

    @property
    def sklearn(self) -> ModelFramework:
        """``create_model`` for scikit-learn models."""
        ...

    @property
    def torch(self) -> ModelFramework:
        """``create_model`` for PyTorch models."""
        ...

    def get_model(self, name: str, version: int | None = None) -> Model:
        """A saved version (``None`` → version 1, with a warning)."""
        ...

    def get_models(self, name: str) -> list[Model]:
        """Every saved version of ``name``."""
        ...

    def get_best_model(
        self, name: str, metric: str, direction: str = "max", validated_only: bool = False
    ) -> Model | None:
        """The best version by a training metric, or None."""
        ...
