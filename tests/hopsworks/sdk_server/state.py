"""The fake cluster's state: projects, feature groups, views, training datasets, tags, files.

Everything the SDK creates is kept as the JSON the server would store (camelCase keys as the
SDK sends them), so a later ``GET`` answers with what was created. Files (the "HopsFS" of this
cluster) live under ``root/hopsfs``: see :mod:`sdk_server.hopsfs`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FEATURE_STORE_ID = 67  # ids as in the SDK's fixtures
USERNAME = "fstrain_ci_user"


@dataclass
class Project:
    id: int
    name: str

    @property
    def feature_store(self) -> str:
        return f"{self.name}_featurestore"


@dataclass
class FeatureGroup:
    body: dict[str, Any]
    commits: list[dict[str, Any]] = field(default_factory=list)
    tags: dict[str, Any] = field(default_factory=dict)
    suite: dict[str, Any] | None = None

    @property
    def id(self) -> int:
        return int(self.body["id"])


@dataclass
class TrainingDataset:
    body: dict[str, Any]
    tags: dict[str, Any] = field(default_factory=dict)
    job_runs: int = 0
    #: what the materialization job stored: ``{"splits": ..., "transformation": ... | None}``
    statistics: dict[str, Any] = field(default_factory=dict)


@dataclass
class FeatureView:
    body: dict[str, Any]
    tags: dict[str, Any] = field(default_factory=dict)
    training_datasets: dict[int, TrainingDataset] = field(default_factory=dict)


class State:
    """All server-side objects, keyed the way Hopsworks addresses them."""

    def __init__(self, root: Path, projects: tuple[str, ...],
                 tag_schemas: dict[str, dict[str, Any]]) -> None:
        self.root = Path(root)
        self.hopsfs = self.root / "hopsfs"
        self.hopsfs.mkdir(parents=True, exist_ok=True)
        self._ids = itertools.count(1001)
        self.projects = {name: Project(119 + i, name) for i, name in enumerate(projects)}
        self.tag_schemas = dict(tag_schemas)
        self.feature_groups: dict[int, FeatureGroup] = {}
        self.feature_views: dict[tuple[str, int], FeatureView] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.executions: dict[str, list[dict[str, Any]]] = {}
        self.environments: dict[str, dict[str, Any]] = {}  # routes_environments
        self.models: dict[str, dict[str, Any]] = {}  # routes_models, by "<name>_<version>"
        for project in self.projects.values():  # the datasets every project has
            for dataset in ("Models", "Resources", "Jobs", "Logs"):
                (self.hopsfs / "Projects" / project.name / dataset).mkdir(parents=True,
                                                                          exist_ok=True)

    def next_id(self) -> int:
        return next(self._ids)

    def project_by_id(self, project_id: str | int) -> Project:
        from sdk_server.errors import PROJECT_NOT_FOUND, not_found

        for project in self.projects.values():
            if str(project.id) == str(project_id):
                return project
        raise not_found(PROJECT_NOT_FOUND, f"project {project_id}")

    def groups_named(self, name: str) -> list[FeatureGroup]:
        return sorted((g for g in self.feature_groups.values() if g.body["name"] == name),
                      key=lambda g: g.body["version"])

    def group(self, fg_id: str | int) -> FeatureGroup:
        from sdk_server.errors import FEATURE_GROUP_NOT_FOUND, not_found

        group = self.feature_groups.get(int(fg_id)) if str(fg_id).isdigit() else None
        if group is None:
            raise not_found(FEATURE_GROUP_NOT_FOUND, f"feature group {fg_id}")
        return group

    def view(self, name: str, version: int | str) -> FeatureView:
        from sdk_server.errors import FEATURE_VIEW_NOT_FOUND, not_found

        view = self.feature_views.get((name, int(version)))
        if view is None:
            raise not_found(FEATURE_VIEW_NOT_FOUND, f"feature view {name} v{version}")
        return view
