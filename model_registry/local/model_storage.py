"""``LocalModelStorage``: model versions on the local file system (a :class:`ModelStorage`).

Layout under ``root``: ``index.sqlite`` (the index, see :mod:`model_registry.local.index`),
``<name>/<version>/`` (one folder per version: model files, ``manifest.json``,
``input_example.json``, ``model_schema.json``, attachments) and ``.tmp/`` (scratch space).

A save copies files into ``.tmp``, then — holding the index's write lock — picks the version,
writes the manifest, renames the folder into place and inserts the index row in one SQLite
transaction; any failure removes what was written. Changes after save (validation status,
attachments, history) rewrite the manifest atomically and update its hash in the same
transaction. A saved version's handle is its index row (:class:`ModelRecord`); every operation
reads the row afresh, so a version deleted meanwhile raises :class:`ModelNotFoundError`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fstrain.kernel.canonical_json import dumps
from fstrain.kernel.errors import (
    IntegrityError,
    InvalidArgumentError,
    did_you_mean,
    listing,
)
from fstrain.kernel.timeutil import utc_now_iso as utc_now
from model_registry import history
from model_registry.api import ModelDraft
from model_registry.audit.trust import TRUST_DIR, TrustStore
from model_registry.errors import ModelAlreadyExistsError, ModelNotFoundError
from model_registry.local.attachments import attachment_change, history_change
from model_registry.local.index import IndexTransaction, ModelRecord, RegistryIndex
from model_registry.local.storage import VersionStore, copy_files, list_source_files
from model_registry.local.storage_errors import typed_storage_errors
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
    check_validation_status,
)
from model_registry.schema import infer_model_schema

#: ``change(manifest, undo)``: edits a manifest (and files), registering how to undo them.
ManifestChange = Callable[[dict[str, Any], list[Callable[[], None]]], None]


class LocalModelStorage:
    """Versions stored under ``root`` with their index; ``feature_store`` returns the project's
    feature store (for ``model.get_feature_view()``), None for a registry opened on its own."""

    backend = "local"

    def __init__(self, root: Path, index: RegistryIndex,
                 feature_store: Callable[[], Any] | None = None,
                 trust: TrustStore | None = None,
                 after_history: Callable[[], None] | None = None) -> None:
        """``trust``: the store's trust list (default ``<root>/../trust``, the store root's);
        ``after_history`` runs after every appended history event (a validation run or a
        sign-off), whoever appended it."""
        self.root = root
        self.index = index
        self.files = VersionStore(root)
        self.feature_store = feature_store
        self.trust = trust if trust is not None else TrustStore(root.parent / TRUST_DIR)
        self.after_history = after_history

    def trust_store(self) -> TrustStore:
        """The store's trust list (which may not exist yet: an unsigned store)."""
        return self.trust

    def __repr__(self) -> str:
        return f"LocalModelStorage(root='{self.root}')"

    # ------------------------------------------------------------------ save

    @typed_storage_errors("saving a new version")
    def save(self, draft: ModelDraft, source: Path, *, await_registration: int = 480,
             sealer: history.Sealer | None = None) -> tuple[ModelRecord, int]:
        """Copy ``source`` into a new version folder with its creation record (event 0,
        sealed by ``sealer``; unsigned without one) and index it, atomically."""
        label = f"Model '{draft.name}'"
        files = list_source_files(source, owner=label)
        if draft.version is not None and self.index.get(draft.name, draft.version) is not None:
            raise self.exists(draft.name, draft.version)
        staging = self.files.new_staging_dir()
        try:
            copy_files(files, staging)
            base = self._staged_manifest(draft, staging, [rel for _, rel in files])
            record = self._commit(draft, staging, base, sealer or history.Sealer(None))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if base["unsafe_files"]:
            warnings.warn(
                f"{label} version {record.version}: {base['unsafe_files']} load through pickle "
                "and will only load with trust_pickle=True. Prefer "
                "save_xgboost/save_sklearn/save_torch.",
                UserWarning,
                stacklevel=4,
            )
        return record, record.version

    def _staged_manifest(self, draft: ModelDraft, staging: Path,
                         model_files: list[str]) -> dict[str, Any]:
        """Write the input example and schema next to the staged files; the manifest (without
        its version, assigned under the write lock)."""
        fv, td_version = draft.feature_view, draft.training_dataset_version
        schema = draft.model_schema
        if schema is None and fv is not None and td_version is not None:
            schema = infer_model_schema(fv)
        entries = [file_entry(staging / rel, rel, "model") for rel in model_files]
        extras = {INPUT_EXAMPLE_FILE: draft.input_example,
                  MODEL_SCHEMA_FILE: None if schema is None else schema.to_dict()}
        for fname, content in extras.items():
            if content is not None:
                (staging / fname).write_text(dumps(content), encoding="utf-8")
                entries.append(file_entry(staging / fname, fname, "metadata"))
        return build_manifest(ManifestFields(
            name=draft.name, framework=draft.framework, description=draft.description,
            metrics=dict(draft.metrics),
            lineage=model_lineage(fv, td_version, label=f"Model '{draft.name}'"),
            files=sorted(entries, key=lambda e: e["path"]),
            hyperparameters=draft.hyperparameters, training_config=draft.training_config,
            model_schema=extras[MODEL_SCHEMA_FILE], input_example=draft.input_example,
        ))

    def _commit(self, draft: ModelDraft, staging: Path, base: dict[str, Any],
                sealer: history.Sealer) -> ModelRecord:
        """Under the index's write lock: pick the version, write its creation record, move the
        folder into place and insert its rows and tags (a failure removes the folder again)."""
        name = draft.name
        final: Path | None = None
        try:
            with self.index.write() as tx:
                version = draft.version or tx.max_version(name) + 1
                if tx.get(name, version) is not None:
                    raise self.exists(name, version)
                target = self.files.version_dir(name, version)
                # under the write lock a folder without an index row can only be left over by
                # a crashed save: remove it
                self.files.discard(target)
                manifest, creation = _with_creation_record(staging, {**base, "version": version},
                                                           sealer)
                sha = write_manifest(staging, manifest)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(staging, target)
                final = target
                record = ModelRecord(
                    name=name, version=version, framework=draft.framework,
                    created=base["created"], manifest_sha256=sha,
                    description=draft.description, metrics=dict(draft.metrics),
                    feature_view_name=base["feature_view_name"],
                    feature_view_version=base["feature_view_version"],
                    training_dataset_version=draft.training_dataset_version,
                )
                tx.insert(record)
                tx.add_history(name, version, 0, "creation", creation["created"], None,
                               history.sha256_bytes(history.record_bytes(creation)))
                for tag, value in draft.tags.items():
                    tx.set_tag(name, version, tag, value)
        except BaseException:
            if final is not None:
                self.files.discard(final)
                self.files.remove_empty_model_dir(name)
            raise
        return record

    # ------------------------------------------------------------------ reading

    def created(self, handle: ModelRecord) -> str:
        """Creation time (UTC, ISO 8601)."""
        return handle.created

    def validation_status(self, handle: ModelRecord) -> str:
        """The status in this handle's index row."""
        return handle.validation_status

    def feature_view_ref(self, handle: ModelRecord) -> tuple[str | None, int | None]:
        """The feature view's name and version, from the index row."""
        return handle.feature_view_name, handle.feature_view_version

    def lineage(self, handle: ModelRecord) -> dict[str, Any]:
        """The manifest's lineage."""
        return dict(self.manifest(handle).get("lineage") or {})

    def manifest(self, handle: ModelRecord) -> dict[str, Any]:
        """``manifest.json``, checked against the sha256 in the index."""
        row = self.fresh(handle)
        folder = self.files.version_dir(row.name, row.version)
        return read_manifest(folder, expected_sha256=row.manifest_sha256, label=_label(row))

    def files_path(self, handle: ModelRecord) -> Path:
        """The version folder ``<root>/<name>/<version>``."""
        return self.files.version_dir(handle.name, handle.version)

    def remote_path(self, handle: ModelRecord) -> str:
        """The version folder, as a string (a local registry keeps nothing remote)."""
        return str(self.files_path(handle))

    @typed_storage_errors("downloading")
    def download(self, handle: ModelRecord, local_path: str | os.PathLike[str] | None) -> Path:
        """Copy the version folder into ``local_path`` (new or empty; None: a temp folder)
        and verify it; a failure leaves ``local_path`` as it was."""
        row = self.fresh(handle)
        label = _label(row)
        source = self.files.version_dir(row.name, row.version)
        if not source.is_dir():
            raise ModelNotFoundError(
                f"{label}: its folder {source} is missing. Delete the version and save it again."
            )
        dest, created = _download_target(local_path, row, label)
        try:
            shutil.copytree(source, dest, dirs_exist_ok=True, symlinks=True)
            manifest = read_manifest(dest, expected_sha256=row.manifest_sha256, label=label)
            verify_directory(dest, manifest, label=label)
        except BaseException:
            if created:
                shutil.rmtree(dest, ignore_errors=True)
            else:
                for child in dest.iterdir():
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
            raise
        return dest

    def verify(self, handle: ModelRecord) -> None:
        """Check the version folder in place against its manifest."""
        row = self.fresh(handle)
        folder = self.files.version_dir(row.name, row.version)
        manifest = read_manifest(folder, expected_sha256=row.manifest_sha256, label=_label(row))
        verify_directory(folder, manifest, label=_label(row))

    def get_feature_view(self, name: str, version: int | None) -> Any:
        """The project's feature view (needs a registry opened through its project)."""
        if self.feature_store is None:
            raise InvalidArgumentError(
                f"Feature view '{name}' version {version}: this model registry was opened "
                "without its project, so it cannot reach the feature store. Open it with "
                "fstrain.login(...).get_model_registry()."
            )
        return self.feature_store().get_feature_view(name, version)

    # ------------------------------------------------------------------ changes

    @typed_storage_errors("deleting")
    def delete(self, handle: ModelRecord) -> None:
        """Remove the index row (tags and history rows cascade) and the folder."""
        trash: Path | None = None
        folder = self.files.version_dir(handle.name, handle.version)
        try:
            with self.index.write() as tx:
                self.require(tx, handle)
                tx.delete(handle.name, handle.version)
                if folder.exists():
                    trash = self.files.new_temp_path("trash")
                    os.rename(folder, trash)
                self.files.remove_empty_model_dir(handle.name)
        except BaseException:
            if trash is not None:
                folder.parent.mkdir(parents=True, exist_ok=True)
                os.rename(trash, folder)
            raise
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)

    @typed_storage_errors("setting the validation status")
    def set_validation_status(self, handle: ModelRecord, status: str) -> ModelRecord:
        """Status in the manifest and the index row together; the fresh row."""
        check_validation_status(status, owner=_label(handle))

        def change(manifest: dict[str, Any], undo: list[Callable[[], None]]) -> None:
            manifest["validation_status"] = status
            manifest["validation_updated"] = utc_now()

        return self.update_manifest(handle, change, validation_status=status)

    @typed_storage_errors("adding an attachment")
    def attach(self, handle: ModelRecord, relative_path: str, data: bytes | Path) -> Path:
        """Put an attachment into the version folder and the manifest, atomically."""
        label = _label(handle)
        rel = check_attachment_path(relative_path, owner=label)
        if history.is_history_path(rel):
            raise InvalidArgumentError(
                f"{label}: '{rel}' is inside the append-only '{history.HISTORY_DIR}/' folder; "
                "record a validation run or a sign-off instead."
            )
        if isinstance(data, Path) and not data.is_file():
            raise InvalidArgumentError(
                f"{label}: attachment source must be an existing file. Got '{data}' instead."
            )
        staged = self.files.new_temp_path("attachment")
        backup = self.files.new_temp_path("backup")
        try:
            if isinstance(data, Path):
                shutil.copyfile(data, staged)
            else:
                staged.write_bytes(data)
            folder = self.files.version_dir(handle.name, handle.version)
            self.update_manifest(handle, attachment_change(
                label, rel, folder, staged, backup, file_entry(staged, rel, "attachment")))
        finally:
            staged.unlink(missing_ok=True)
            backup.unlink(missing_ok=True)
        return self.files.version_dir(handle.name, handle.version) / rel

    @typed_storage_errors("appending to the history")
    def append_history(self, handle: ModelRecord, kind: str, payload: dict[str, Any],
                       files: dict[str, bytes], status: str | None,
                       sealer: history.Sealer | None = None) -> dict[str, Any]:
        """Append one immutable event (record + files under ``history/<seq>/``, chained to
        the newest record and sealed by ``sealer``) and its index row in one transaction; a
        validation event also sets ``validation_status``."""
        label = _label(handle)
        row = self.fresh(handle)
        folder = self.files.version_dir(handle.name, handle.version)
        staged = self.files.new_staging_dir()
        event: dict[str, Any] = {}

        def check() -> None:
            if kind != "validation" and payload.get("validation_seq") != self.last_run(row):
                raise InvalidArgumentError(f"{label}: a validation run was recorded meanwhile; "
                                           "review it and sign off again.")

        def make(seq: int, manifest: dict[str, Any]) -> dict[str, Any]:
            return history.chained_event(manifest, kind, payload, files, seq=seq,
                                         created=utc_now(), code_commit=git_commit(),
                                         sealer=sealer or history.Sealer(None))

        def index(tx: IndexTransaction) -> None:
            tx.add_history(handle.name, handle.version, event["seq"], kind, event["created"],
                           event.get("status"),
                           history.sha256_bytes(history.record_bytes(event)))

        values = {} if status is None else {"validation_status": check_validation_status(
            status, owner=label, recorded=True)}
        try:
            change = history_change(label, folder, staged, event, files=files, status=status,
                                    check=check, make=make)
            self.update_manifest(handle, change, after=index, **values)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        if self.after_history is not None:
            self.after_history()
        return event

    def history(self, handle: ModelRecord) -> list[dict[str, Any]]:
        """Every event of a version, oldest first, each checked against the index's sha256."""
        row = self.fresh(handle)
        folder = self.files.version_dir(row.name, row.version)
        manifest = self.manifest(row)
        indexed = self.history_index(row)

        def read(rel: str) -> bytes:
            path = folder / rel
            if not path.is_file():
                raise IntegrityError(
                    f"{_label(row)}: {rel} is missing (deleted outside the registry); "
                    f"`fstrain registry verify {row.name}:{row.version}` lists what is broken."
                )
            return path.read_bytes()

        events = history.read_history(manifest, read)
        for event in events:
            raw = (folder / history.event_dir(event["seq"]) / history.RECORD_FILE).read_bytes()
            if indexed.get(event["seq"]) != history.sha256_bytes(raw):
                raise IntegrityError(
                    f"{_label(row)}: history event {event['seq']} does not match the registry "
                    "index (changed or added outside the registry)."
                )
        gone = sorted(set(indexed) - {int(e["seq"]) for e in events})
        if gone:
            raise IntegrityError(
                f"{_label(row)}: history event(s) {', '.join(map(str, gone))} are in the "
                "registry index but gone from the version (deleted outside the registry); "
                f"`fstrain registry verify {row.name}:{row.version}` lists what is broken."
            )
        return events

    def stored_path(self, handle: ModelRecord) -> Path:
        """The version folder (what the registry holds is on this disk)."""
        return self.files_path(handle)

    def stored_manifest(self, handle: ModelRecord, folder: Path) -> dict[str, Any]:
        """The manifest, checked against the index."""
        return self.manifest(handle)

    def history_index(self, handle: ModelRecord) -> dict[int, str]:
        """``seq → record sha256`` of the version's events, as the index keeps them."""
        return {seq: sha for seq, _, _, _, sha in self.index.history(handle.name, handle.version)}

    def last_run(self, handle: ModelRecord) -> int | None:
        """The sequence number of the newest validation run, or None."""
        runs = [seq for seq, kind, *_ in self.index.history(handle.name, handle.version)
                if kind == "validation"]
        return runs[-1] if runs else None

    def update_manifest(
        self,
        handle: ModelRecord,
        change: ManifestChange,
        after: Callable[[IndexTransaction], None] | None = None,
        **row_values: Any,
    ) -> ModelRecord:
        """Apply ``change`` to the manifest (and files) and update the index row, atomically
        (``after`` adds more index writes to the same transaction); the fresh row."""
        folder = self.files.version_dir(handle.name, handle.version)
        undo: list[Callable[[], None]] = []
        old_manifest: bytes | None = None
        try:
            with self.index.write() as tx:
                row = self.require(tx, handle)
                manifest = read_manifest(
                    folder, expected_sha256=row.manifest_sha256, label=_label(row)
                )
                change(manifest, undo)
                old_manifest = (folder / MANIFEST_FILE).read_bytes()
                self.files.tmp.mkdir(parents=True, exist_ok=True)
                sha = write_manifest(folder, manifest, scratch=self.files.tmp)
                tx.update(handle.name, handle.version, manifest_sha256=sha, **row_values)
                if after is not None:
                    after(tx)
        except BaseException:
            if old_manifest is not None:
                tmp = self.files.new_temp_path("manifest")
                tmp.write_bytes(old_manifest)
                os.replace(tmp, folder / MANIFEST_FILE)
            for step in reversed(undo):
                step()
            raise
        return self.fresh(handle)

    # ------------------------------------------------------------------ tags

    @typed_storage_errors("setting a tag")
    def set_tag(self, handle: ModelRecord, name: str, value: Any) -> None:
        """Set (or replace) a tag in the index."""
        with self.index.write() as tx:
            self.require(tx, handle)
            tx.set_tag(handle.name, handle.version, name, value)

    def get_tags(self, handle: ModelRecord) -> dict[str, Any]:
        """All tags of the version."""
        self.fresh(handle)
        return self.index.tags(handle.name, handle.version)

    def get_tag(self, handle: ModelRecord, name: str) -> Any:
        """One tag (raises :class:`ModelNotFoundError` naming the tags that exist)."""
        tags = self.get_tags(handle)
        if name not in tags:
            raise ModelNotFoundError(
                f"{_label(handle)} has no tag '{name}'. Existing tags: {listing(tags)}."
                + did_you_mean(name, tags)
            )
        return tags[name]

    @typed_storage_errors("deleting a tag")
    def delete_tag(self, handle: ModelRecord, name: str) -> None:
        """Remove a tag (raises :class:`ModelNotFoundError` when it is not set)."""
        with self.index.write() as tx:
            self.require(tx, handle)
            if not tx.delete_tag(handle.name, handle.version, name):
                raise ModelNotFoundError(
                    f"{_label(handle)} has no tag '{name}'; nothing was deleted."
                )

    # ------------------------------------------------------------------ rows and errors

    def fresh(self, handle: ModelRecord) -> ModelRecord:
        """The version's current index row (raises when it was deleted)."""
        row = self.index.get(handle.name, handle.version)
        if row is None:
            raise self.not_found(handle.name, handle.version)
        return row

    def require(self, tx: IndexTransaction, handle: ModelRecord) -> ModelRecord:
        """The version's row inside a write transaction (raises when it was deleted)."""
        row = tx.get(handle.name, handle.version)
        if row is None:
            raise self.not_found(handle.name, handle.version)
        return row

    def not_found(self, name: str, version: int) -> ModelNotFoundError:
        """The error for a missing model or version, naming what exists."""
        versions = [r.version for r in self.index.list(name)]
        if versions:
            return ModelNotFoundError(
                f"Model '{name}' has no version {version}. Existing versions: {listing(versions)}."
            )
        names = self.index.names()
        return ModelNotFoundError(
            f"Model '{name}' does not exist in the registry at {self.root}. Existing models: "
            f"{listing(names)}." + did_you_mean(name, names)
        )

    def exists(self, name: str, version: int) -> ModelAlreadyExistsError:
        """The error for saving over an existing version."""
        return ModelAlreadyExistsError(
            f"Model '{name}' version {version} already exists. Versions are immutable: leave "
            "version=None to get the next free version, or delete this version first."
        )


