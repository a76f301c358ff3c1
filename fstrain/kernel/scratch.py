"""Scratch folders and files that a killed process may leave behind, and their cleanup.

A scratch entry is named ``<prefix>-<pid>-<random>``: the process id of its writer tells a later
writer whether it is still running. A scratch *folder* made by :func:`make_scratch_dir` also
records its writer in ``.owner.json``: the host, the process id, the process's start time (so a
process id the system has given to another process since is not taken for the writer) and when
the folder was made. :func:`clean_stale` removes the entries whose writer is gone: on the same
host, a writer that is not running (or whose process id now belongs to a process started at
another time); an entry of another host is kept, since its writer cannot be seen from here,
unless it is older than ``older_than_s`` (what ``vacuum`` passes: a day). Older names without a
process id count as stale once untouched for an hour.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from fstrain.kernel.timeutil import utc_now_iso

STALE_WITHOUT_PID_S = 3600.0
#: Age after which ``vacuum`` removes any scratch folder, whatever host wrote it.
VACUUM_AFTER_S = 24 * 3600.0
OWNER_FILE = ".owner.json"


def scratch_name(prefix: str) -> str:
    """A fresh ``<prefix>-<pid>-<random>`` name."""
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex}"


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat``), or
    None where that cannot be read (no such process, or no ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the name in parentheses may hold spaces
    return fields[19] if len(fields) > 19 else None  # field 22: starttime


def owner_record() -> dict[str, Any]:
    """This process as a scratch folder's writer: host, pid, start time, when."""
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "process_start": process_start(os.getpid()), "created_at": utc_now_iso("seconds"),
            "created_unix": time.time()}


def make_scratch_dir(folder: Path, prefix: str) -> Path:
    """Create ``folder/<prefix>-<pid>-<random>/`` holding this process's :data:`OWNER_FILE`."""
    path = Path(folder) / scratch_name(prefix)
    path.mkdir(parents=True)
    tmp = path / (OWNER_FILE + ".tmp")
    tmp.write_text(json.dumps(owner_record()), encoding="utf-8")
    tmp.replace(path / OWNER_FILE)
    return path


def read_owner(entry: Path) -> dict[str, Any] | None:
    """The writer recorded in a scratch folder, or None (a file, an older folder, unreadable)."""
    try:
        data = json.loads((entry / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


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


def _age_s(entry: Path, owner: dict[str, Any] | None) -> float | None:
    created = owner.get("created_unix") if owner else None
    if isinstance(created, (int, float)):
        return time.time() - float(created)
    try:
        return time.time() - entry.lstat().st_mtime
    except FileNotFoundError:
        return None


def _writer_gone(owner: dict[str, Any]) -> bool:
    """Whether a recorded writer on this host is not running any more."""
    pid = int(owner["pid"])
    started = owner.get("process_start")
    now = process_start(pid)
    if started is not None and now is not None and now != started:
        return True  # the pid belongs to another process now
    return not _alive(pid)


def is_stale(entry: Path, prefix: str, *, older_than_s: float | None = None) -> bool:
    """Whether ``entry`` (named ``<prefix>-...``) was left by a process that is gone, or (with
    ``older_than_s``) is older than that, whoever wrote it."""
    owner = read_owner(entry) if entry.is_dir() and not entry.is_symlink() else None
    age = _age_s(entry, owner)
    if age is None:
        return False  # removed meanwhile
    if older_than_s is not None and age > older_than_s:
        return True
    if owner is not None:
        return owner.get("host") == socket.gethostname() and _writer_gone(owner)
    rest = entry.name[len(prefix) + 1:]
    pid, sep, _ = rest.partition("-")
    if sep and pid.isdigit():
        return not _alive(int(pid))
    return age > STALE_WITHOUT_PID_S


def clean_stale(folder: Path, prefixes: tuple[str, ...], *, older_than_s: float | None = None,
                dry_run: bool = False) -> list[Path]:
    """Remove entries of ``folder`` named ``<prefix>-...`` whose writer is gone (see
    :func:`is_stale`); returns them (with ``dry_run``, only lists them)."""
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        prefix = next((p for p in prefixes if entry.name.startswith(p + "-")), None)
        if prefix is None or not is_stale(entry, prefix, older_than_s=older_than_s):
            continue
        removed.append(entry)
        if dry_run:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return removed
