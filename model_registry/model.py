"""``Model``: one model version, mirroring ``hsml.model.Model``, on any backend.

Created lazily by ``mr.<framework>.create_model(...)`` (nothing is stored until
:meth:`Model.save`), or returned by ``mr.get_model(...)`` for a saved version. The model holds
the version's metadata; every read and write of the stored version goes through the backend's
:class:`~model_registry.api.ModelStorage` (local files + index, or Hopsworks through ``hsml``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fstrain.kernel.canonical_json import dumps, to_jsonable
from fstrain.kernel.errors import InvalidArgumentError
from model_registry.api import ModelDraft, ModelStorage
from model_registry.errors import ModelNotSavedError
from model_registry.audit.authorize import resolve_signer
from model_registry.audit.identity import Signer
from model_registry.audit.trust import TrustStore
from model_registry.exporters import run_exporter
from model_registry.history import HistoryMixin, Sealer
from model_registry.manifest import model_lineage
from model_registry.naming import (
    check_metrics,
    check_model_name,
    check_tag_name,
    check_validation_status,
    check_version,
)
from model_registry.schema import ModelSchema, coerce_model_schema, encode_input_example

FRAMEWORKS = ("python", "sklearn", "torch")


@dataclass(frozen=True)
class StoredVersion:
    """A version's files as its backend holds them (:meth:`Model.stored_view`), in the shape
    :func:`model_registry.audit.verify.verify_version` reads."""

    name: str
    version: int | None
    storage: ModelStorage
    handle: Any
    model_path: Path

    @property
    def manifest(self) -> dict[str, Any]:
        """The stored manifest, checked against the hash the registry keeps."""
        return self.storage.stored_manifest(self.handle, self.model_path)

    @property
    def trust_store(self) -> Any:
        """The store's trust list."""
        return self.storage.trust_store()

    def history_index(self) -> dict[int, str] | None:
        """The registry's own index of the history records (None: the backend has none)."""
        return self.storage.history_index(self.handle)


