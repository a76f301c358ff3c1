"""The model-registry contract every backend (local, Hopsworks) implements (a subset of ``hsml``).

Pipelines and model validation use a registry and its models only through these protocols;
``tests/typing/conformance.py`` makes the type checker prove that both backends satisfy them.

There is one model entity, :class:`model_registry.model.Model`: it holds a version's metadata
and delegates every read and write of a stored version to a backend's :class:`ModelStorage`
(``model_registry.local.model_storage``, ``model_registry.hopsworks.model_storage``). A registry
is a factory of models over its storage.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["Exported", "Model", "ModelDraft", "ModelExporter", "ModelFramework", "ModelRegistry",
           "ModelStorage", "PolicyStore"]


@dataclass(frozen=True)
class ModelDraft:
    """What a model version is registered with (checked by ``create_model``), or, for a model
    read back from a registry, what its backend records cheaply (the rest is in the manifest).

    ``input_example`` is in its JSON form; ``model_schema`` is a
    :class:`model_registry.schema.ModelSchema` or None.
    """

    name: str
    framework: str
    version: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    description: str | None = None
    input_example: Any = None
    model_schema: Any = None
    feature_view: Any = None
    training_dataset_version: int | None = None
    tags: Mapping[str, Any] = field(default_factory=dict)
    hyperparameters: Mapping[str, Any] | None = None
    training_config: Mapping[str, Any] | None = None


class ModelStorage(Protocol):
    """Where a backend keeps model versions. ``handle`` is the backend's own reference to one
    saved version (returned by :meth:`save`); the model entity never looks inside it."""

    @property
    def backend(self) -> str:
        """``local`` or ``hopsworks``."""
        ...

    def save(self, draft: ModelDraft, source: Path, *, await_registration: int = 480,
             sealer: Any = None) -> tuple[Any, int]:
        """Store ``source`` (a file, or a folder's content) as a new version with a manifest
        and its creation record (history event 0, sealed by ``sealer``, a
        ``model_registry.history.Sealer``); ``(handle, version)``. A failed save leaves no
        version behind."""
        ...

    def trust_store(self) -> Any:
        """The store's trust list (a ``model_registry.audit.TrustStore``), or None."""
        ...

    def created(self, handle: Any) -> Any:
        """When the version was saved."""
        ...

    def validation_status(self, handle: Any) -> str:
        """``pending``, ``passed`` or ``failed`` (a run status may add ``(policy deviation)``)."""
        ...

    def set_validation_status(self, handle: Any, status: str) -> Any:
        """Record a checked status; the handle to use from now on."""
        ...

    def feature_view_ref(self, handle: Any) -> tuple[str | None, int | None]:
        """Name and version of the feature view the version was trained from."""
        ...

    def lineage(self, handle: Any) -> dict[str, Any]:
        """Feature view, training-dataset version and, when known, the training dataset."""
        ...

    def manifest(self, handle: Any) -> dict[str, Any]:
        """The version's ``manifest.json``, checked against the hash the backend keeps."""
        ...

    def files_path(self, handle: Any) -> Path:
        """A local folder holding the version's files (the version folder, or a verified
        mirror of a remote version)."""
        ...

    def remote_path(self, handle: Any) -> str:
        """Where the backend keeps the version (a folder, or a path in Hopsworks)."""
        ...

    def download(self, handle: Any, local_path: str | os.PathLike[str] | None) -> Path:
        """Copy the files into ``local_path`` (None: a new folder) and verify them."""
        ...

    def verify(self, handle: Any) -> None:
        """Check the version's files against its manifest (raises ``IntegrityError``)."""
        ...

    def delete(self, handle: Any) -> None:
        """Delete the version: its files, tags and record."""
        ...

    def attach(self, handle: Any, relative_path: str, data: bytes | Path) -> Path:
        """Add or replace an attachment (never a model file, never under ``history/``);
        its path under :meth:`files_path`."""
        ...

    def append_history(self, handle: Any, kind: str, payload: dict[str, Any],
                       files: dict[str, bytes], status: str | None,
                       sealer: Any = None) -> dict[str, Any]:
        """Store one immutable history event (``model_registry.history``), chained to the
        newest record and sealed by ``sealer``; a validation run also sets the status. The
        stored record."""
        ...

    def history(self, handle: Any) -> list[dict[str, Any]]:
        """Every history event, oldest first, integrity-checked."""
        ...

    def history_index(self, handle: Any) -> dict[int, str] | None:
        """``seq → record sha256`` as a separate index keeps them (None: the backend has none)."""
        ...

    def stored_path(self, handle: Any) -> Path:
        """A local folder with the version's files as the backend holds them now, unchecked
        (the version folder; on Hopsworks a fresh download of the Files folder, so an edit made
        on the cluster shows even where a verified mirror is still current): what verification
        and the dossier read and report on."""
        ...

    def stored_manifest(self, handle: Any, folder: Path) -> dict[str, Any]:
        """The manifest in :meth:`stored_path`'s ``folder``, checked against the hash the
        backend keeps (raises ``IntegrityError``)."""
        ...

    def get_tags(self, handle: Any) -> dict[str, Any]:
        """All tags of the version."""
        ...

    def get_tag(self, handle: Any, name: str) -> Any:
        """One tag's value (raises ``ModelNotFoundError`` when it is not set)."""
        ...

    def set_tag(self, handle: Any, name: str, value: Any) -> None:
        """Set (or replace) a tag."""
        ...

    def delete_tag(self, handle: Any, name: str) -> None:
        """Remove a tag (raises ``ModelNotFoundError`` when it is not set)."""
        ...

    def get_feature_view(self, name: str, version: int | None) -> Any:
        """The backend's feature view of that name and version (for batch scoring)."""
        ...


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

    def export(self, format: str, **options: Any) -> dict[str, Any]:
        """Convert to ``format`` (an exporter plugin, :mod:`model_registry.exporters`), attach
        the result to the version and return the exporter's record."""
        ...


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


class PolicyStore(Protocol):
    """Where a registry keeps each model's gate-policy files (immutable, numbered versions;
    :mod:`model_registry.policy_records`)."""

    def versions(self, name: str, trust: Any = None) -> list[tuple[dict[str, Any], bytes]]:
        """Every version of ``name``'s policy, oldest first, as ``(record, file bytes)``,
        checked (seals against the ``trust`` list); empty when none was set."""
        ...

    def append(self, name: str, document: bytes, *, policy_sha256: str, created: str,
               user: str, signer: Any = None, trust: Any = None) -> dict[str, Any]:
        """Store ``document`` as the next version (signed by ``signer`` when given)."""
        ...


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

    @property
    def policies(self) -> PolicyStore:
        """Each model's gate-policy files."""
        ...

    def get_model(self, name: str, version: int | None = None) -> Any:
        """A saved version (``None`` → version 1, with a warning)."""
        ...

    def get_models(self, name: str) -> list[Any]:
        """Every saved version of ``name``."""
        ...

    def get_best_model(self, name: str, metric: str, direction: str = "max", *,
                       require_approval: bool = False, allow_overrides: bool = False) -> Any:
        """The best version by a training metric, or None. ``require_approval``: only versions
        approved after their latest validation run, without ``--override`` unless
        ``allow_overrides``."""
        ...


@dataclass(frozen=True)
class Exported:
    """What an exporter produced.

    ``files``: relative path in the version → content, attached in order (``bytes`` as they
    are; a dict is written as canonical JSON), each hashed in the manifest. ``record``: what
    ``model.export`` returns (e.g. the check the export passed).
    """

    files: Mapping[str, bytes | Mapping[str, Any]]
    record: Mapping[str, Any]


class ModelExporter(Protocol):
    """``exporter(model, **options) -> Exported``; raises and writes nothing when it fails."""

    def __call__(self, model: Any, /, **options: Any) -> Exported: ...
