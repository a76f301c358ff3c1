"""Proof, for the type checker, that both backends implement the contracts.

``mypy`` (run by ``make test``) checks each assignment below: a backend class that drifts from
:mod:`feature_store.api` or :mod:`model_registry.api` fails the build. Nothing here runs.
"""

from __future__ import annotations

from feature_store import api as fs_api
from feature_store.hopsworks.feature_store import (
    HopsworksFeatureGroup,
    HopsworksFeatureStore,
    HopsworksQuery,
)
from feature_store.hopsworks.feature_view import HopsworksFeatureView
from feature_store.hopsworks.project import HopsworksProject
from feature_store.local.objects.feature_group import FeatureGroup
from feature_store.local.objects.feature_store import FeatureStore
from feature_store.local.objects.feature_view import FeatureView
from feature_store.local.objects.query import Query
from fstrain.project import Project
from model_registry import api as mr_api
from model_registry.hopsworks.model_storage import HopsworksModelStorage
from model_registry.hopsworks.registry import HopsworksModelRegistry
from model_registry.local.model_storage import LocalModelStorage
from model_registry.local.registry import LocalModelRegistry
from model_registry.model import Model


def local_backend(project: Project, fs: FeatureStore, fg: FeatureGroup, query: Query,
                  fv: FeatureView, mr: LocalModelRegistry, storage: LocalModelStorage,
                  model: Model) -> None:
    """The embedded store (Delta Lake + DuckDB) and the local registry."""
    _project: fs_api.Project = project
    _fs: fs_api.FeatureStore = fs
    _fg: fs_api.FeatureGroup = fg
    _query: fs_api.Query = query
    _fv: fs_api.FeatureView = fv
    _mr: mr_api.ModelRegistry = mr
    _storage: mr_api.ModelStorage = storage
    _model: mr_api.Model = model


def hopsworks_backend(project: HopsworksProject, fs: HopsworksFeatureStore,
                      fg: HopsworksFeatureGroup, query: HopsworksQuery, fv: HopsworksFeatureView,
                      mr: HopsworksModelRegistry, storage: HopsworksModelStorage,
                      model: Model) -> None:
    """The adapter over the ``hopsworks`` SDK (one ``Model`` entity over either storage)."""
    _project: fs_api.Project = project
    _fs: fs_api.FeatureStore = fs
    _fg: fs_api.FeatureGroup = fg
    _query: fs_api.Query = query
    _fv: fs_api.FeatureView = fv
    _mr: mr_api.ModelRegistry = mr
    _storage: mr_api.ModelStorage = storage
    _model: mr_api.Model = model