class Model(HistoryMixin):
    """A model in the registry: metadata plus, once saved, a stored version of files.

    Use ``mr.python.create_model(...)`` (or ``mr.sklearn``/``mr.torch``) to make one, then
    ``model.save(path)``. Once saved, properties read what the backend stored.
    """

    def __init__(self, storage: ModelStorage, draft: ModelDraft, handle: Any = None) -> None:
        """A model over ``storage``: unsaved (``handle`` None) or the saved version ``handle``.
        ``draft`` is taken as given: :meth:`create` checks a user's arguments."""
        self._storage = storage
        self._draft = draft
        self._version = draft.version
        self._handle = handle

    @classmethod
    def create(cls, storage: ModelStorage, name: str, *, framework: str,
               version: int | None = None, metrics: Mapping[str, float] | None = None,
               description: str | None = None, input_example: Any = None,
               model_schema: ModelSchema | Mapping[str, Any] | None = None,
               feature_view: Any = None, training_dataset_version: int | None = None,
               tags: Mapping[str, Any] | None = None,
               hyperparameters: Mapping[str, Any] | None = None,
               training_config: Mapping[str, Any] | None = None) -> Model:
        """An unsaved model from ``create_model``'s arguments, each checked (raises
        :class:`InvalidArgumentError` naming the model and the argument)."""
        return cls(storage, check_draft(
            name, framework=framework, version=version, metrics=metrics,
            description=description, input_example=input_example, model_schema=model_schema,
            feature_view=feature_view, training_dataset_version=training_dataset_version,
            tags=tags, hyperparameters=hyperparameters, training_config=training_config,
        ))

    # ------------------------------------------------------------------ lifecycle

    def save(
        self,
        model_path: str | os.PathLike[str],
        await_registration: int = 480,
        keep_original_files: bool = True,
        upload_configuration: Mapping[str, Any] | None = None,
        *,
        signer: Signer | None = None,
        key: str | os.PathLike[str] | None = None,
    ) -> Model:
        """Copy ``model_path`` (a file, or a folder's whole content) into a new version.

        The version is assigned atomically (the next free one, or the explicit ``version``;
        an existing explicit version raises :class:`ModelAlreadyExistsError`). A failed save
        leaves no version behind. Returns this model, now saved.

        ``keep_original_files`` and ``upload_configuration`` are accepted for hsml
        compatibility and ignored: the original files are always kept (they are copied).
        ``await_registration`` is passed to Hopsworks; a local save is synchronous.

        The version's creation record (history event 0: who trained it, from which training
        dataset and config) is signed by ``signer`` (else the key at ``key`` or
        ``$FSTRAIN_KEY``) in a store with a trust list, a data-scientist or validator key;
        unsigned in a store without one.

        Raises:
            UnauthorizedError: a signed store and no enrolled key of a role that trains.
        """
        source = Path(model_path)
        if not source.exists():
            raise InvalidArgumentError(
                f"Model '{self.name}': model_path must be an existing file or folder. Got "
                f"'{source}' instead. Write the model files first, then call model.save(path)."
            )
        _, who = resolve_signer(self._storage.trust_store(), "creation",
                                label=f"Model '{self.name}'", signer=signer, key=key)
        # a model saved before keeps its version: saving it again is refused as a duplicate
        draft = replace(self._draft, version=self._version)
        self._handle, self._version = self._storage.save(
            draft, source, await_registration=await_registration, sealer=Sealer(who))
        return self

    def download(self, local_path: str | os.PathLike[str] | None = None) -> str:
        """Copy the version's files into ``local_path`` (default: a new folder), verify every
        sha256 against the manifest and return the folder path (a ``str``, as hsml).

        Raises :class:`IntegrityError` naming any changed, missing or extra file.
        """
        return str(self._storage.download(self._saved(), local_path))

    def get_feature_view(self, init: bool = True, online: bool = False) -> Any:
        """The feature view this model was trained from (as Hopsworks'
        ``model.get_feature_view``); with ``init`` its batch scoring uses the model's
        training-dataset version's transformation statistics."""
        name, version = self._storage.feature_view_ref(self._saved())
        if online:
            raise InvalidArgumentError(
                f"{self._label()}: online=True needs an online feature store, which fstrain's "
                f"{self._storage.backend} backend does not serve. Use batch scoring "
                "(online=False)."
            )
        if not name:
            raise InvalidArgumentError(
                f"{self._label()} was registered without a feature view "
                "(create_model(feature_view=...)), so there is none to return."
            )
        fv = self._storage.get_feature_view(name, version)
        if init:
            fv.init_batch_scoring(self.training_dataset_version)
        return fv

    def delete(self) -> None:
        """Delete this version: its files, tags and record."""
        self._storage.delete(self._saved())
        self._handle = None

    def verify(self) -> None:
        """Check the version's files against its manifest (raises IntegrityError)."""
        self._storage.verify(self._saved())

    def set_validation_status(self, status: str) -> None:
        """Set ``validation_status`` to ``"pending"``, ``"passed"`` or ``"failed"``."""
        handle = self._saved()
        check_validation_status(status, owner=self._label())
        self._handle = self._storage.set_validation_status(handle, status)

    # ------------------------------------------------------------------ attachments

    def add_attachment(self, relative_path: str, source: bytes | str | os.PathLike[str]) -> Path:
        """Add (or replace) an attachment after save: ``source`` is a file path or ``bytes``.

        Attachments live at the top of the version (``scorecard.json``, ``scorecard.md``,
        ``scorecard.html``, ``model_card.md``) or under ``images/``. The file and the
        manifest's hash list are updated together. Model files and the append-only
        ``history/`` folder cannot be written. Returns the attachment's local path.
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
        return self._storage.attach(self._saved(), relative_path, data)

    def write_attachment(self, relative_path: str, data: str | bytes | Mapping | list) -> Path:
        """Write an attachment from content: text, bytes, or a dict/list (written as JSON)."""
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

    # ------------------------------------------------------------------ export

    def export(self, format: Any, **options: Any) -> dict[str, Any]:
        """Convert this version to ``format`` (a format name, or an exporter itself), attach the
        result to it and return the exporter's record (fstrain extension).

        ``model.export("onnx")`` (extra ``fstrain[onnx]``) converts an fstrain-trained tabular
        predictor (preprocessing + model) to one ONNX graph, checks ONNX Runtime's
        probabilities against the native model's on the test split of the training-dataset
        version the model was trained on (``atol=1e-4`` by default), and only then attaches
        ``onnx/model.onnx`` and ``onnx/check.json``, each hashed in the manifest; it returns the
        check record (rows, ``max_abs_diff``, ``sha256``, the graph's input contract, ``path``).
        A failed check raises :class:`IntegrityError` and attaches nothing.

        Another converter is passed itself: ``model.export(to_tflite, **options)`` (a callable
        ``exporter(model, **options) -> Exported``, :mod:`model_registry.exporters`). An unknown
        format raises :class:`ConfigError` naming the known ones; an option the exporter does
        not take raises :class:`InvalidArgumentError`.
        """
        self._saved()
        exported = run_exporter(format, self, options, owner=self._label())
        for path, content in exported.files.items():
            if isinstance(content, Mapping):
                self.write_attachment(path, content)
            else:
                self.add_attachment(path, content)
        return dict(exported.record)

    # ------------------------------------------------------------------ history

    def _append_history(self, kind: str, payload: dict[str, Any], files: dict[str, bytes],
                        status: str | None, sealer: Sealer) -> dict[str, Any]:
        return self._storage.append_history(self._saved(), kind, payload, files, status, sealer)

    def _history_events(self) -> list[dict[str, Any]]:
        return self._storage.history(self._saved())

    def history_index(self) -> dict[int, str] | None:
        """``seq → record sha256`` of the history as the registry's index keeps them (None
        for a backend without a separate index)."""
        return self._storage.history_index(self._saved())

    @property
    def trust_store(self) -> TrustStore | None:
        """The trust list of the store this version lives in."""
        return self._storage.trust_store()

    def stored_view(self) -> StoredVersion:
        """The version as its backend holds it now, unchecked: a local registry's version
        folder, a fresh download of a Hopsworks version's Files folder. Verification
        (:meth:`verify_history`) and the dossier read this, so an edit made where the version
        lives shows, whatever a client's verified mirror still holds."""
        handle = self._saved()
        return StoredVersion(self.name, self.version, self._storage, handle,
                             self._storage.stored_path(handle))

    # ------------------------------------------------------------------ tags

    def add_tag(self, name: str, value: Any) -> None:
        """Attach a tag (JSON-serialisable value) to this version; replaces an existing one."""
        check_tag_name(name, owner=self._label())
        value = to_jsonable(value, what=f"{self._label()}: tag '{name}'")
        self._storage.set_tag(self._saved(), name, value)

    def get_tag(self, name: str) -> Any:
        """The value of tag ``name``; raises :class:`NotFoundError` if it is not set."""
        check_tag_name(name, owner=self._label())
        return self._storage.get_tag(self._saved(), name)

    def get_tags(self) -> dict[str, Any]:
        """All tags of this version."""
        return self._storage.get_tags(self._saved())

    def delete_tag(self, name: str) -> None:
        """Remove tag ``name``; raises :class:`NotFoundError` if it is not set."""
        check_tag_name(name, owner=self._label())
        self._storage.delete_tag(self._saved(), name)

    # ------------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        """Model name."""
        return self._draft.name

    @property
    def version(self) -> int | None:
        """Version number (None until saved unless given explicitly)."""
        return self._version

    @property
    def framework(self) -> str:
        """``python``, ``sklearn`` or ``torch``."""
        return self._draft.framework

    @property
    def description(self) -> str | None:
        """Free-text description."""
        return self._draft.description

    @property
    def training_metrics(self) -> dict[str, float]:
        """Metrics given at creation (``metrics=``), as in hsml."""
        return dict(self._draft.metrics)

    @property
    def created(self) -> Any:
        """Creation time once saved."""
        return None if self._handle is None else self._storage.created(self._handle)

    @property
    def feature_view_name(self) -> str | None:
        """Name of the feature view the model was trained from."""
        if self._handle is not None:
            return self._storage.feature_view_ref(self._handle)[0]
        fv = self._draft.feature_view
        return None if fv is None else fv.name

    @property
    def feature_view_version(self) -> int | None:
        """Version of the feature view the model was trained from."""
        if self._handle is not None:
            return self._storage.feature_view_ref(self._handle)[1]
        fv = self._draft.feature_view
        return None if fv is None else fv.version

    @property
    def training_dataset_version(self) -> int | None:
        """Training dataset version the model was trained on."""
        if self._draft.training_dataset_version is not None or self._handle is None:
            return self._draft.training_dataset_version
        return self._storage.lineage(self._handle).get("training_dataset_version")

    @property
    def validation_status(self) -> str:
        """``pending`` (at creation), ``passed`` or ``failed``."""
        return "pending" if self._handle is None else self._storage.validation_status(self._handle)

    @property
    def model_path(self) -> Path:
        """A local folder with the version's files: the version folder of a local registry, a
        verified mirror of a Hopsworks version (downloaded on first use)."""
        return self._storage.files_path(self._saved())

    @property
    def remote_path(self) -> str:
        """Where the backend keeps the version: ``/Projects/<p>/Models/<name>/<v>/Files`` in
        Hopsworks, the version folder in a local registry."""
        return self._storage.remote_path(self._saved())

    @property
    def manifest(self) -> dict[str, Any]:
        """The version's ``manifest.json`` (checked against the hash the registry keeps)."""
        return self._storage.manifest(self._saved())

    @property
    def model_schema(self) -> dict[str, Any] | None:
        """``{"input_schema": ..., "output_schema": ...}`` (given or inferred), or None."""
        if self._handle is not None:
            return self.manifest.get("model_schema")
        schema = self._draft.model_schema
        return None if schema is None else schema.to_dict()

    @property
    def input_example(self) -> Any:
        """The input example in its JSON form, or None."""
        if self._handle is not None:
            return self.manifest.get("input_example")
        return self._draft.input_example

    @property
    def lineage(self) -> dict[str, Any]:
        """Feature view, training dataset version and, when known, the training dataset."""
        if self._handle is not None:
            return self._storage.lineage(self._handle)

        return model_lineage(self._draft.feature_view, self._draft.training_dataset_version,
                             label=self._label())

    @property
    def hyperparameters(self) -> dict[str, Any] | None:
        """Hyperparameters stored at creation."""
        if self._handle is not None:
            return self.manifest.get("hyperparameters")
        value = self._draft.hyperparameters
        return None if value is None else dict(value)

    @property
    def training_config(self) -> dict[str, Any] | None:
        """Training configuration stored at creation."""
        if self._handle is not None:
            return self.manifest.get("training_config")
        value = self._draft.training_config
        return None if value is None else dict(value)

    def __repr__(self) -> str:
        return (f"Model(name={self.name!r}, version={self._version!r}, "
                f"framework={self.framework!r})")

    # ------------------------------------------------------------------ internals

    def _label(self) -> str:
        return f"Model '{self.name}' version {self._version}"

    def _saved(self) -> Any:
        if self._handle is None:
            raise ModelNotSavedError(
                f"Model '{self.name}' is not saved in the registry (or was deleted). "
                "Call model.save(path) first, or get it with mr.get_model(name, version)."
            )
        return self._handle


