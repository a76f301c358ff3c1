"""Opening a shared SQLite file (catalog, registry index) safely under concurrent processes.

``PRAGMA journal_mode=WAL`` takes an exclusive lock the first time a file switches mode, and
SQLite answers ``database is locked`` there at once instead of waiting out the busy timeout, so
two processes opening a fresh store at the same moment could crash one of them. :func:`connect`
sets the busy timeout first, switches to WAL only when the file is not in WAL yet, and retries
any ``locked``/``busy`` answer with backoff until ``timeout_s`` has passed.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying another connection holds a lock."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def retry_busy(action: Callable[[], T], timeout_s: float) -> T:
    """Run ``action``, retrying while SQLite reports a lock, for at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.5)


def connect(path: Path, timeout_s: float, *, wal: bool = True) -> sqlite3.Connection:
    """An autocommit connection to ``path`` with the busy timeout set before anything else."""

    def open_once() -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            if wal:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
        except BaseException:
            conn.close()
            raise
        return conn

    return retry_busy(open_once, timeout_s)
