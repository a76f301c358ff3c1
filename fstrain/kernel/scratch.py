"""Scratch folders and files that a killed process may leave behind, and their cleanup.

A scratch entry is named ``<prefix>-<pid>-<random>``: the process id of its writer tells a later
writer whether it is still running. :func:`clean_stale` removes entries whose writer is gone
(and, for older names without a process id, those untouched for an hour).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

STALE_WITHOUT_PID_S = 3600.0


def scratch_name(prefix: str) -> str:
    """A fresh ``<prefix>-<pid>-<random>`` name."""
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale(entry: Path, prefix: str) -> bool:
    """Whether ``entry`` (named ``<prefix>-...``) was left by a process that is gone."""
    rest = entry.name[len(prefix) + 1:]
    pid, sep, _ = rest.partition("-")
    if sep and pid.isdigit():
        return not _alive(int(pid))
    try:
        return time.time() - entry.lstat().st_mtime > STALE_WITHOUT_PID_S
    except FileNotFoundError:
        return False


def clean_stale(folder: Path, prefixes: tuple[str, ...]) -> list[Path]:
    """Remove entries of ``folder`` named ``<prefix>-...`` whose writer is gone."""
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        prefix = next((p for p in prefixes if entry.name.startswith(p + "-")), None)
        if prefix is None or not is_stale(entry, prefix):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed
