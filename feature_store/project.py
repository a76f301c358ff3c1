"""The project handle returned by :func:`feature_store.login` for the local backend."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from feature_store.local.feature_store import FeatureStore
    from model_registry.local.registry import LocalModelRegistry

DEFAULT_ROOT_ENV = "FSTRAIN_HOME"
DEFAULT_ROOT = ".fstrain"


def resolve_root(root: str | os.PathLike[str] | None) -> Path:
    """Store root: ``root`` if given, else ``$FSTRAIN_HOME``, else ``./.fstrain``."""
    chosen = root if root is not None else os.environ.get(DEFAULT_ROOT_ENV) or DEFAULT_ROOT
    return Path(chosen).expanduser().resolve()


class Project:
    """A local project: one store root holding the feature store and the model registry.

    Mirrors ``hopsworks.project.Project``: ``get_feature_store()`` and ``get_model_registry()``.
    Nothing is opened until one of them is called.
    """

    backend = "local"

    def __init__(self, root: Path, name: str = "fstrain") -> None:
        self.root = root
        self.name = name
        root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"Project(name={self.name!r}, backend='local', root='{self.root}')"

    @cached_property
    def _feature_store(self) -> FeatureStore:
        from feature_store.local.feature_store import FeatureStore

        return FeatureStore(self.root / "feature_store", project_name=self.name)

    @cached_property
    def _model_registry(self) -> LocalModelRegistry:
        from model_registry.local.registry import LocalModelRegistry

        return LocalModelRegistry(self.root / "model_registry", feature_store=self.get_feature_store)

    def get_feature_store(self, name: str | None = None) -> FeatureStore:
        """Return the project's feature store (``name`` is accepted for Hopsworks parity)."""
        return self._feature_store

    def get_model_registry(self) -> LocalModelRegistry:
        """Return the project's model registry."""
        return self._model_registry
