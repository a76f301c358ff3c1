"""``LocalModelRegistry``: the model registry on the local file system (hsml's ``ModelRegistry``).

Layout under ``root``: ``index.sqlite`` (the index, see :mod:`model_registry.local.index`),
``<name>/<version>/`` (one folder per version: model files, ``manifest.json``,
``input_example.json``, ``model_schema.json``, attachments) and ``.tmp/`` (scratch space).

A save copies files into ``.tmp``, then — holding the index's write lock — picks the version,
writes the manifest, renames the folder into place and inserts the index row in one SQLite
transaction; any failure removes what was written. Changes after save (validation status,
attachments) rewrite the manifest atomically and update its hash in the same transaction.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fstrain.kernel.canonical_json import dumps
from fstrain.kernel.errors import (
    BackendError,
    IntegrityError,
    InvalidArgumentError,
    did_you_mean,
    listing,
)
from fstrain.kernel.timeutil import utc_now_iso as utc_now
from model_registry import history
from model_registry.errors import (
    ModelAlreadyExistsError,
    ModelNotFoundError,
    VersionWarning,
)
from model_registry.local.index import IndexTransaction, ModelRecord, RegistryIndex
from model_registry.local.model import Model
from model_registry.local.signature import ModelFramework
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
    check_model_name,
    check_validation_status,
    check_version,
)
from model_registry.schema import infer_model_schema

INDEX_FILE = "index.sqlite"


class LocalModelRegistry:
    """A model registry stored under ``root`` (``<project root>/model_registry``).

    Mirrors ``hsml.model_registry.ModelRegistry``: ``python``/``sklearn``/``torch``
    ``.create_model(...)``, ``get_model``, ``get_models``, ``get_best_model``.
    """

    DEFAULT_VERSION = 1

    def __init__(self, root: Path, feature_store: Callable[[], Any] | None = None) -> None:
        """``feature_store`` returns the project's feature store (for
        ``model.get_feature_view()``); a registry opened on its own has none."""
        self.root = Path(root)
        self._feature_store = feature_store
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._index = RegistryIndex(self.root / INDEX_FILE)
        except (OSError, sqlite3.Error) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            damaged = isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, sqlite3.OperationalError)
            hint = (f"its index {self.root / INDEX_FILE} is damaged; restore it from a backup"
                    if damaged else "point --root or FSTRAIN_HOME at a writable folder")
            raise BackendError(
                f"model registry at {self.root} cannot be opened ({type(exc).__name__}: "
                f"{reason}): {hint}."
            ) from exc
        self._store = VersionStore(self.root)

    def __repr__(self) -> str:
        return f"LocalModelRegistry(root='{self.root}')"

    # ------------------------------------------------------------------ frameworks

    @property
    def python(self) -> ModelFramework:
        """Create generic Python models: ``mr.python.create_model(...)``."""
        return ModelFramework(self, "python")

    @property
    def sklearn(self) -> ModelFramework:
        """Create scikit-learn models: ``mr.sklearn.create_model(...)``."""
        return ModelFramework(self, "sklearn")

    @property
    def torch(self) -> ModelFramework:
        """Create PyTorch models: ``mr.torch.create_model(...)``."""
        return ModelFramework(self, "torch")

    # ------------------------------------------------------------------ reading

    def get_model(self, name: str, version: int | None = None) -> Model:
        """Return a saved model version.

        Args:
            name: model name.
            version: version to return. ``None`` returns **version 1** (as Hopsworks does)
                and emits a :class:`VersionWarning`; use :meth:`get_models` or
                :meth:`get_best_model` to find the latest or best version.

        Raises:
            ModelNotFoundError: the model or the version does not exist.
        """
        check_model_name(name)
        if version is None:
            warnings.warn(
                f"No version provided for getting model '{name}', defaulting to version "
                f"{self.DEFAULT_VERSION}.",
                VersionWarning,
                stacklevel=2,
            )
            version = self.DEFAULT_VERSION
        check_version(version, name=name)
        record = self._index.get(name, version)
        if record is None:
            raise self._not_found(name, version)
        return Model._from_record(self, record)

    def get_models(self, name: str) -> list[Model]:
        """Every saved version of ``name``, by ascending version (empty if there is none)."""
        check_model_name(name)
        return [Model._from_record(self, r) for r in self._index.list(name)]

    def get_best_model(
        self, name: str, metric: str, direction: str = "max", validated_only: bool = False,
        *, require_approval: bool = False,
    ) -> Model | None:
        """The version of ``name`` with the highest (``"max"``) or lowest (``"min"``) training
        metric ``metric``; ties go to the newest version. ``metric`` is a registered key
        (``validation_roc_auc``) or a bare name meaning its validation value (``roc_auc``,
        ``auc``; see :mod:`model_registry.metric_names`). Versions without that metric are
        skipped. With ``validated_only=True`` only versions whose validation status is
        ``passed`` count; with ``require_approval=True`` only versions a reviewer approved
        after their latest validation run. Returns None when no version qualifies (as hsml).
        """
        check_model_name(name)
        if not isinstance(metric, str) or not metric:
            raise InvalidArgumentError(
                f"get_best_model: metric must be a non-empty string. Got {metric!r} instead."
            )
        direction_norm = direction.lower() if isinstance(direction, str) else direction
        if direction_norm not in ("max", "min"):
            raise InvalidArgumentError(
                f"get_best_model: direction must be 'max' or 'min'. Got {direction!r} instead."
            )
        from model_registry.metric_names import metric_key

        self._check_best_inputs(name, metric, metric_key(metric))
        record = self._index.best(name, metric_key(metric), direction_norm,
                                  validated_only=validated_only, require_approval=require_approval)
        if record is None and metric_key(metric) != metric:  # a metric outside the vocabulary
            record = self._index.best(name, metric, direction_norm, validated_only=validated_only,
                                      require_approval=require_approval)
        return None if record is None else Model._from_record(self, record)

    def _check_best_inputs(self, name: str, metric: str, key: str) -> None:
        """Warn, naming what exists, when the model or the metric is unknown: the answer stays
        ``None`` as in hsml, but a typo no longer looks like "no version qualifies"."""
        from model_registry.metric_names import split_of

        records = self._index.list(name)
        if not records:
            names = self._index.names()
            warnings.warn(
                f"get_best_model: model '{name}' does not exist in the registry at {self.root} "
                f"(models: {listing(names)}).{did_you_mean(name, names)} Returning None.",
                UserWarning, stacklevel=3,
            )
            return

        def bare(k: str) -> str:
            return k.split("_", 1)[1] if split_of(k) is not None else k

        recorded = sorted({m for r in records for m in r.metrics})
        if metric not in recorded and bare(key) not in {bare(m) for m in recorded}:
            warnings.warn(
                f"get_best_model: no version of model '{name}' records metric '{metric}' "
                f"(recorded metrics: {listing(recorded)}).{did_you_mean(metric, recorded)} "
                "Returning None.",
                UserWarning, stacklevel=3,
            )

    def list_models(self, name: str | None = None) -> list[Model]:
        """Every saved version of ``name`` — or of every model — by name then version."""
        if name is not None:
            check_model_name(name)
        return [Model._from_record(self, r) for r in self._index.list(name)]

    # ------------------------------------------------------------------ used by Model

    @typed_storage_errors("saving a new version")
    def _save(self, model: Model, source: Path) -> ModelRecord:
        name, label = model.name, f"Model '{model.name}'"
        if not source.exists():
            raise InvalidArgumentError(
                f"{label}: model_path must be an existing file or folder. Got '{source}' "
                "instead. Write the model files first, then call model.save(path)."
            )
        files = list_source_files(source, owner=label)
        if model.version is not None and self._index.get(name, model.version) is not None:
            raise self._exists(name, model.version)
        fv, td_version = model._feature_view, model.training_dataset_version
        schema = model._model_schema
        if schema is None and fv is not None and td_version is not None:
            schema = infer_model_schema(fv)
        lineage = model_lineage(fv, td_version, label=label)
        staging = self._store.new_staging_dir()
        final: Path | None = None
        try:
            copy_files(files, staging)
            entries = [file_entry(staging / rel, rel, "model") for _, rel in files]
            extras = {INPUT_EXAMPLE_FILE: model._input_example}
            extras[MODEL_SCHEMA_FILE] = None if schema is None else schema.to_dict()
            for fname, content in extras.items():
                if content is not None:
                    (staging / fname).write_text(dumps(content), encoding="utf-8")
                    entries.append(file_entry(staging / fname, fname, "metadata"))
            entries.sort(key=lambda e: e["path"])
            base = build_manifest(ManifestFields(
                name=name, framework=model.framework, description=model.description,
                metrics=model.training_metrics, lineage=lineage, files=entries,
                hyperparameters=model._hyperparameters, training_config=model._training_config,
                model_schema=extras[MODEL_SCHEMA_FILE], input_example=model._input_example,
            ))
            with self._index.write() as tx:
                version = model.version or tx.max_version(name) + 1
                if tx.get(name, version) is not None:
                    raise self._exists(name, version)
                target = self._store.version_dir(name, version)
                # under the write lock a folder without an index row can only be left over by
                # a crashed save: remove it
                self._store.discard(target)
                sha = write_manifest(staging, {**base, "version": version})
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(staging, target)
                final = target
                record = ModelRecord(
                    name=name,
                    version=version,
                    framework=model.framework,
                    created=base["created"],
                    manifest_sha256=sha,
                    description=model.description,
                    metrics=model.training_metrics,
                    feature_view_name=base["feature_view_name"],
                    feature_view_version=base["feature_view_version"],
                    training_dataset_version=td_version,
                )
                tx.insert(record)
                for tag, value in model._tags.items():
                    tx.set_tag(name, version, tag, value)
        except BaseException:
            if final is not None:
                self._store.discard(final)
                self._store.remove_empty_model_dir(name)
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if base["unsafe_files"]:
            warnings.warn(
                f"{label} version {version}: {base['unsafe_files']} load through pickle and will "
                "only load with trust_pickle=True. Prefer save_xgboost/save_sklearn/save_torch.",
                UserWarning,
                stacklevel=3,
            )
        return record

    @typed_storage_errors("downloading")
    def _download(self, record: ModelRecord, local_path: str | os.PathLike[str] | None) -> Path:
        import tempfile

        row = self._fresh(record)
        label = _label(row)
        source = self._store.version_dir(row.name, row.version)
        if not source.is_dir():
            raise ModelNotFoundError(
                f"{label}: its folder {source} is missing. Delete the version and save it again."
            )
        if local_path is None:
            dest = Path(tempfile.mkdtemp(prefix=f"fstrain_{row.name}_{row.version}_"))
            created = True
        else:
            dest = Path(local_path)
            if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
                raise InvalidArgumentError(
                    f"{label}: local_path must be a new or empty folder. Got '{dest}', which is "
                    "not empty. Pick another folder or leave local_path=None."
                )
            created = not dest.exists()
            dest.mkdir(parents=True, exist_ok=True)
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

    def _verify(self, record: ModelRecord) -> None:
        row = self._fresh(record)
        folder = self._store.version_dir(row.name, row.version)
        manifest = read_manifest(folder, expected_sha256=row.manifest_sha256, label=_label(row))
        verify_directory(folder, manifest, label=_label(row))

    def _read_manifest(self, record: ModelRecord) -> dict[str, Any]:
        row = self._fresh(record)
        folder = self._store.version_dir(row.name, row.version)
        return read_manifest(folder, expected_sha256=row.manifest_sha256, label=_label(row))

    @typed_storage_errors("deleting")
    def _delete(self, record: ModelRecord) -> None:
        trash: Path | None = None
        folder = self._store.version_dir(record.name, record.version)
        try:
            with self._index.write() as tx:
                self._require(tx, record)
                tx.delete(record.name, record.version)
                if folder.exists():
                    trash = self._store.new_temp_path("trash")
                    os.rename(folder, trash)
                self._store.remove_empty_model_dir(record.name)
        except BaseException:
            if trash is not None:
                folder.parent.mkdir(parents=True, exist_ok=True)
                os.rename(trash, folder)
            raise
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)

    @typed_storage_errors("setting the validation status")
    def _set_validation_status(self, record: ModelRecord, status: str) -> ModelRecord:
        check_validation_status(status, owner=_label(record))

        def change(manifest: dict[str, Any], undo: list[Callable[[], None]]) -> None:
            manifest["validation_status"] = status
            manifest["validation_updated"] = utc_now()

        return self._update_manifest(record, change, validation_status=status)

    @typed_storage_errors("adding an attachment")
    def _attach(self, record: ModelRecord, relative_path: str, data: bytes | Path) -> ModelRecord:
        label = _label(record)
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
        staged = self._store.new_temp_path("attachment")
        backup = self._store.new_temp_path("backup")
        try:
            if isinstance(data, Path):
                shutil.copyfile(data, staged)
            else:
                staged.write_bytes(data)
            entry = file_entry(staged, rel, "attachment")
            folder = self._store.version_dir(record.name, record.version)

            def change(manifest: dict[str, Any], undo: list[Callable[[], None]]) -> None:
                entries = {e["path"]: e for e in manifest["files"]}
                current = entries.get(rel)
                if current is not None and current.get("kind") != "attachment":
                    raise InvalidArgumentError(
                        f"{label}: '{rel}' is a {current.get('kind')} file of the model and "
                        "cannot be replaced by an attachment. Choose another name, or save a "
                        "new version."
                    )
                clash = [p for p in entries if p.startswith(rel + "/") or rel.startswith(p + "/")]
                if clash:
                    raise InvalidArgumentError(
                        f"{label}: attachment path '{rel}' clashes with existing file(s) "
                        f"{clash}. Choose another name."
                    )
                target = folder / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.exists():
                    os.replace(target, backup)
                os.replace(staged, target)
                undo.append(lambda: _restore(target, backup))
                entries[rel] = entry
                manifest["files"] = sorted(entries.values(), key=lambda e: e["path"])
                manifest["updated"] = utc_now()

            return self._update_manifest(record, change)
        finally:
            staged.unlink(missing_ok=True)
            backup.unlink(missing_ok=True)

    @typed_storage_errors("appending to the history")
    def _append_history(self, record: ModelRecord, kind: str, payload: dict[str, Any],
                        files: dict[str, bytes], status: str | None = None) -> dict[str, Any]:
        """Append one immutable event (record + files under ``history/<seq>/``) and its index
        row in one transaction; a validation event also sets ``validation_status``."""
        label = _label(record)
        folder = self._store.version_dir(record.name, record.version)
        staged = self._store.new_staging_dir()
        event: dict[str, Any] = {}

        def change(manifest: dict[str, Any], undo: list[Callable[[], None]]) -> None:
            seq = history.next_seq(manifest)
            if kind != "validation" and payload.get("validation_seq") != _last_run(self, row):
                raise InvalidArgumentError(f"{label}: a validation run was recorded meanwhile; "
                                           "review it and sign off again.")
            event.update(history.build_event(kind, payload, files, seq=seq, created=utc_now(),
                                             code_commit=git_commit()))
            event_folder = folder / history.event_dir(seq)
            if event_folder.exists():
                raise InvalidArgumentError(f"{label}: {history.event_dir(seq)} already exists.")
            entries = {e["path"]: e for e in manifest["files"]}
            for rel, data in history.event_files(event, files).items():
                (staged / rel).parent.mkdir(parents=True, exist_ok=True)
                (staged / rel).write_bytes(data)
                entries[rel] = file_entry(staged / rel, rel, "history")
            event_folder.parent.mkdir(exist_ok=True)
            os.rename(staged / history.event_dir(seq), event_folder)
            undo.append(lambda: shutil.rmtree(event_folder, ignore_errors=True))
            manifest["files"] = sorted(entries.values(), key=lambda e: e["path"])
            manifest["updated"] = utc_now()
            if status is not None:
                manifest["validation_status"] = status
                manifest["validation_updated"] = event["created"]

        def index(tx: IndexTransaction) -> None:
            record_bytes = history.event_files(event, {})[
                f"{history.event_dir(event['seq'])}/{history.RECORD_FILE}"]
            tx.add_history(record.name, record.version, event["seq"], kind, event["created"],
                           event.get("status"), history.sha256_bytes(record_bytes))

        row = self._fresh(record)
        values = {} if status is None else {"validation_status": check_validation_status(
            status, owner=label)}
        try:
            self._update_manifest(record, change, after=index, **values)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        return event

    def _history(self, record: ModelRecord) -> list[dict[str, Any]]:
        """Every event of a version, oldest first, each checked against the index's sha256."""
        row = self._fresh(record)
        folder = self._store.version_dir(row.name, row.version)
        manifest = self._read_manifest(row)
        indexed = {seq: sha for seq, _, _, _, sha in self._index.history(row.name, row.version)}
        events = history.read_history(manifest, lambda rel: (folder / rel).read_bytes())
        for event in events:
            raw = (folder / history.event_dir(event["seq"]) / history.RECORD_FILE).read_bytes()
            if indexed.get(event["seq"]) != history.sha256_bytes(raw):
                raise IntegrityError(
                    f"{_label(row)}: history event {event['seq']} does not match the registry "
                    "index (changed or added outside the registry)."
                )
        return events

    def _update_manifest(
        self,
        record: ModelRecord,
        change: Callable[[dict[str, Any], list[Callable[[], None]]], None],
        after: Callable[[IndexTransaction], None] | None = None,
        **row_values: Any,
    ) -> ModelRecord:
        """Apply ``change`` to the manifest (and files) and update the index row, atomically
        (``after`` adds more index writes to the same transaction)."""
        folder = self._store.version_dir(record.name, record.version)
        undo: list[Callable[[], None]] = []
        old_manifest: bytes | None = None
        try:
            with self._index.write() as tx:
                row = self._require(tx, record)
                manifest = read_manifest(
                    folder, expected_sha256=row.manifest_sha256, label=_label(row)
                )
                change(manifest, undo)
                old_manifest = (folder / MANIFEST_FILE).read_bytes()
                self._store.tmp.mkdir(parents=True, exist_ok=True)
                sha = write_manifest(folder, manifest, scratch=self._store.tmp)
                tx.update(record.name, record.version, manifest_sha256=sha, **row_values)
                if after is not None:
                    after(tx)
        except BaseException:
            if old_manifest is not None:
                tmp = self._store.new_temp_path("manifest")
                tmp.write_bytes(old_manifest)
                os.replace(tmp, folder / MANIFEST_FILE)
            for step in reversed(undo):
                step()
            raise
        return self._fresh(record)

    @typed_storage_errors("setting a tag")
    def _set_tag(self, record: ModelRecord, tag: str, value: Any) -> None:
        with self._index.write() as tx:
            self._require(tx, record)
            tx.set_tag(record.name, record.version, tag, value)

    def _get_tags(self, record: ModelRecord) -> dict[str, Any]:
        self._fresh(record)
        return self._index.tags(record.name, record.version)

    def _get_tag(self, record: ModelRecord, tag: str) -> Any:
        tags = self._get_tags(record)
        if tag not in tags:
            raise ModelNotFoundError(
                f"{_label(record)} has no tag '{tag}'. Existing tags: {listing(tags)}."
                + did_you_mean(tag, tags)
            )
        return tags[tag]

    @typed_storage_errors("deleting a tag")
    def _delete_tag(self, record: ModelRecord, tag: str) -> None:
        with self._index.write() as tx:
            self._require(tx, record)
            if not tx.delete_tag(record.name, record.version, tag):
                raise ModelNotFoundError(
                    f"{_label(record)} has no tag '{tag}'; nothing was deleted."
                )

    # ------------------------------------------------------------------ helpers

    def _fresh(self, record: ModelRecord) -> ModelRecord:
        row = self._index.get(record.name, record.version)
        if row is None:
            raise self._not_found(record.name, record.version)
        return row

    def _require(self, tx: IndexTransaction, record: ModelRecord) -> ModelRecord:
        row = tx.get(record.name, record.version)
        if row is None:
            raise self._not_found(record.name, record.version)
        return row

    def _not_found(self, name: str, version: int) -> ModelNotFoundError:
        versions = [r.version for r in self._index.list(name)]
        if versions:
            return ModelNotFoundError(
                f"Model '{name}' has no version {version}. Existing versions: {listing(versions)}."
            )
        names = self._index.names()
        return ModelNotFoundError(
            f"Model '{name}' does not exist in the registry at {self.root}. Existing models: "
            f"{listing(names)}." + did_you_mean(name, names)
        )

    def _exists(self, name: str, version: int) -> ModelAlreadyExistsError:
        return ModelAlreadyExistsError(
            f"Model '{name}' version {version} already exists. Versions are immutable: leave "
            "version=None to get the next free version, or delete this version first."
        )


def _last_run(registry: LocalModelRegistry, record: ModelRecord) -> int | None:
    runs = [seq for seq, kind, *_ in registry._index.history(record.name, record.version)
            if kind == "validation"]
    return runs[-1] if runs else None


def _label(record: ModelRecord) -> str:
    return f"Model '{record.name}' version {record.version}"


def _restore(target: Path, backup: Path) -> None:
    if backup.exists():
        os.replace(backup, target)
    else:
        target.unlink(missing_ok=True)
