"""``HopsworksProject``: the project handle of the Hopsworks backend (same interface as local)."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

from feature_store.hopsworks.feature_store import HopsworksFeatureStore
from feature_store.hopsworks.jobs import HopsworksJobs
from feature_store.hopsworks.sdk_calls import sdk_attr, sdk_call
from fstrain.kernel.errors import ConfigError
from fstrain.kernel.store_root import resolve_root

#: Builds the project's model registry from the SDK's registry and the project.
RegistryFactory = Callable[[Any, "HopsworksProject"], Any]


class HopsworksProject:
    """A logged-in Hopsworks project.

    ``get_feature_store()`` and ``get_model_registry()`` return fstrain wrappers around the SDK
    objects; ``root`` is a local cache folder (model downloads, training run folders, images),
    never the cluster's storage. ``sdk`` is the raw ``hopsworks`` project, for anything the
    adapter does not wrap.
    """

    backend = "hopsworks"

    def __init__(self, sdk_project: Any, root: str | os.PathLike[str] | None = None) -> None:
        self._sdk = sdk_project
        self._registry_factory: RegistryFactory | None = None
        self.name = str(sdk_attr(sdk_project, "Project", "name"))
        if root is None:
            root = resolve_root(None) / "hopsworks" / self.name
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"HopsworksProject(name={self.name!r}, backend='hopsworks', root='{self.root}')"

    @property
    def sdk(self) -> Any:
        """The underlying ``hopsworks`` project object."""
        return self._sdk

    @cached_property
    def _feature_store(self) -> HopsworksFeatureStore:
        return HopsworksFeatureStore(
            sdk_call(self._sdk, "Project.get_feature_store", _owner=f"project '{self.name}'"),
            project=self,
        )

    def bind_model_registry(self, factory: RegistryFactory) -> None:
        """Set how ``get_model_registry()`` wraps the SDK's registry (the composition root does)."""
        self._registry_factory = factory

    @cached_property
    def _model_registry(self) -> Any:
        if self._registry_factory is None:
            raise ConfigError(
                f"project '{self.name}' has no model registry bound: log in with "
                "fstrain.login(backend='hopsworks', ...), which binds the Hopsworks registry."
            )
        sdk_registry = sdk_call(self._sdk, "Project.get_model_registry",
                                _owner=f"project '{self.name}'")
        return self._registry_factory(sdk_registry, self)

    def get_feature_store(self, name: str | None = None) -> HopsworksFeatureStore:
        """The project's feature store (``name`` is accepted for parity and ignored)."""
        return self._feature_store

    def get_model_registry(self) -> Any:
        """The project's model registry."""
        return self._model_registry

    def get_job_api(self) -> Any:
        """The SDK's job API (used by ``fstrain jobs``)."""
        return sdk_call(self._sdk, "Project.get_job_api", _owner=f"project '{self.name}'")

    def get_jobs(self) -> Any:
        """The project's job service (deploy, list and run fstrain's stages as jobs)."""
        return HopsworksJobs(self)

    def get_dataset_api(self) -> Any:
        """The SDK's dataset (file) API."""
        return sdk_call(self._sdk, "Project.get_dataset_api", _owner=f"project '{self.name}'")

    def get_environment_api(self) -> Any:
        """The SDK's Python environment API (used by ``fstrain jobs deploy``)."""
        return sdk_call(self._sdk, "Project.get_environment_api", _owner=f"project '{self.name}'")
