"""Where a version's history lives: ``history/<seq>/record.json`` and the event's files.

``seq`` is zero-padded; event 0 is the version's creation, 1, 2, … its validation runs and
sign-offs. Backend-neutral: it reads a version's manifest (its ``files`` entries).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HISTORY_DIR = "history"
RECORD_FILE = "record.json"


def event_dir(seq: int) -> str:
    """``history/0003`` for event 3."""
    return f"{HISTORY_DIR}/{seq:04d}"


def record_path(seq: int) -> str:
    """``history/0003/record.json`` for event 3."""
    return f"{event_dir(seq)}/{RECORD_FILE}"


def is_history_path(rel: str) -> bool:
    """True for a path inside the history folder (never writable as an attachment)."""
    return rel == HISTORY_DIR or rel.startswith(HISTORY_DIR + "/")


def event_folders(manifest: Mapping[str, Any]) -> dict[int, dict[str, str]]:
    """``seq → {file name in the event folder → sha256}`` of every event folder the manifest
    lists (complete or not)."""
    folders: dict[int, dict[str, str]] = {}
    for entry in manifest.get("files", []):
        parts = str(entry["path"]).split("/", 2)
        if len(parts) == 3 and parts[0] == HISTORY_DIR and parts[1].isdigit():
            folders.setdefault(int(parts[1]), {})[parts[2]] = str(entry["sha256"])
    return folders


def history_sequence(manifest: Mapping[str, Any]) -> list[int]:
    """The complete events (those with their ``record.json``) in a manifest, ascending."""
    return sorted(seq for seq, names in event_folders(manifest).items() if RECORD_FILE in names)


def next_seq(manifest: Mapping[str, Any]) -> int:
    """The number of the next event: after every folder, complete or not (an upload that
    failed half-way on a backend without multi-file atomicity is never reused)."""
    return max(event_folders(manifest), default=0) + 1


def head_of(manifest: Mapping[str, Any]) -> str | None:
    """The sha256 of the newest complete record (the chain's head), as the manifest lists it."""
    seqs = history_sequence(manifest)
    return event_folders(manifest)[seqs[-1]][RECORD_FILE] if seqs else None


def record_hashes(manifest: Mapping[str, Any]) -> dict[int, str]:
    """``seq → sha256 of its record.json`` as the manifest lists them."""
    folders = event_folders(manifest)
    return {seq: folders[seq][RECORD_FILE] for seq in history_sequence(manifest)}