class ModelFramework:
    """``mr.python`` / ``mr.sklearn`` / ``mr.torch``: ``create_model`` for one framework."""

    def __init__(self, storage: ModelStorage, framework: str) -> None:
        self.storage = storage
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
        """Create a model handle; nothing is stored until ``model.save(path)``.

        Args:
            name: model name, ``[A-Za-z0-9_]+``.
            version: explicit version, or None for the next free one at save time.
            metrics: training metrics, ``dict[str, number]`` (finite).
            description: free text.
            input_example: a DataFrame (first row kept), Series, ndarray or JSON-like value.
            model_schema: a :class:`ModelSchema`; if omitted while ``feature_view`` and
                ``training_dataset_version`` are given, a local save infers it (features →
                input, labels → output).
            feature_view: the feature view the model was trained from (duck-typed: ``name``,
                ``version``, ``labels``, helper columns, ``schema``).
            training_dataset_version: training dataset version used for training; defaults
                to the feature view's ``get_last_accessed_training_dataset()`` when it has one.
            tags: tags to attach at save time.
            hyperparameters: stored in the manifest (fstrain extension).
            training_config: stored in the manifest (fstrain extension).
        """
        return Model.create(
            self.storage, name, framework=self.framework, version=version, metrics=metrics,
            description=description, input_example=input_example, model_schema=model_schema,
            feature_view=feature_view, training_dataset_version=training_dataset_version,
            tags=tags, hyperparameters=hyperparameters, training_config=training_config,
        )

    def __repr__(self) -> str:
        return f"ModelFramework({self.framework!r})"


