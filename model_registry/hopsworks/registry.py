"""``HopsworksModelRegistry``: the ``hsml`` model registry with fstrain's additions.

* **Content hashes.** ``model.save(path)`` copies the files into a staging folder, writes
  fstrain's ``manifest.json`` (sha256 and size of every file, lineage, hyperparameters, training
  config, library versions) next to them, and uploads the whole folder with ``hsml``'s
  ``Model.save``. The manifest's own sha256 is stored as the model tag
  ``fstrain_manifest_sha256``; ``download()`` checks the manifest against it and every listed
  file against the manifest (files ``hsml`` adds itself are ignored).
* **Validation status** is the model tag ``validation_status`` (``pending`` at save).
* **Lineage** (feature view, version, training-dataset version, the training dataset's
  metadata with its feature-group commits) is in the manifest and the tag ``fstrain_lineage``.
* **Attachments and scorecards** are files: ``add_attachment``/``write_attachment`` write into a
  local mirror of the version (``<project root>/models/<name>/<version>``), update the manifest
  there, and upload the file and the manifest into the version's ``Files`` folder with the
  SDK's dataset API (``images/*.png`` are what the Hopsworks UI shows). Each file is uploaded
  under a temporary name and then moved over the old one, so a failed upload never loses the
  file it was replacing. Not atomic across files: a failure between the file and the manifest
  leaves the new file with the old manifest (the next download reports it).
* ``model_path`` is that local mirror (downloaded on first use, and again when the registry's
  manifest sha256 no longer matches it), so the pipelines read scorecards the same way on both
  backends; ``remote_path`` is the path in Hopsworks. ``download()`` without a path never uses
  ``hsml``'s model cache (stale once an attachment is added).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.hopsworks.sdk_calls import sdk_attr, sdk_call
from fstrain.kernel.errors import InvalidArgumentError
from model_registry import history
from model_registry.errors import ModelNotFoundError, ModelNotSavedError
from model_registry.naming import (
    INPUT_EXAMPLE_FILE,
    MANIFEST_FILE,
    MODEL_SCHEMA_FILE,
    check_attachment_path,
    check_metrics,
    check_model_name,
    check_validation_status,
)

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.hopsworks.project import HopsworksProject

STATUS_TAG = "validation_status"
LINEAGE_TAG = "fstrain_lineage"
MANIFEST_TAG = "fstrain_manifest_sha256"
#: files ``hsml`` writes into a version itself (from create_model's input example and schema).
HSML_OWN_FILES = frozenset({INPUT_EXAMPLE_FILE, MODEL_SCHEMA_FILE})
FRAMEWORKS = ("python", "sklearn", "torch")


class HopsworksModelRegistry:
    """``hsml.model_registry.ModelRegistry`` with content hashes, status and attachments."""

    backend = "hopsworks"

    def __init__(self, sdk_mr: Any, project: HopsworksProject) -> None:
        self._sdk = sdk_mr
        self.project = project

    def __repr__(self) -> str:
        return "HopsworksModelRegistry()"

    @property
    def python(self) -> HopsworksModelFramework:
        return HopsworksModelFramework(self, "python")

    @property
    def sklearn(self) -> HopsworksModelFramework:
        return HopsworksModelFramework(self, "sklearn")

    @property
    def torch(self) -> HopsworksModelFramework:
        return HopsworksModelFramework(self, "torch")

    def get_model(self, name: str, version: int | None = None) -> HopsworksModel:
        """A saved version (``None``: as the SDK decides — version 1 with a warning)."""
        check_model_name(name)
        sdk_model = sdk_call(self._sdk, "ModelRegistry.get_model", name, version=version,
                             _owner=f"Model '{name}'")
        if sdk_model is None:
            raise ModelNotFoundError(
                f"Model '{name}'{'' if version is None else f' version {version}'} does not "
                "exist in the Hopsworks model registry. Check the name, or train it first."
            )
        return HopsworksModel._saved_model(self, sdk_model)

    def get_models(self, name: str) -> list[HopsworksModel]:
        """Every saved version of ``name``, by ascending version."""
        check_model_name(name)
        models = sdk_call(self._sdk, "ModelRegistry.get_models", name,
                          _owner=f"Model '{name}'") or []
        wrapped = [HopsworksModel._saved_model(self, m) for m in models]
        return sorted(wrapped, key=lambda m: m.version or 0)

    def get_best_model(self, name: str, metric: str, direction: str = "max") -> HopsworksModel | None:
        """The version with the best training metric, or None. A bare metric (``roc_auc``,
        ``auc``) means its validation value (:mod:`model_registry.metric_names`)."""
        from model_registry.metric_names import metric_key

        if direction not in ("max", "min"):
            raise InvalidArgumentError(
                f"get_best_model: direction must be 'max' or 'min'. Got {direction!r} instead."
            )
        best = sdk_call(self._sdk, "ModelRegistry.get_best_model", name, metric_key(metric),
                        direction, _owner=f"Model '{name}'")
        if best is None and metric_key(metric) != metric:  # a metric outside the vocabulary
            best = sdk_call(self._sdk, "ModelRegistry.get_best_model", name, metric, direction,
                            _owner=f"Model '{name}'")
        return None if best is None else HopsworksModel._saved_model(self, best)


class HopsworksModelFramework:
    """``mr.python`` / ``mr.sklearn`` / ``mr.torch``: ``create_model`` per framework."""

    def __init__(self, registry: HopsworksModelRegistry, framework: str) -> None:
        self._registry = registry
        self.framework = framework

    def create_model(
        self, name: str, version: int | None = None, metrics: Mapping[str, float] | None = None,
        description: str | None = None, input_example: Any = None, model_schema: Any = None,
        feature_view: Any = None, training_dataset_version: int | None = None,
        tags: Mapping[str, Any] | None = None, *,
        hyperparameters: Mapping[str, Any] | None = None,
        training_config: Mapping[str, Any] | None = None,
    ) -> HopsworksModel:
        """A model handle; nothing is uploaded until ``model.save(path)``."""
        check_model_name(name)
        return HopsworksModel(
            self._registry, name, framework=self.framework, version=version,
            metrics=check_metrics(metrics, name=name), description=description,
            input_example=input_example, model_schema=model_schema, feature_view=feature_view,
            training_dataset_version=training_dataset_version, tags=dict(tags or {}),
            hyperparameters=hyperparameters, training_config=training_config,
        )


class HopsworksModel(history.HistoryMixin):
    """A model version in Hopsworks (mirrors fstrain's local ``Model``)."""

    def __init__(self, registry: HopsworksModelRegistry, name: str, *, framework: str,
                 version: int | None = None, metrics: dict[str, float] | None = None,
                 description: str | None = None, input_example: Any = None,
                 model_schema: Any = None, feature_view: Any = None,
                 training_dataset_version: int | None = None, tags: dict[str, Any] | None = None,
                 hyperparameters: Mapping[str, Any] | None = None,
                 training_config: Mapping[str, Any] | None = None) -> None:
        self._registry = registry
        self._name = name
        self._framework = framework
        self._version = version
        self._metrics = dict(metrics or {})
        self._description = description
        self._input_example = input_example
        self._model_schema = model_schema
        self._feature_view = feature_view
        self._training_dataset_version = training_dataset_version
        self._tags = dict(tags or {})
        self._hyperparameters = None if hyperparameters is None else dict(hyperparameters)
        self._training_config = None if training_config is None else dict(training_config)
        self._sdk: Any = None
        self._tag_cache: dict[str, Any] | None = None

    @classmethod
    def _saved_model(cls, registry: HopsworksModelRegistry, sdk_model: Any) -> HopsworksModel:
        model = cls(registry, sdk_attr(sdk_model, "Model", "name"),
                    framework=str(sdk_attr(sdk_model, "Model", "framework") or "python").lower(),
                    version=sdk_attr(sdk_model, "Model", "version"),
                    metrics=dict(sdk_attr(sdk_model, "Model", "training_metrics") or {}),
                    description=sdk_attr(sdk_model, "Model", "description"),
                    training_dataset_version=sdk_attr(sdk_model, "Model", "training_dataset_version"))
        model._sdk = sdk_model
        return model

    def __repr__(self) -> str:
        return f"HopsworksModel(name={self._name!r}, version={self._version!r}, framework={self._framework!r})"

    def _label(self) -> str:
        return f"Model '{self._name}' version {self._version}"

    def _saved(self) -> Any:
        if self._sdk is None:
            raise ModelNotSavedError(
                f"Model '{self._name}' is not saved in Hopsworks. Call model.save(path) first, "
                "or get it with mr.get_model(name, version)."
            )
        return self._sdk

    # ------------------------------------------------------------------ save

    def save(self, model_path: str | os.PathLike[str], await_registration: int = 480,
             keep_original_files: bool = True, upload_configuration: Any = None) -> HopsworksModel:
        """Upload ``model_path`` (a file or a folder's content) plus fstrain's manifest."""
        from model_registry.manifest import (
            ManifestFields,
            build_manifest,
            file_entry,
            model_lineage,
            write_manifest,
        )

        source = Path(model_path)
        if not source.exists():
            raise InvalidArgumentError(
                f"Model '{self._name}': model_path must be an existing file or folder. Got "
                f"'{source}' instead. Write the model files first, then call model.save(path)."
            )
        staging = self._registry.project.root / ".staging" / f"{self._name}-{uuid.uuid4().hex}"
        staging.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, staging)
        else:
            staging.mkdir()
            shutil.copy2(source, staging / source.name)
        try:
            entries = sorted(
                (file_entry(p, p.relative_to(staging).as_posix(), "model")
                 for p in staging.rglob("*") if p.is_file()),
                key=lambda e: e["path"],
            )
            lineage = model_lineage(self._feature_view, self._training_dataset_version,
                                    label=f"Model '{self._name}'")
            manifest = build_manifest(ManifestFields(
                name=self._name, framework=self._framework, description=self._description,
                metrics=self._metrics, lineage=lineage, files=entries,
                hyperparameters=self._hyperparameters, training_config=self._training_config,
                extra={"backend": "hopsworks"},
            ))
            sha = write_manifest(staging, manifest)
            registry = self._registry
            if self._framework == "sklearn":
                flavor = sdk_attr(registry._sdk, "ModelRegistry", "sklearn")
            elif self._framework == "torch":
                flavor = sdk_attr(registry._sdk, "ModelRegistry", "torch")
            else:
                flavor = sdk_attr(registry._sdk, "ModelRegistry", "python")
            fv = self._feature_view
            sdk_model = sdk_call(
                flavor, f"{self._framework}.create_model", self._name, version=self._version,
                metrics=self._metrics or None, description=self._description,
                input_example=_example(self._input_example), model_schema=None,
                feature_view=None if fv is None else getattr(fv, "_sdk", fv),
                training_dataset_version=self._training_dataset_version,
                _owner=f"Model '{self._name}'",
            )
            saved = sdk_call(sdk_model, "Model.save", str(staging),
                             await_registration=await_registration, keep_original_files=True,
                             _owner=f"Model '{self._name}'")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self._sdk = saved if saved is not None else sdk_model
        self._version = sdk_attr(self._sdk, "Model", "version")
        try:
            for tag, value in {STATUS_TAG: "pending", MANIFEST_TAG: sha,
                               LINEAGE_TAG: _json(lineage), **self._tags}.items():
                sdk_call(self._sdk, "Model.add_tag", tag, value, _owner=self._label())
        except BaseException:
            sdk_call(self._sdk, "Model.delete", _owner=self._label())  # no half-registered version
            self._sdk = None
            raise
        return self

    # ------------------------------------------------------------------ files

    def download(self, local_path: str | os.PathLike[str] | None = None) -> str:
        """Download the version's files and verify them against fstrain's manifest.

        Without ``local_path`` the files go into a new folder under the project's
        ``downloads/<name>/<version>/``, never into ``hsml``'s model cache: that cache is keyed
        by the model id only, so after an attachment is added it would hand back the files as
        they were (and fail verification against the new manifest).
        """
        if local_path is None:
            parent = self._registry.project.root / "downloads" / self._name / str(self._version)
            parent.mkdir(parents=True, exist_ok=True)
            dest = tempfile.mkdtemp(prefix="files-", dir=parent)
        else:
            dest = str(local_path)
        path = Path(sdk_call(self._saved(), "Model.download", local_path=dest,
                             _owner=self._label()))
        self._verify(path)
        return str(path)

    def _verify(self, folder: Path) -> dict[str, Any]:
        """Check the manifest against tag ``fstrain_manifest_sha256``, then every file against
        the manifest (sha256, size, no missing or extra file but those ``hsml`` writes itself)."""
        from model_registry.manifest import read_manifest, verify_directory

        manifest = read_manifest(folder, expected_sha256=self.get_tags().get(MANIFEST_TAG),
                                 label=self._label())
        verify_directory(folder, manifest, label=self._label(), ignore_extra=HSML_OWN_FILES)
        return manifest

    @property
    def model_path(self) -> Path:
        """A verified local mirror of the version (downloaded on first use)."""
        mirror = self._registry.project.root / "models" / self._name / str(self._version)
        if not self._mirror_is_current(mirror):
            self._saved()
            mirror.parent.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=".dl-", dir=mirror.parent))
            try:
                self.download(scratch)
                shutil.rmtree(mirror, ignore_errors=True)
                os.replace(scratch, mirror)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return mirror

    def _mirror_is_current(self, mirror: Path) -> bool:
        """The mirror holds the manifest the registry names (another process may have added an
        attachment since it was downloaded: then it is downloaded again)."""
        import hashlib

        path = mirror / MANIFEST_FILE
        if not path.is_file():
            return False
        expected = self.get_tags().get(MANIFEST_TAG)
        return expected is None or hashlib.sha256(path.read_bytes()).hexdigest() == expected

    @property
    def remote_path(self) -> str:
        """The version's files folder in Hopsworks (``/Projects/<p>/Models/<name>/<v>/Files``)."""
        return str(sdk_attr(self._saved(), "Model", "model_files_path"))

    @property
    def manifest(self) -> dict[str, Any]:
        return self._verify(self.model_path)

    def add_attachment(self, relative_path: str, source: bytes | str | os.PathLike[str]) -> Path:
        """Add or replace a file in the version (uploaded into its ``Files`` folder); the
        append-only ``history/`` folder is written only by :meth:`_append_history`."""
        if history.is_history_path(check_attachment_path(relative_path, owner=self._label())):
            raise InvalidArgumentError(f"{self._label()}: '{relative_path}' is inside the "
                                       "append-only 'history/' folder.")
        return self._attach(relative_path, source)

    def _append_history(self, kind: str, payload: dict[str, Any], files: dict[str, bytes],
                        status: str | None) -> dict[str, Any]:
        """One history event as attachments, its ``record.json`` last (an event without it
        is incomplete and never listed); no existing path is ever replaced."""
        from fstrain.kernel.timeutil import utc_now_iso as utc_now
        from model_registry.manifest import git_commit

        manifest = self.manifest
        event = history.build_event(kind, payload, files, seq=history.next_seq(manifest),
                                    created=utc_now(), code_commit=git_commit())
        for rel, data in history.event_files(event, files).items():
            self._attach(rel, data)
        if status is not None:
            self.set_validation_status(status)
        return event

    def _history_events(self) -> list[dict[str, Any]]:
        """Events read from the verified mirror (the manifest's sha256 is the model tag)."""
        return history.read_history(self.manifest, lambda rel: (self.model_path / rel).read_bytes())

    def _attach(self, relative_path: str, source: bytes | str | os.PathLike[str]) -> Path:
        from fstrain.kernel.timeutil import utc_now_iso as utc_now
        from model_registry.manifest import file_entry, write_manifest

        rel = check_attachment_path(relative_path, owner=self._label())
        mirror = self.model_path
        manifest = self._verify(mirror)
        entries = {e["path"]: e for e in manifest["files"]}
        if rel in entries and entries[rel].get("kind") != "attachment":
            raise InvalidArgumentError(
                f"{self._label()}: '{rel}' is a model file and cannot be replaced by an "
                "attachment. Choose another name, or save a new version."
            )
        target = mirror / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, bytes | bytearray | memoryview):
            target.write_bytes(bytes(source))
        elif isinstance(source, str | os.PathLike) and Path(source).is_file():
            shutil.copyfile(source, target)
        else:
            raise InvalidArgumentError(
                f"{self._label()}: attachment source must be bytes or an existing file. Got "
                f"{source!r} instead."
            )
        entries[rel] = file_entry(target, rel, "attachment")
        manifest["files"] = sorted(entries.values(), key=lambda e: e["path"])
        manifest["updated"] = utc_now()
        sha = write_manifest(mirror, manifest)
        remote = self.remote_path
        remote_dir = remote if "/" not in rel else f"{remote}/{rel.rsplit('/', 1)[0]}"
        self._replace_remote(target, remote_dir)
        self._replace_remote(mirror / MANIFEST_FILE, remote)
        self.add_tag(MANIFEST_TAG, sha)
        return target

    def _replace_remote(self, local: Path, remote_dir: str) -> None:
        """Put ``local`` into ``remote_dir`` under its name, replacing any file there only once
        the new bytes are uploaded: the upload goes to a temporary name beside it, then is moved
        over the old file (``DatasetApi.upload(overwrite=True)`` would delete the old file
        first, and lose it if the upload then failed)."""
        datasets = self._registry.project.get_dataset_api()
        if not sdk_call(datasets, "DatasetApi.exists", remote_dir, _owner=self._label()):
            sdk_call(datasets, "DatasetApi.mkdir", remote_dir, _owner=self._label())
        with tempfile.TemporaryDirectory(dir=self._registry.project.root) as scratch:
            part = Path(scratch) / f".{local.name}.{uuid.uuid4().hex}.part"
            shutil.copyfile(local, part)
            sdk_call(datasets, "DatasetApi.upload", str(part), remote_dir, overwrite=False,
                     _owner=self._label())
        sdk_call(datasets, "DatasetApi.move", f"{remote_dir}/{part.name}",
                 f"{remote_dir}/{local.name}", overwrite=True, _owner=self._label())

    def write_attachment(self, relative_path: str, data: str | bytes | Mapping | list) -> Path:
        """Write an attachment from text, bytes, or a dict/list (as JSON)."""
        if isinstance(data, str):
            payload = data.encode("utf-8")
        elif isinstance(data, bytes | bytearray | memoryview):
            payload = bytes(data)
        elif isinstance(data, Mapping | list):
            payload = json.dumps(_json(data), indent=2, sort_keys=True).encode("utf-8")
        else:
            raise InvalidArgumentError(
                f"{self._label()}: attachment data must be str, bytes, dict or list. Got "
                f"{type(data).__name__} instead."
            )
        return self.add_attachment(relative_path, payload)

    # ------------------------------------------------------------------ status and tags

    def set_validation_status(self, status: str) -> None:
        """Set the model tag ``validation_status`` (``pending``, ``passed`` or ``failed``)."""
        self.add_tag(STATUS_TAG, check_validation_status(status, owner=self._label()))

    @property
    def validation_status(self) -> str:
        if self._sdk is None:
            return "pending"
        return str(self.get_tags().get(STATUS_TAG) or "pending")

    def add_tag(self, name: str, value: Any) -> None:
        sdk_call(self._saved(), "Model.add_tag", name, value, _owner=self._label())
        self._tag_cache = None

    def get_tag(self, name: str) -> Any:
        value = sdk_call(self._saved(), "Model.get_tag", name, _owner=self._label())
        if value is None:
            raise ModelNotFoundError(f"{self._label()} has no tag '{name}'.")
        return value

    def get_tags(self) -> dict[str, Any]:
        if self._tag_cache is None:
            self._tag_cache = dict(sdk_call(self._saved(), "Model.get_tags",
                                            _owner=self._label()) or {})
        return dict(self._tag_cache)

    def delete_tag(self, name: str) -> None:
        sdk_call(self._saved(), "Model.delete_tag", name, _owner=self._label())
        self._tag_cache = None

    def get_feature_view(self, init: bool = True, online: bool = False) -> Any:
        """The fstrain feature view this model was trained from; with ``init`` its batch
        scoring uses the model's training-dataset version (as ``hsml``'s
        ``Model.get_feature_view``, but returning fstrain's adapter)."""
        from fstrain.kernel.errors import InvalidArgumentError

        if online:
            raise InvalidArgumentError(
                f"{self._label()}: online=True (feature serving) is not wrapped by fstrain's "
                "adapter; use batch scoring or the hsml SDK directly."
            )
        if not self.feature_view_name:
            raise InvalidArgumentError(
                f"{self._label()} was registered without a feature view, so there is none to "
                "return."
            )
        fs = self._registry.project.get_feature_store()
        fv = fs.get_feature_view(self.feature_view_name, self.feature_view_version)
        if init:
            fv.init_batch_scoring(self.training_dataset_version)
        return fv

    def delete(self) -> None:
        sdk_call(self._saved(), "Model.delete", _owner=self._label())
        self._sdk = None

    # ------------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> int | None:
        return self._version

    @property
    def framework(self) -> str:
        return self._framework

    @property
    def description(self) -> str | None:
        return self._description

    @property
    def training_metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    @property
    def lineage(self) -> dict[str, Any]:
        if self._sdk is None:
            from model_registry.manifest import model_lineage

            return model_lineage(self._feature_view, self._training_dataset_version,
                                 label=self._label())
        return dict(self.get_tags().get(LINEAGE_TAG) or {})

    @property
    def feature_view_name(self) -> str | None:
        fv = self.lineage.get("feature_view") or {}
        return fv.get("name")

    @property
    def feature_view_version(self) -> int | None:
        fv = self.lineage.get("feature_view") or {}
        return fv.get("version")

    @property
    def training_dataset_version(self) -> int | None:
        if self._training_dataset_version is not None:
            return self._training_dataset_version
        return self.lineage.get("training_dataset_version")

    @property
    def hyperparameters(self) -> dict[str, Any] | None:
        return self._hyperparameters if self._sdk is None else self.manifest.get("hyperparameters")

    @property
    def training_config(self) -> dict[str, Any] | None:
        return self._training_config if self._sdk is None else self.manifest.get("training_config")

    @property
    def created(self) -> Any:
        return None if self._sdk is None else sdk_attr(self._sdk, "Model", "created")


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _example(example: Any) -> Any:
    """hsml takes a DataFrame/Series/ndarray/list as input example; a dict becomes one row."""
    if isinstance(example, Mapping):
        import pandas as pd

        return pd.DataFrame([dict(example)]) if example else None
    return example
