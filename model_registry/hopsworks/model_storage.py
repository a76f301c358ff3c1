"""``HopsworksModelStorage``: model versions in the Hopsworks model registry (a :class:`ModelStorage`).

* **Content hashes.** A save copies the files into a staging folder, writes fstrain's
  ``manifest.json`` (sha256 and size of every file, lineage, hyperparameters, training config,
  library versions) next to them, and uploads the whole folder with ``hsml``'s ``Model.save``.
  The manifest's own sha256 is stored as the model tag ``fstrain_manifest_sha256``; a download
  checks the manifest against it and every listed file against the manifest (files ``hsml``
  adds itself are ignored).
* **Validation status** is the model tag ``validation_status`` (``pending`` at save).
* **Lineage** (feature view, version, training-dataset version, the training dataset's
  metadata with its feature-group commits) is in the manifest and the tag ``fstrain_lineage``.
* **Attachments and history** are files: an attachment is written into a local mirror of the
  version (``<project root>/models/<name>/<version>``), the manifest there is updated, and the
  file and the manifest are uploaded into the version's ``Files`` folder with the SDK's dataset
  API (``images/*.png`` are what the Hopsworks UI shows). Each file is uploaded under a
  temporary name and then moved over the old one, so a failed upload never loses the file it
  was replacing. Not atomic across files: a failure between the file and the manifest leaves
  the new file with the old manifest (the next download reports it).
* The local files of a version are that mirror (downloaded on first use, and again when the
  registry's manifest sha256 no longer matches it), so the pipelines read scorecards the same
  way on both backends. A download without a path never uses ``hsml``'s model cache (stale
  once an attachment is added).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.hopsworks.sdk_calls import sdk_attr, sdk_call
from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.timeutil import utc_now_iso as utc_now
from model_registry import history
from model_registry.api import ModelDraft
from model_registry.audit.trust import TrustStore
from model_registry.errors import ModelNotFoundError
from model_registry.hopsworks.remote_files import replace_remote
from model_registry.hopsworks.trust import HopsworksTrustStore
from model_registry.manifest import (
    ManifestFields,
    build_manifest,
    file_entry,
    git_commit,
    model_lineage,
    read_manifest,
    verify_directory,
    write_manifest,
)
from model_registry.naming import (
    INPUT_EXAMPLE_FILE,
    MANIFEST_FILE,
    MODEL_SCHEMA_FILE,
    check_attachment_path,
)

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.hopsworks.project import HopsworksProject

STATUS_TAG = "validation_status"
LINEAGE_TAG = "fstrain_lineage"
MANIFEST_TAG = "fstrain_manifest_sha256"
#: files ``hsml`` writes into a version itself (from create_model's input example and schema).
HSML_OWN_FILES = frozenset({INPUT_EXAMPLE_FILE, MODEL_SCHEMA_FILE})


@dataclass
class HopsworksVersion:
    """A saved version: the ``hsml`` model, and its tags once read (cleared on a tag change)."""

    sdk: Any
    name: str
    version: int | None
    tags: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """``Model 'name' version N``, for messages."""
        return f"Model '{self.name}' version {self.version}"


class HopsworksModelStorage:
    """The ``hsml`` model registry ``sdk_mr`` of ``project``, with fstrain's manifest, status,
    lineage, attachments and history."""

    backend = "hopsworks"

    def __init__(self, sdk_mr: Any, project: HopsworksProject) -> None:
        self.sdk_registry = sdk_mr
        self.project = project

    def __repr__(self) -> str:
        return "HopsworksModelStorage()"

    def version_of(self, sdk_model: Any) -> HopsworksVersion:
        """The handle of a model the SDK returned."""
        return HopsworksVersion(sdk_model, sdk_attr(sdk_model, "Model", "name"),
                                sdk_attr(sdk_model, "Model", "version"))

    # ------------------------------------------------------------------ save

    def save(self, draft: ModelDraft, source: Path, *, await_registration: int = 480,
             sealer: history.Sealer | None = None) -> tuple[HopsworksVersion, Any]:
        """Upload ``source`` plus fstrain's manifest, then tag the version (status
        ``pending``, manifest sha256, lineage, the draft's tags) and add its creation record
        (history event 0, sealed by ``sealer``); a failure on the way deletes the version."""
        staging = self.project.root / ".staging" / f"{draft.name}-{uuid.uuid4().hex}"
        staging.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, staging)
        else:
            staging.mkdir()
            shutil.copy2(source, staging / source.name)
        lineage = model_lineage(draft.feature_view, draft.training_dataset_version,
                                label=f"Model '{draft.name}'")
        try:
            sha = _write_staged_manifest(draft, staging, lineage)
            sdk_model = self._upload(draft, staging, await_registration)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        handle = self.version_of(sdk_model)
        try:
            for tag, value in {STATUS_TAG: "pending", MANIFEST_TAG: sha,
                               LINEAGE_TAG: _json(lineage), **draft.tags}.items():
                sdk_call(handle.sdk, "Model.add_tag", tag, value, _owner=handle.label)
            self._add_creation_record(handle, sealer or history.Sealer(None))
        except BaseException:
            sdk_call(handle.sdk, "Model.delete", _owner=handle.label)  # no half-registered version
            raise
        return handle, handle.version

    def _add_creation_record(self, handle: HopsworksVersion, sealer: history.Sealer) -> None:
        """Event 0 of a new version, written once its version number is known."""
        manifest = self.manifest(handle)
        record = history.creation_event(manifest, version=int(handle.version or 0),
                                        created=utc_now(),
                                        code_commit=manifest.get("git_commit"), sealer=sealer)
        for rel, data in history.event_files(record, {}).items():
            self._put(handle, rel, data, kind="history")

    def trust_store(self) -> TrustStore:
        """The project's trust list, kept in the project itself
        (:class:`~model_registry.hopsworks.trust.HopsworksTrustStore`), so every client and
        every job checks signatures against the same list."""
        return HopsworksTrustStore(self.project)

    def history_index(self, handle: HopsworksVersion) -> None:
        """None: the manifest (its sha256 a model tag) is the only index of the history."""
        return None

    def _upload(self, draft: ModelDraft, staging: Path, await_registration: int) -> Any:
        """``mr.<framework>.create_model(...).save(staging)``; the saved ``hsml`` model."""
        if draft.framework == "sklearn":
            flavor = sdk_attr(self.sdk_registry, "ModelRegistry", "sklearn")
        elif draft.framework == "torch":
            flavor = sdk_attr(self.sdk_registry, "ModelRegistry", "torch")
        else:
            flavor = sdk_attr(self.sdk_registry, "ModelRegistry", "python")
        fv = draft.feature_view
        sdk_model = sdk_call(
            flavor, f"{draft.framework}.create_model", draft.name, version=draft.version,
            metrics=dict(draft.metrics) or None, description=draft.description,
            input_example=_example(draft.input_example), model_schema=None,
            feature_view=None if fv is None else getattr(fv, "sdk_object", fv),
            training_dataset_version=draft.training_dataset_version,
            _owner=f"Model '{draft.name}'",
        )
        saved = sdk_call(sdk_model, "Model.save", str(staging),
                         await_registration=await_registration, keep_original_files=True,
                         _owner=f"Model '{draft.name}'")
        return saved if saved is not None else sdk_model

    # ------------------------------------------------------------------ reading

    def created(self, handle: HopsworksVersion) -> Any:
        """The SDK's creation time."""
        return sdk_attr(handle.sdk, "Model", "created")

    def validation_status(self, handle: HopsworksVersion) -> str:
        """The tag ``validation_status``."""
        return str(self.get_tags(handle).get(STATUS_TAG) or "pending")

    def set_validation_status(self, handle: HopsworksVersion, status: str) -> HopsworksVersion:
        """Set the tag ``validation_status``."""
        self.set_tag(handle, STATUS_TAG, status)
        return handle

    def feature_view_ref(self, handle: HopsworksVersion) -> tuple[str | None, int | None]:
        """From the lineage tag."""
        fv = self.lineage(handle).get("feature_view") or {}
        return fv.get("name"), fv.get("version")

    def lineage(self, handle: HopsworksVersion) -> dict[str, Any]:
        """The tag ``fstrain_lineage`` (no download needed)."""
        return dict(self.get_tags(handle).get(LINEAGE_TAG) or {})

    def manifest(self, handle: HopsworksVersion) -> dict[str, Any]:
        """The mirror's manifest, verified."""
        return self._verified(handle, self.files_path(handle))

    def files_path(self, handle: HopsworksVersion) -> Path:
        """A verified local mirror of the version (downloaded when missing or stale)."""
        mirror = self.project.root / "models" / handle.name / str(handle.version)
        if not self._mirror_is_current(handle, mirror):
            mirror.parent.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=".dl-", dir=mirror.parent))
            try:
                self.download(handle, scratch)
                shutil.rmtree(mirror, ignore_errors=True)
                os.replace(scratch, mirror)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return mirror

    def stored_path(self, handle: HopsworksVersion) -> Path:
        """A fresh, unchecked download of the version's Files folder
        (``<project root>/stored/<name>/<version>``, replaced on every call): what the cluster
        holds now, for verification to report on file by file. The verified mirror
        (:meth:`files_path`) is downloaded again only when the manifest changes, so it would
        not show an edit of another file made on the cluster."""
        target = self.project.root / "stored" / handle.name / str(handle.version)
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".dl-", dir=target.parent))
        try:
            sdk_call(handle.sdk, "Model.download", local_path=str(scratch), _owner=handle.label)
            shutil.rmtree(target, ignore_errors=True)
            os.replace(scratch, target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return target

    def stored_manifest(self, handle: HopsworksVersion, folder: Path) -> dict[str, Any]:
        """The downloaded manifest, checked against the tag ``fstrain_manifest_sha256``."""
        return read_manifest(folder, expected_sha256=self.get_tags(handle).get(MANIFEST_TAG),
                             label=handle.label)

    def remote_path(self, handle: HopsworksVersion) -> str:
        """The version's files folder in Hopsworks (``/Projects/<p>/Models/<name>/<v>/Files``)."""
        return str(sdk_attr(handle.sdk, "Model", "model_files_path"))

    def download(self, handle: HopsworksVersion,
                 local_path: str | os.PathLike[str] | None) -> Path:
        """Download the files and verify them against fstrain's manifest.

        Without ``local_path`` the files go into a new folder under the project's
        ``downloads/<name>/<version>/``, never into ``hsml``'s model cache: that cache is keyed
        by the model id only, so after an attachment is added it would hand back the files as
        they were (and fail verification against the new manifest).
        """
        if local_path is None:
            parent = self.project.root / "downloads" / handle.name / str(handle.version)
            parent.mkdir(parents=True, exist_ok=True)
            dest = tempfile.mkdtemp(prefix="files-", dir=parent)
        else:
            dest = str(local_path)
        path = Path(sdk_call(handle.sdk, "Model.download", local_path=dest,
                             _owner=handle.label))
        self._verified(handle, path)
        return path

    def verify(self, handle: HopsworksVersion) -> None:
        """Check the local mirror against the manifest the registry names."""
        self.manifest(handle)

    def _verified(self, handle: HopsworksVersion, folder: Path) -> dict[str, Any]:
        """Check the manifest against tag ``fstrain_manifest_sha256``, then every file against
        the manifest (sha256, size, no missing or extra file but those ``hsml`` writes itself)."""
        manifest = read_manifest(folder, expected_sha256=self.get_tags(handle).get(MANIFEST_TAG),
                                 label=handle.label)
        verify_directory(folder, manifest, label=handle.label, ignore_extra=HSML_OWN_FILES)
        return manifest

    def _mirror_is_current(self, handle: HopsworksVersion, mirror: Path) -> bool:
        """The mirror holds the manifest the registry names (another process may have added an
        attachment since it was downloaded: then it is downloaded again)."""
        path = mirror / MANIFEST_FILE
        if not path.is_file():
            return False
        expected = self.get_tags(handle).get(MANIFEST_TAG)
        return expected is None or hashlib.sha256(path.read_bytes()).hexdigest() == expected

    def get_feature_view(self, name: str, version: int | None) -> Any:
        """fstrain's adapter of the project's feature view."""
        return self.project.get_feature_store().get_feature_view(name, version)

    # ------------------------------------------------------------------ changes

    def delete(self, handle: HopsworksVersion) -> None:
        """Delete the version in Hopsworks."""
        sdk_call(handle.sdk, "Model.delete", _owner=handle.label)

    def attach(self, handle: HopsworksVersion, relative_path: str, data: bytes | Path) -> Path:
        """Add or replace a file of the version (never under ``history/``)."""
        if history.is_history_path(check_attachment_path(relative_path, owner=handle.label)):
            raise InvalidArgumentError(f"{handle.label}: '{relative_path}' is inside the "
                                       "append-only 'history/' folder.")
        return self._put(handle, relative_path, data)

    def append_history(self, handle: HopsworksVersion, kind: str, payload: dict[str, Any],
                       files: dict[str, bytes], status: str | None,
                       sealer: history.Sealer | None = None) -> dict[str, Any]:
        """One history event as files, its ``record.json`` last (an event without it is
        incomplete and never listed), chained to the newest record and sealed by
        ``sealer``; no existing path is ever replaced."""
        manifest = self.manifest(handle)
        event = history.chained_event(manifest, kind, payload, files,
                                      seq=history.next_seq(manifest), created=utc_now(),
                                      code_commit=git_commit(),
                                      sealer=sealer or history.Sealer(None))
        for rel, data in history.event_files(event, files).items():
            self._put(handle, rel, data, kind="history")
        if status is not None:
            self.set_validation_status(handle, status)
        return event

    def history(self, handle: HopsworksVersion) -> list[dict[str, Any]]:
        """Events read from the verified mirror (the manifest's sha256 is the model tag)."""
        mirror = self.files_path(handle)
        return history.read_history(self.manifest(handle),
                                    lambda rel: (mirror / rel).read_bytes())

    def _put(self, handle: HopsworksVersion, relative_path: str, source: bytes | Path, *,
             kind: str = "attachment") -> Path:
        """Write a file into the mirror and its manifest (as ``kind``), then upload both; a
        history file is never replaced."""
        rel = check_attachment_path(relative_path, owner=handle.label)
        mirror = self.files_path(handle)
        manifest = self._verified(handle, mirror)
        entries = {e["path"]: e for e in manifest["files"]}
        if rel in entries and kind == "history":
            raise InvalidArgumentError(f"{handle.label}: '{rel}' exists already; the history "
                                       "is append-only.")
        if rel in entries and entries[rel].get("kind") != "attachment":
            raise InvalidArgumentError(
                f"{handle.label}: '{rel}' is a model file and cannot be replaced by an "
                "attachment. Choose another name, or save a new version."
            )
        target = mirror / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, bytes):
            target.write_bytes(source)
        elif source.is_file():
            shutil.copyfile(source, target)
        else:
            raise InvalidArgumentError(
                f"{handle.label}: attachment source must be bytes or an existing file. Got "
                f"{source!r} instead."
            )
        entries[rel] = file_entry(target, rel, kind)
        manifest["files"] = sorted(entries.values(), key=lambda e: e["path"])
        manifest["updated"] = utc_now()
        sha = write_manifest(mirror, manifest)
        remote = self.remote_path(handle)
        remote_dir = remote if "/" not in rel else f"{remote}/{rel.rsplit('/', 1)[0]}"
        self._replace_remote(handle, target, remote_dir)
        self._replace_remote(handle, mirror / MANIFEST_FILE, remote)
        self.set_tag(handle, MANIFEST_TAG, sha)
        return target

    def _replace_remote(self, handle: HopsworksVersion, local: Path, remote_dir: str) -> None:
        """Put ``local`` into ``remote_dir`` under its name, replacing any file there only once
        the new bytes are uploaded (``remote_files.replace_remote``)."""
        replace_remote(self.project, local, remote_dir, owner=handle.label,
                       scratch=self.project.root)

    # ------------------------------------------------------------------ tags

    def get_tags(self, handle: HopsworksVersion) -> dict[str, Any]:
        """All tags (read once per handle until a tag changes)."""
        if handle.tags is None:
            handle.tags = dict(sdk_call(handle.sdk, "Model.get_tags", _owner=handle.label) or {})
        return dict(handle.tags)

    def get_tag(self, handle: HopsworksVersion, name: str) -> Any:
        """One tag (raises :class:`ModelNotFoundError` when it is not set)."""
        value = sdk_call(handle.sdk, "Model.get_tag", name, _owner=handle.label)
        if value is None:
            raise ModelNotFoundError(f"{handle.label} has no tag '{name}'.")
        return value

    def set_tag(self, handle: HopsworksVersion, name: str, value: Any) -> None:
        """``Model.add_tag``."""
        sdk_call(handle.sdk, "Model.add_tag", name, value, _owner=handle.label)
        handle.tags = None

    def delete_tag(self, handle: HopsworksVersion, name: str) -> None:
        """``Model.delete_tag``."""
        sdk_call(handle.sdk, "Model.delete_tag", name, _owner=handle.label)
        handle.tags = None


def _write_staged_manifest(draft: ModelDraft, staging: Path, lineage: dict[str, Any]) -> str:
    """fstrain's manifest of the staged files; its sha256."""
    entries = sorted(
        (file_entry(p, p.relative_to(staging).as_posix(), "model")
         for p in staging.rglob("*") if p.is_file()),
        key=lambda e: e["path"],
    )
    schema = draft.model_schema
    manifest = build_manifest(ManifestFields(
        name=draft.name, framework=draft.framework, description=draft.description,
        metrics=dict(draft.metrics), lineage=lineage, files=entries,
        hyperparameters=draft.hyperparameters, training_config=draft.training_config,
        model_schema=None if schema is None else schema.to_dict(),
        input_example=draft.input_example, extra={"backend": "hopsworks"},
    ))
    return write_manifest(staging, manifest)


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _example(example: Any) -> Any:
    """hsml takes a DataFrame/Series/ndarray/list as input example; a dict becomes one row."""
    if isinstance(example, Mapping):
        import pandas as pd

        return pd.DataFrame([dict(example)]) if example else None
    return example
