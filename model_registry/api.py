"""The model-registry contract every backend (local, Hopsworks) implements (a subset of ``hsml``).

Pipelines and model validation use a registry and its models only through these protocols;
``tests/typing/conformance.py`` makes the type checker prove that both backends satisfy them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Model", "ModelFramework", "ModelRegistry"]


class Model(Protocol):
    """One registered model version (``hsml.model.Model``) with fstrain's manifest and lineage."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int | None: ...

    @property
    def training_metrics(self) -> dict[str, float]: ...

    @property
    def feature_view_name(self) -> str | None: ...

    @property
    def training_dataset_version(self) -> int | None: ...

    @property
    def validation_status(self) -> str: ...

    def save(self, model_path: str | os.PathLike[str]) -> Any: ...

    def download(self, local_path: str | os.PathLike[str] | None = None) -> str: ...

    def set_validation_status(self, status: str) -> None: ...

    def write_attachment(self, relative_path: str, data: Any) -> Any: ...

    def get_feature_view(self, init: bool = True, online: bool = False) -> Any: ...


class ModelFramework(Protocol):
    """``mr.python`` / ``mr.sklearn`` / ``mr.torch``: where ``create_model`` lives."""

    def create_model(
        self,
        name: str,
        version: int | None = None,
        metrics: Mapping[str, float] | None = None,
        description: str | None = None,
        input_example: Any = None,
        model_schema: Any = None,
        feature_view: Any = None,
        training_dataset_version: int | None = None,
    ) -> Any: ...


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

    def get_model(self, name: str, version: int | None = None) -> Any:
        """A saved version (``None`` → version 1, with a warning)."""
        ...

    def get_models(self, name: str) -> list[Any]:
        """Every saved version of ``name``."""
        ...

    def get_best_model(self, name: str, metric: str, direction: str = "max") -> Any:
        """The best version by a training metric, or None."""
        ...