def _with_creation_record(staging: Path, manifest: dict[str, Any],
                          sealer: history.Sealer) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write event 0 (the creation record) into the staged folder; the manifest listing it,
    and the record."""
    record = history.creation_event(manifest, version=int(manifest["version"]),
                                    created=manifest["created"],
                                    code_commit=manifest.get("git_commit"), sealer=sealer)
    entries = list(manifest["files"])
    for rel, data in history.event_files(record, {}).items():
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        (staging / rel).write_bytes(data)
        entries.append(file_entry(staging / rel, rel, "history"))
    return {**manifest, "files": sorted(entries, key=lambda e: e["path"])}, record


def _download_target(local_path: str | os.PathLike[str] | None, row: ModelRecord,
                     label: str) -> tuple[Path, bool]:
    """The download folder and whether it was created here (it must be new or empty)."""
    if local_path is None:
        return Path(tempfile.mkdtemp(prefix=f"fstrain_{row.name}_{row.version}_")), True
    dest = Path(local_path)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InvalidArgumentError(
            f"{label}: local_path must be a new or empty folder. Got '{dest}', which is "
            "not empty. Pick another folder or leave local_path=None."
        )
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    return dest, created


def _label(record: ModelRecord) -> str:
    return f"Model '{record.name}' version {record.version}"
