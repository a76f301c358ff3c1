"""The composition root: the only code that picks a backend and wires a project together.

``login()`` returns a project whose ``get_feature_store()`` and ``get_model_registry()`` hand out
the chosen backend's implementations of :mod:`feature_store.api` and :mod:`model_registry.api`.
Pipelines receive the project and never import a backend.
"""

from __future__ import annotations

import importlib
import os
import warnings
from functools import cached_property
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fstrain.kernel.errors import ConfigError, FeatureStoreError
from fstrain.kernel.errors import StoreNotFoundError
from fstrain.kernel.store_root import (
    DEFAULT_ROOT,
    DEFAULT_ROOT_ENV,
    StoreLocation,
    locate_root,
    require_existing_store,
    resolve_root,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from feature_store.local.objects.feature_store import FeatureStore
    from model_registry.local.registry import LocalModelRegistry

__all__ = ["BACKENDS", "DEFAULT_ROOT", "DEFAULT_ROOT_ENV", "Project", "login", "resolve_root"]

BACKENDS = ("local", "hopsworks")

#: The modules a project's backend is wired from, loaded (``importlib``) when the project first
#: asks for one, never before: ``import fstrain`` loads no backend, a Hopsworks job never the
#: embedded store, a local project that only reads features never the registry, and one that
#: never streams to a framework never the trainers. What each adds (median ``python -X
#: importtime`` of 5 fresh runs, 2026-12-02, the shared 2-core box at load 8-9): to ``import
#: fstrain`` the local feature store 300 ms (with the SDK objects), the report index 300 ms,
#: the Hopsworks adapter 1,070 ms (its SDK loads later, at login); to the local feature store
#: its registry 660 ms, the split readers 380 ms (the report index adds 7 ms to the registry,
#: which is when it runs). The architecture test counts each entry as an import of this module
#: (LAZY_MODULE_TABLES).
BACKEND_MODULES: dict[str, str] = {
    "local feature store": "feature_store.local.objects.feature_store",
    "local objects": "fstrain.sdk_objects",
    "local model registry": "model_registry.local.registry",
    "local split readers": "fstrain.trainers.readers",
    "local report index": "validation.report_index",
    "hopsworks": "feature_store.hopsworks.connection",
    "hopsworks model registry": "model_registry.hopsworks.registry",
}


def _backend(part: str) -> Any:
    """The module of :data:`BACKEND_MODULES` that provides ``part``, imported on first use."""
    return importlib.import_module(BACKEND_MODULES[part])


def login(
    backend: str | None = None,
    root: str | os.PathLike[str] | None = None,
    *,
    create: bool = True,
    **hopsworks_options: Any,
) -> Any:
    """Connect to a backend and return a project handle.

    Args:
        backend: ``"local"`` (default; embedded Delta Lake + DuckDB store under ``root``) or
            ``"hopsworks"``. Defaults to ``$FSTRAIN_BACKEND`` or ``"local"``.
        root: local store root; defaults to ``$FSTRAIN_HOME`` or ``./.fstrain`` (a
            :class:`~fstrain.kernel.store_root.StoreLocation` keeps its origin for errors).
        create: local backend: make the store root when it holds no store (the default, as
            for a notebook's first call); ``False`` opens only an existing store and raises
            :class:`~fstrain.kernel.errors.StoreNotFoundError` otherwise, creating nothing.
        **hopsworks_options: ``host``, ``project``, ``api_key_value``, ``api_key_file`` for the
            Hopsworks backend.

    Returns:
        A project with ``get_feature_store()`` and ``get_model_registry()``.
    """
    chosen = backend or os.environ.get("FSTRAIN_BACKEND") or "local"
    if chosen == "local":
        if hopsworks_options:
            raise ConfigError(
                f"login(backend='local') does not take {sorted(hopsworks_options)}; "
                "those options are for backend='hopsworks'."
            )
        _require_local_engine()
        return Project(locate_root(root, given_as="root"), create=create)
    if chosen == "hopsworks":
        return _hopsworks_project(root, hopsworks_options)
    raise ConfigError(f"login(): backend must be one of {BACKENDS}. Got {chosen!r} instead.")


def _require_local_engine() -> None:
    """The embedded store needs the ``local`` extra (a Hopsworks job environment lacks it)."""
    missing = [name for name in ("deltalake", "duckdb") if find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"login(backend='local') needs {' and '.join(missing)}, which this environment "
            "lacks. Install the embedded store with `pip install 'fstrain[local]'`, or use "
            "backend='hopsworks' (a Hopsworks job environment installs fstrain without them)."
        )


def _hopsworks_project(root: str | os.PathLike[str] | None, options: dict[str, Any]) -> Any:
    """Log in to Hopsworks and give the project the Hopsworks model registry."""
    if root is not None:
        options = {**options, "root": root}
    project = _backend("hopsworks").login(**options)
    project.bind_model_registry(_backend("hopsworks model registry").HopsworksModelRegistry)
    return project


def _split_readers() -> Any:
    """The trainers' torch and Ray readers of a version's split files, for the embedded store's
    streamed ``"torch"`` and ``"ray"`` reads (imported on the first one: the trainers take half
    a second to import, and a store that never streams to a framework never needs them)."""
    return _backend("local split readers")


def _refresh_report_index(registry: LocalModelRegistry) -> None:
    """Regenerate the registry's report index after a run or a sign-off. The event is already
    committed, so a failure here (a full disk, an unreadable old scorecard) is a warning that
    names the way to retry, never an error that makes the sign-off look undone."""
    try:
        _backend("local report index").refresh_report_index(registry)
    except (FeatureStoreError, OSError) as exc:
        warnings.warn(f"the report index {registry.root / 'index.html'} was not regenerated "
                      f"({exc}); `fstrain registry report` rewrites it.", stacklevel=2)


class Project:
    """A local project: one store root holding the feature store and the model registry.

    Mirrors ``hopsworks.project.Project``: ``get_feature_store()`` and ``get_model_registry()``.
    Nothing is opened until one of them is called. ``create=False`` opens an existing store
    only: a root that holds none, or a feature store that was never written, is a
    :class:`~fstrain.kernel.errors.StoreNotFoundError` and nothing is created.
    """

    backend = "local"

    def __init__(self, root: Path | StoreLocation, name: str = "fstrain", *,
                 create: bool = True) -> None:
        self.location = (require_existing_store(root) if not create
                         else root if isinstance(root, StoreLocation)
                         else StoreLocation(root, "root"))
        self.root = self.location.path
        self.name = name
        self.create = create
        if create:
            self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"Project(name={self.name!r}, backend='local', root='{self.root}')"

    @cached_property
    def _feature_store(self) -> FeatureStore:
        if not self.create and not (self.root / "feature_store").is_dir():
            raise StoreNotFoundError(
                f"store root {self.location.describe()} holds no feature store yet (nothing "
                "was written by `fstrain features`). Run `fstrain features <use case>` first, "
                "or point --root or FSTRAIN_HOME at the store that has the features."
            )
        store: FeatureStore = _backend("local feature store").FeatureStore(
            self.root / "feature_store", project_name=self.name,
            sdk_objects=_backend("local objects"), split_readers=_split_readers)
        return store

    @cached_property
    def _model_registry(self) -> LocalModelRegistry:
        # the report index is never a stale snapshot: every validation run and sign-off, from
        # the pipelines, the CLI, the web application or a user's own Python, regenerates it
        registry: LocalModelRegistry = _backend("local model registry").LocalModelRegistry(
            self.root / "model_registry", feature_store=self.get_feature_store,
            after_history=_refresh_report_index)
        return registry

    def get_feature_store(self, name: str | None = None) -> FeatureStore:
        """Return the project's feature store (``name`` is accepted for Hopsworks parity)."""
        return self._feature_store

    def get_model_registry(self) -> LocalModelRegistry:
        """Return the project's model registry."""
        return self._model_registry