class ModelFactories:
    """``mr.python`` / ``mr.sklearn`` / ``mr.torch`` of a registry that keeps its models in
    ``self.storage``: the ``create_model`` entry points, the same on every backend."""

    storage: ModelStorage

    @property
    def python(self) -> ModelFramework:
        """Create generic Python models: ``mr.python.create_model(...)``."""
        return ModelFramework(self.storage, "python")

    @property
    def sklearn(self) -> ModelFramework:
        """Create scikit-learn models: ``mr.sklearn.create_model(...)``."""
        return ModelFramework(self.storage, "sklearn")

    @property
    def torch(self) -> ModelFramework:
        """Create PyTorch models: ``mr.torch.create_model(...)``."""
        return ModelFramework(self.storage, "torch")


def check_draft(name: str, *, framework: str, version: int | None,
                metrics: Mapping[str, float] | None, description: str | None,
                input_example: Any, model_schema: ModelSchema | Mapping[str, Any] | None,
                feature_view: Any, training_dataset_version: int | None,
                tags: Mapping[str, Any] | None, hyperparameters: Mapping[str, Any] | None,
                training_config: Mapping[str, Any] | None) -> ModelDraft:
    """``create_model``'s arguments, checked in order and normalised (JSON forms, a
    :class:`ModelSchema`)."""
    name = check_model_name(name)
    if framework not in FRAMEWORKS:
        raise InvalidArgumentError(
            f"Model '{name}': framework must be one of {', '.join(FRAMEWORKS)}. "
            f"Got {framework!r} instead."
        )
    version = None if version is None else check_version(version, name=name)
    checked_metrics = check_metrics(metrics, name=name)
    if description is not None and not isinstance(description, str):
        raise InvalidArgumentError(
            f"Model '{name}': description must be a string or None. "
            f"Got {type(description).__name__} instead."
        )
    example = encode_input_example(input_example, name=name)
    schema = coerce_model_schema(model_schema)
    fv = _check_feature_view(feature_view, name=name)
    if training_dataset_version is None and fv is not None:
        training_dataset_version = _last_accessed_td(fv)
    if training_dataset_version is not None:
        training_dataset_version = _check_td_version(training_dataset_version, name=name)
    return ModelDraft(
        name=name, framework=framework, version=version, metrics=checked_metrics,
        description=description, input_example=example, model_schema=schema, feature_view=fv,
        training_dataset_version=training_dataset_version,
        tags=_check_tags(tags, owner=f"Model '{name}'"),
        hyperparameters=_json_dict(hyperparameters, f"Model '{name}': hyperparameters"),
        training_config=_json_dict(training_config, f"Model '{name}': training_config"),
    )


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
