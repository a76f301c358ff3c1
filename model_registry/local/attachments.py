"""Manifest changes of a local version: an attachment, a history event.

Each function returns a ``change(manifest, undo)`` for
:meth:`LocalModelStorage.update_manifest <model_registry.local.model_storage.LocalModelStorage.update_manifest>`,
which runs it under the index's write lock and, on any failure, restores the old manifest and
runs the registered undo steps.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.timeutil import utc_now_iso as utc_now
from model_registry import history
from model_registry.manifest import file_entry

Undo = list[Callable[[], None]]
Change = Callable[[dict[str, Any], Undo], None]


def attachment_change(label: str, rel: str, folder: Path, staged: Path, backup: Path,
                      entry: dict[str, Any]) -> Change:
    """Move the ``staged`` file to ``folder/rel`` (the old one kept in ``backup`` until the
    transaction commits) and list it in the manifest; model files are never replaced."""

    def change(manifest: dict[str, Any], undo: Undo) -> None:
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

    return change


def history_change(label: str, folder: Path, staged: Path, event: dict[str, Any], *,
                   files: dict[str, bytes], status: str | None,
                   check: Callable[[], None],
                   make: Callable[[int, dict[str, Any]], dict[str, Any]]) -> Change:
    """Write history event ``make(seq, manifest)`` (filled into ``event``; it follows the
    manifest's newest record) with its files under ``history/<seq>/`` and list them in the
    manifest. ``check`` runs first, under the lock."""

    def change(manifest: dict[str, Any], undo: Undo) -> None:
        seq = history.next_seq(manifest)
        check()
        event.update(make(seq, manifest))
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

    return change


def _restore(target: Path, backup: Path) -> None:
    if backup.exists():
        os.replace(backup, target)
    else:
        target.unlink(missing_ok=True)
