"""``Model``: a model version handle, mirroring ``hsml.model.Model``.

Created lazily by ``mr.<framework>.create_model(...)`` (nothing is written until
:meth:`Model.save`), or returned by ``mr.get_model(...)`` for a saved version.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fstrain.kernel.canonical_json import to_jsonable
from fstrain.kernel.errors import InvalidArgumentError
from model_registry.errors import ModelNotSavedError
from model_registry.history import HistoryMixin
from model_registry.naming import (
    check_metrics,
    check_model_name,
    check_tag_name,
    check_version,
)
from model_registry.schema import ModelSchema, coerce_model_schema, encode_input_example

if TYPE_CHECKING:  # pragma: no cover - typing only
    from model_registry.local.index import ModelRecord
    from model_registry.local.registry import LocalModelRegistry

FRAMEWORKS = ("python", "sklearn", "torch")


class Model(HistoryMixin):
    """A model in the registry: metadata plus, once saved, a version folder of files.

    Use ``mr.python.create_model(...)`` (or ``mr.sklearn``/``mr.torch``) to make one, then
    ``model.save(path)``. Properties read the registry's record once the model is saved.
    """

    def __init__(
        self,
        registry: LocalModelRegistry,
        name: str,
        *,
        framework: str,
        version: int | None = None,
        metrics: Mapping[str, float] | None = None,
        description: str | None = None,
        input_example: Any = None,
        model_schema: ModelSchema | Mapping[str, Any] | None = None,
        feature_view: Any = None,
        training_dataset_version: int | None = None,
        tags: Mapping[str, Any] | None = None,
        hyperparameters: Mapping[str, Any] | None = None,
        training_config: Mapping[str, Any] | None = None,
    ) -> None:
        self._registry = registry
        self._name = check_model_name(name)
        if framework not in FRAMEWORKS:
            raise InvalidArgumentError(
                f"Model '{name}': framework must be one of {', '.join(FRAMEWORKS)}. "
                f"Got {framework!r} instead."
            )
        self._framework = framework
        self._version = None if version is None else check_version(version, name=name)
        self._metrics = check_metrics(metrics, name=name)
        if description is not None and not isinstance(description, str):
            raise InvalidArgumentError(
                f"Model '{name}': description must be a string or None. "
                f"Got {type(description).__name__} instead."
            )
        self._description = description
        self._input_example = encode_input_example(input_example, name=name)
        self._model_schema = coerce_model_schema(model_schema)
        self._feature_view = _check_feature_view(feature_view, name=name)
        if training_dataset_version is None and feature_view is not None:
            training_dataset_version = _last_accessed_td(feature_view)
        if training_dataset_version is not None:
            training_dataset_version = _check_td_version(training_dataset_version, name=name)
        self._training_dataset_version = training_dataset_version
        self._tags = _check_tags(tags, owner=f"Model '{name}'")
        self._hyperparameters = _json_dict(hyperparameters, f"Model '{name}': hyperparameters")
        self._training_config = _json_dict(training_config, f"Model '{name}': training_config")
        self._record: ModelRecord | None = None

    @classmethod
    def _from_record(cls, registry: LocalModelRegistry, record: ModelRecord) -> Model:
        model = cls.__new__(cls)
        model._registry = registry
        model._name = record.name
        model._framework = record.framework
        model._version = record.version
        model._metrics = dict(record.metrics)
        model._description = record.description
        model._input_example = None
        model._model_schema = None
        model._feature_view = None
        model._training_dataset_version = record.training_dataset_version
        model._tags = {}
        model._hyperparameters = None
        model._training_config = None
        model._record = record
        return model

    # ------------------------------------------------------------------ lifecycle

    def save(
        self,
        model_path: str | os.PathLike[str],
        await_registration: int = 480,
        keep_original_files: bool = True,
        upload_configuration: Mapping[str, Any] | None = None,
    ) -> Model:
        """Copy ``model_path`` (a file, or a folder's whole content) into a new version.

        The version is assigned atomically (the next free one, or the explicit ``version``;
        an existing explicit version raises :class:`ModelAlreadyExistsError`). A failed save
        leaves no version behind. Returns this model, now saved.

        ``await_registration``, ``keep_original_files`` and ``upload_configuration`` are
        accepted for hsml compatibility and ignored: registration is synchronous and the
        original files are always kept (they are copied).
        """
        self._record = self._registry._save(self, Path(model_path))
        self._version = self._record.version
        return self

    def download(self, local_path: str | os.PathLike[str] | None = None) -> str:
        """Copy the version's files into ``local_path`` (default: a new temp folder), verify
        every sha256 against the manifest and return the folder path (a ``str``, as hsml).

        Raises :class:`IntegrityError` naming any changed, missing or extra file.
        """
        return str(self._registry._download(self._saved(), local_path))

    def get_feature_view(self, init: bool = True, online: bool = False) -> Any:
        """The feature view this model was trained from (as Hopsworks'
        ``model.get_feature_view``); with ``init`` its batch scoring uses the model's
        training-dataset version's transformation statistics."""
        record = self._saved()
        owner = f"Model '{record.name}' v{record.version}"
        if online:
            raise InvalidArgumentError(
                f"{owner}: online=True needs an online feature store, which the local backend "
                "does not have. Use batch scoring (online=False)."
            )
        if not record.feature_view_name:
            raise InvalidArgumentError(
                f"{owner} was registered without a feature view (create_model(feature_view=...)),"
                " so there is none to return."
            )
        provider = self._registry._feature_store
        if provider is None:
            raise InvalidArgumentError(
                f"{owner}: this registry was opened without its project, so it cannot reach the "
                "feature store. Open it with feature_store.login(...).get_model_registry()."
            )
        fv = provider().get_feature_view(record.feature_view_name, record.feature_view_version)
        if init:
            fv.init_batch_scoring(self.training_dataset_version)
        return fv

    def delete(self) -> None:
        """Delete this version: its index row, tags and files."""
        self._registry._delete(self._saved())
        self._record = None

    def verify(self) -> None:
        """Check the version folder in place against its manifest (raises IntegrityError)."""
        self._registry._verify(self._saved())

    def set_validation_status(self, status: str) -> None:
        """Set ``validation_status`` to ``"pending"``, ``"passed"`` or ``"failed"``."""
        self._record = self._registry._set_validation_status(self._saved(), status)

    def add_attachment(self, relative_path: str, source: bytes | str | os.PathLike[str]) -> Path:
        """Add (or replace) an attachment after save: ``source`` is a file path or ``bytes``.

        Attachments live at the top of the version folder (``scorecard.json``,
        ``scorecard.md``, ``scorecard.html``, ``model_card.md``) or under ``images/``. The file
        and the manifest's hash list are updated together. Model files cannot be replaced.
        Returns the attachment's path in the version folder.
        """
        if isinstance(source, (bytes, bytearray, memoryview)):
            data: bytes | Path = bytes(source)
        elif isinstance(source, (str, os.PathLike)):
            data = Path(source)
        else:
            raise InvalidArgumentError(
                f"{self._label()}: attachment source must be a file path or bytes. "
                f"Got {type(source).__name__} instead."
            )
        self._record = self._registry._attach(self._saved(), relative_path, data)
        return self.model_path / relative_path

    def write_attachment(self, relative_path: str, data: str | bytes | Mapping | list) -> Path:
        """Write an attachment from content: text, bytes, or a dict/list (written as JSON)."""
        from fstrain.kernel.canonical_json import dumps

        if isinstance(data, str):
            payload = data.encode("utf-8")
        elif isinstance(data, (bytes, bytearray, memoryview)):
            payload = bytes(data)
        elif isinstance(data, (Mapping, list)):
            payload = dumps(to_jsonable(data, what=f"{self._label()}: attachment")).encode()
        else:
            raise InvalidArgumentError(
                f"{self._label()}: attachment data must be str, bytes, dict or list. "
                f"Got {type(data).__name__} instead."
            )
        return self.add_attachment(relative_path, payload)

    # ------------------------------------------------------------------ history

    def _append_history(self, kind: str, payload: dict[str, Any], files: dict[str, bytes],
                        status: str | None) -> dict[str, Any]:
        return self._registry._append_history(self._saved(), kind, payload, files, status)

    def _history_events(self) -> list[dict[str, Any]]:
        return self._registry._history(self._saved())

    # ------------------------------------------------------------------ tags

    def add_tag(self, name: str, value: Any) -> None:
        """Attach a tag (JSON-serialisable value) to this version; replaces an existing one."""
        check_tag_name(name, owner=self._label())
        value = to_jsonable(value, what=f"{self._label()}: tag '{name}'")
        self._registry._set_tag(self._saved(), name, value)

    def get_tag(self, name: str) -> Any:
        """The value of tag ``name``; raises :class:`NotFoundError` if it is not set."""
        check_tag_name(name, owner=self._label())
        return self._registry._get_tag(self._saved(), name)

    def get_tags(self) -> dict[str, Any]:
        """All tags of this version."""
        return self._registry._get_tags(self._saved())

    def delete_tag(self, name: str) -> None:
        """Remove tag ``name``; raises :class:`NotFoundError` if it is not set."""
        check_tag_name(name, owner=self._label())
        self._registry._delete_tag(self._saved(), name)

    # ------------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        """Model name."""
        return self._name

    @property
    def version(self) -> int | None:
        """Version number (None until saved unless given explicitly)."""
        return self._version

    @property
    def framework(self) -> str:
        """``python``, ``sklearn`` or ``torch``."""
        return self._framework

    @property
    def description(self) -> str | None:
        """Free-text description."""
        return self._description

    @property
    def training_metrics(self) -> dict[str, float]:
        """Metrics given at creation (``metrics=``), as in hsml."""
        return dict(self._metrics)

    @property
    def created(self) -> str | None:
        """Creation time (UTC, ISO 8601) once saved."""
        return None if self._record is None else self._record.created

    @property
    def feature_view_name(self) -> str | None:
        """Name of the feature view the model was trained from."""
        if self._record is not None:
            return self._record.feature_view_name
        return None if self._feature_view is None else self._feature_view.name

    @property
    def feature_view_version(self) -> int | None:
        """Version of the feature view the model was trained from."""
        if self._record is not None:
            return self._record.feature_view_version
        return None if self._feature_view is None else self._feature_view.version

    @property
    def training_dataset_version(self) -> int | None:
        """Training dataset version the model was trained on."""
        return self._training_dataset_version

    @property
    def validation_status(self) -> str:
        """``pending`` (at creation), ``passed`` or ``failed``."""
        return "pending" if self._record is None else self._record.validation_status

    @property
    def model_path(self) -> Path:
        """The version folder ``<registry root>/<name>/<version>``."""
        record = self._saved()
        return self._registry._store.version_dir(record.name, record.version)

    @property
    def manifest(self) -> dict[str, Any]:
        """The version's ``manifest.json`` (checked against the hash in the index)."""
        return self._registry._read_manifest(self._saved())

    @property
    def model_schema(self) -> dict[str, Any] | None:
        """``{"input_schema": ..., "output_schema": ...}`` (given or inferred), or None."""
        if self._record is not None:
            return self.manifest.get("model_schema")
        return None if self._model_schema is None else self._model_schema.to_dict()

    @property
    def input_example(self) -> Any:
        """The input example in its JSON form, or None."""
        if self._record is not None:
            return self.manifest.get("input_example")
        return self._input_example

    @property
    def lineage(self) -> dict[str, Any]:
        """Feature view, training dataset version and, when known, the training dataset."""
        return dict(self.manifest.get("lineage") or {})

    @property
    def hyperparameters(self) -> dict[str, Any] | None:
        """Hyperparameters stored at creation."""
        if self._record is not None:
            return self.manifest.get("hyperparameters")
        return self._hyperparameters

    @property
    def training_config(self) -> dict[str, Any] | None:
        """Training configuration stored at creation."""
        if self._record is not None:
            return self.manifest.get("training_config")
        return self._training_config

    def __repr__(self) -> str:
        return (
            f"Model(name={self._name!r}, version={self._version!r}, framework={self._framework!r})"
        )

    # ------------------------------------------------------------------ internals

    def _label(self) -> str:
        return f"Model '{self._name}' version {self._version}"

    def _saved(self) -> ModelRecord:
        if self._record is None:
            raise ModelNotSavedError(
                f"Model '{self._name}' is not saved in the registry (or was deleted). "
                "Call model.save(path) first, or get it with mr.get_model(name, version)."
            )
        return self._record


def _check_feature_view(fv: Any, *, name: str) -> Any:
    if fv is None:
        return None
    fv_name, fv_version = getattr(fv, "name", None), getattr(fv, "version", None)
    if (
        not isinstance(fv_name, str)
        or isinstance(fv_version, bool)
        or not isinstance(fv_version, int)
    ):
        raise InvalidArgumentError(
            f"Model '{name}': feature_view must be a feature view (with .name: str and "
            f".version: int). Got {type(fv).__name__} instead."
        )
    return fv


def _last_accessed_td(fv: Any) -> int | None:
    getter = getattr(fv, "get_last_accessed_training_dataset", None)
    if not callable(getter):
        return None
    value = getter()
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check_td_version(value: object, *, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(
            f"Model '{name}': training_dataset_version must be a positive integer or None. "
            f"Got {value!r} instead."
        )
    return value


def _check_tags(tags: Mapping[str, Any] | None, *, owner: str) -> dict[str, Any]:
    if tags is None:
        return {}
    if not isinstance(tags, Mapping):
        raise InvalidArgumentError(
            f"{owner}: tags must be a dict of tag name to value. Got {type(tags).__name__} instead."
        )
    return {
        check_tag_name(k, owner=owner): to_jsonable(v, what=f"{owner}: tag '{k}'")
        for k, v in tags.items()
    }


def _json_dict(value: Mapping[str, Any] | None, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{what} must be a dict. Got {type(value).__name__} instead.")
    return to_jsonable(dict(value), what=what)
