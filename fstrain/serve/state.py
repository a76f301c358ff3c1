"""What the web server keeps in the store: its cookie secret, the sessions and failed logins.

Everything lives under ``<root>/serve/``, created owner-only (0700 folder, 0600 files):

* ``secret``: 32 random bytes made on the first start; the cookie signing key. A secret that
  others can read is refused (the server does not start) rather than used.
* ``sessions.sqlite``: server-side sessions (only the sha256 of a session id is stored, with its
  user, CSRF token, address and times) and failed login attempts. A session ends at logout, on
  a password change or removal of its user, after :data:`IDLE_TIMEOUT_S` without a request and
  :data:`MAX_AGE_S` after login.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fstrain.kernel.errors import ConfigError
from fstrain.kernel.sqlite_open import connect

STATE_DIR = "serve"
SECRET_FILE = "secret"
SESSIONS_FILE = "sessions.sqlite"
IDLE_TIMEOUT_S = 2 * 3600
MAX_AGE_S = 12 * 3600
MAX_FAILURES = 5
FAILURE_WINDOW_S = 15 * 60
LOCKOUT_S = 15 * 60

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id_hash TEXT PRIMARY KEY, user TEXT NOT NULL, csrf TEXT NOT NULL,
    created REAL NOT NULL, last_seen REAL NOT NULL, address TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_user ON sessions(user);
CREATE TABLE IF NOT EXISTS failures (user TEXT NOT NULL, address TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS failures_key ON failures(user, address, at);
"""


@dataclass(frozen=True)
class Session:
    """A live session: whose, its CSRF token, when it started."""

    user: str
    csrf: str
    created: float


def _id_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _owner_only(path: Path, what: str) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"{what} {path} is readable by others (mode {mode:o}); run `chmod 600 {path}` "
            "(or delete it to make a new one, which logs everyone out)."
        )


class ServerState:
    """The server's files under ``<root>/serve``. Safe to share between threads."""

    def __init__(self, root: Path) -> None:
        self.dir = Path(root) / STATE_DIR
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self.secret = self._load_secret()
        self._db_path = self.dir / SESSIONS_FILE
        if not self._db_path.exists():
            os.close(os.open(self._db_path, os.O_WRONLY | os.O_CREAT, 0o600))
        _owner_only(self._db_path, "session database")
        self._lock = threading.Lock()
        with self._db() as db:
            db.executescript(_SCHEMA)

    def _load_secret(self) -> bytes:
        path = self.dir / SECRET_FILE
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            _owner_only(path, "cookie secret")
            data = path.read_bytes()
            if len(data) < 32:
                raise ConfigError(f"cookie secret {path} is too short; delete it to make a new one.")
            return data
        data = secrets.token_bytes(32)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return data

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = connect(self._db_path, 10.0)
            try:
                yield conn
            finally:
                conn.close()

    # -- sessions ---------------------------------------------------------------------------

    def create_session(self, user: str, address: str) -> str:
        """A new session for ``user``; its id (goes into the signed cookie, never stored)."""
        session_id = secrets.token_urlsafe(32)
        now = time.time()
        with self._db() as db:
            db.execute("DELETE FROM sessions WHERE last_seen < ? OR created < ?",
                       (now - IDLE_TIMEOUT_S, now - MAX_AGE_S))  # ended ones never linger
            db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
                       (_id_hash(session_id), user, secrets.token_urlsafe(32), now, now, address))
        return session_id

    def session(self, session_id: str) -> Session | None:
        """The live session with this id (its idle clock restarted), or None."""
        now = time.time()
        key = _id_hash(session_id)
        with self._db() as db:
            row = db.execute("SELECT user, csrf, created, last_seen FROM sessions WHERE id_hash = ?",
                             (key,)).fetchone()
            if row is None:
                return None
            user, csrf, created, last_seen = row
            if now - last_seen > IDLE_TIMEOUT_S or now - created > MAX_AGE_S:
                db.execute("DELETE FROM sessions WHERE id_hash = ?", (key,))
                return None
            db.execute("UPDATE sessions SET last_seen = ? WHERE id_hash = ?", (now, key))
        return Session(user=user, csrf=csrf, created=created)

    def revoke(self, session_id: str) -> None:
        """End one session (logout)."""
        with self._db() as db:
            db.execute("DELETE FROM sessions WHERE id_hash = ?", (_id_hash(session_id),))

    def revoke_user(self, user: str) -> int:
        """End every session of ``user`` (password changed, user removed); how many."""
        with self._db() as db:
            return db.execute("DELETE FROM sessions WHERE user = ?", (user,)).rowcount

    def session_count(self, user: str) -> int:
        """Live sessions of ``user`` (for tests and ``fstrain users list``)."""
        with self._db() as db:
            return int(db.execute("SELECT COUNT(*) FROM sessions WHERE user = ?",
                                  (user,)).fetchone()[0])

    # -- failed logins ----------------------------------------------------------------------

    def locked_for(self, user: str, address: str) -> float:
        """Seconds until ``user`` may try again from ``address`` (0: not locked): after
        :data:`MAX_FAILURES` failures within :data:`FAILURE_WINDOW_S`, :data:`LOCKOUT_S` from
        the last of them."""
        now = time.time()
        with self._db() as db:
            db.execute("DELETE FROM failures WHERE at < ?",
                       (now - FAILURE_WINDOW_S - LOCKOUT_S,))
            times = [r[0] for r in db.execute(
                "SELECT at FROM failures WHERE user = ? AND address = ? ORDER BY at",
                (user, address))]
        for i in range(len(times) - MAX_FAILURES + 1):
            window = times[i:i + MAX_FAILURES]
            if window[-1] - window[0] <= FAILURE_WINDOW_S:
                until = times[-1] + LOCKOUT_S
                if until > now:
                    return until - now
        return 0.0

    def record_failure(self, user: str, address: str) -> None:
        """Count one failed login of ``user`` from ``address``."""
        with self._db() as db:
            db.execute("INSERT INTO failures VALUES (?, ?, ?)", (user, address, time.time()))

    def clear_failures(self, user: str, address: str) -> None:
        """Forget the failures of ``user`` from ``address`` (after a successful login)."""
        with self._db() as db:
            db.execute("DELETE FROM failures WHERE user = ? AND address = ?", (user, address))
