"""The web application's local users: a name, a role and an argon2 hash of the password.

Users live in one JSON file of the store (:func:`users_path`), beside the trust list, written
atomically with owner-only permissions. The password itself is never stored, printed or taken
as a command-line argument; :func:`hash_password` and :func:`check_password` use argon2id through
``argon2-cffi`` with its default (RFC 9106 low-memory) parameters.

A person has one name across the store: a web user ``alice`` and a key named ``alice`` are the
same person, which is what four-eyes compares.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError

ROLES = ("viewer", "data-scientist", "reviewer", "owner")
USERS_FILE = "users.json"
MIN_PASSWORD_LENGTH = 12
_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def users_path(root: Path) -> Path:
    """The users file of the store rooted at ``root`` (beside the trust list)."""
    return Path(root) / "model_registry" / "trust" / USERS_FILE


@dataclass(frozen=True)
class User:
    """One enrolled web user (``password_hash`` is argon2id's encoded string)."""

    name: str
    role: str
    password_hash: str | None
    created: str
    password_changed: str | None

    def public(self) -> dict[str, Any]:
        """What may be shown or logged: everything but the hash."""
        return {"name": self.name, "role": self.role, "created": self.created,
                "password_changed": self.password_changed}


def check_user_name(name: object) -> str:
    """A user name: lower case letters, digits, ``_ . -``, starting with a letter (≤ 63)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidArgumentError(
            "user name must match [a-z][a-z0-9_.-]* (lower case, at most 63 characters). "
            f"Got {name!r} instead."
        )
    return name


def check_role(role: object) -> str:
    """One of :data:`ROLES`."""
    if role not in ROLES:
        raise InvalidArgumentError(
            f"role must be one of {', '.join(ROLES)}. Got {role!r} instead."
        )
    return str(role)


def check_new_password(password: str, *, user: str) -> str:
    """A password a user may set: at least 12 characters, not the user name."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidArgumentError(
            f"user '{user}': the password must have at least {MIN_PASSWORD_LENGTH} characters. "
            f"Got {len(password)} instead."
        )
    if password.strip().lower() == user.lower():
        raise InvalidArgumentError(f"user '{user}': the password must not be the user name.")
    return password


def hash_password(password: str) -> str:
    """argon2id's encoded hash of ``password`` (salted; parameters in the string)."""
    from argon2 import PasswordHasher

    return PasswordHasher().hash(password)


_DUMMY_HASH: list[str] = []


def check_password(user: User | None, password: str) -> bool:
    """Whether ``password`` is ``user``'s. An unknown user (None) still costs one argon2
    verification, so timing does not tell which names exist."""
    from argon2 import PasswordHasher
    from argon2.exceptions import InvalidHashError, VerificationError

    hasher = PasswordHasher()
    encoded = None if user is None else user.password_hash
    if encoded is None:
        if not _DUMMY_HASH:
            _DUMMY_HASH.append(hasher.hash("not a password of anyone"))
        encoded = _DUMMY_HASH[0]
    try:
        ok = hasher.verify(encoded, password)
    except (VerificationError, InvalidHashError):
        return False
    return bool(ok) and user is not None and user.password_hash is not None


class UserStore:
    """The users file of one store. Every read goes to the file (changes made by
    ``fstrain users`` show at once in a running server)."""

    def __init__(self, root: Path) -> None:
        self.path = users_path(root)

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(
                f"users file {self.path} cannot be read ({exc}); restore it from a backup."
            ) from exc
        users = data.get("users") if isinstance(data, dict) else None
        if not isinstance(users, dict):
            raise InvalidArgumentError(f"users file {self.path} has no 'users' mapping.")
        return users

    def _write(self, users: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{USERS_FILE}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"users": users}, out, indent=2, sort_keys=True)
            out.write("\n")
        os.replace(tmp, self.path)

    def get(self, name: str) -> User | None:
        """The user called ``name``, or None."""
        entry = self._read().get(name)
        if not isinstance(entry, dict):
            return None
        return User(name=name, role=str(entry.get("role")),
                    password_hash=entry.get("password_hash"),
                    created=str(entry.get("created")),
                    password_changed=entry.get("password_changed"))

    def list(self) -> list[User]:
        """Every user, by name."""
        return [u for u in (self.get(n) for n in sorted(self._read())) if u is not None]

    def add(self, name: str, role: str, password: str) -> User:
        """Enrol a new user (refused when the name is taken)."""
        check_user_name(name)
        check_role(role)
        check_new_password(password, user=name)
        users = self._read()
        if name in users:
            raise AlreadyExistsError(
                f"user '{name}' already exists (role {users[name].get('role')}); use "
                "`fstrain users passwd` or `fstrain users remove` first."
            )
        now = _now()
        users[name] = {"role": role, "password_hash": hash_password(password),
                       "created": now, "password_changed": now}
        self._write(users)
        return self._require(name)

    def set_password(self, name: str, password: str) -> User:
        """Replace a user's password (the caller revokes the user's sessions)."""
        check_new_password(password, user=name)
        users = self._read()
        if name not in users:
            raise self._missing(name, users)
        users[name] = {**users[name], "password_hash": hash_password(password),
                       "password_changed": _now()}
        self._write(users)
        return self._require(name)

    def remove(self, name: str) -> None:
        """Remove a user (the caller revokes the user's sessions)."""
        users = self._read()
        if name not in users:
            raise self._missing(name, users)
        del users[name]
        self._write(users)

    def _require(self, name: str) -> User:
        user = self.get(name)
        if user is None:  # pragma: no cover - written just before
            raise self._missing(name, self._read())
        return user

    def _missing(self, name: str, users: dict[str, Any]) -> NotFoundError:
        from fstrain.kernel.errors import did_you_mean, listing

        return NotFoundError(f"user '{name}' is not enrolled (users: {listing(sorted(users))})."
                             f"{did_you_mean(name, users)}")
