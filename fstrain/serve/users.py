"""The web application's local users: a name, a role and an argon2 hash of the password.

Users live beside the trust list (:func:`users_path`, ``<root>/trust/users.jsonl``, owner-only)
as an append-only log of signed, chained records (``user-add``, ``user-password``,
``user-remove``), sealed with :func:`model_registry.audit.seal` like every other trust change:

* in a store with a trust list, adding or removing a user (or changing a role) needs an owner's
  key (``FSTRAIN_KEY``); a password change is signed by an owner or by the server's service key
  (after the user proved the old password). Every read replays the log and checks each record's
  chain and signature against the trust list: a user written into the file by anyone without
  such a key is refused (:class:`~fstrain.kernel.errors.VerificationError`), not obeyed;
* in a store without a trust list (a demo, a laptop) the records are chained but unsigned.

The password itself is never stored, printed or taken as a command-line argument;
:func:`hash_password` and :func:`check_password` use argon2id through ``argon2-cffi`` with its
default (RFC 9106 low-memory) parameters. A person has one name across the store: a web user
``alice`` and a key of person ``alice`` are the same person, which is what four eyes compares.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from model_registry.audit import Signer, TrustList

import fcntl

from fstrain.kernel.build_info import installed_version
from fstrain.kernel.canonical_json import canonical_bytes
from fstrain.kernel.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    UnauthorizedError,
    VerificationError,
    did_you_mean,
    listing,
)
from model_registry.audit import TRUST_DIR, TrustStore, seal, sha256_hex

ROLES = ("viewer", "data-scientist", "reviewer", "owner")
USERS_FILE = "users.jsonl"
MIN_PASSWORD_LENGTH = 12
_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")


def users_path(root: Path) -> Path:
    """The users file of the store rooted at ``root`` (beside the trust list)."""
    return Path(root) / TRUST_DIR / USERS_FILE


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


def _hasher() -> Any:
    """argon2-cffi's hasher with its defaults (argon2id, RFC 9106 low-memory profile)."""
    from argon2 import PasswordHasher

    return PasswordHasher()


def hash_password(password: str) -> str:
    """argon2id's encoded hash of ``password`` (salted; parameters in the string)."""
    return str(_hasher().hash(password))


_DUMMY_HASH: list[str] = []


def check_password(user: User | None, password: str) -> bool:
    """Whether ``password`` is ``user``'s. An unknown user (None) still costs one argon2
    verification, so timing does not tell which names exist."""
    from argon2.exceptions import InvalidHashError, VerificationError

    hasher = _hasher()
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


_KINDS = {"user-add": ("owner",), "user-remove": ("owner",),
          "user-password": ("owner", "service")}


class UserStore:
    """The users log of one store. Every read replays and checks the file (changes made by
    ``fstrain users`` show at once in a running server); a log that does not verify raises."""

    def __init__(self, root: Path) -> None:
        self.path = users_path(root)
        self.trust_store = TrustStore(Path(root) / TRUST_DIR)
        self._cache: tuple[Any, dict[str, User]] | None = None

    # -- reading ------------------------------------------------------------------------------

    def _stamp(self) -> tuple[Any, ...]:
        out: list[Any] = []
        for path in (self.path, self.trust_store.log_path, self.trust_store.signers_path):
            try:
                st = path.stat()
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except FileNotFoundError:
                out.append(None)
        return tuple(out)

    def _lines(self) -> list[bytes]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return [line for line in data.split(b"\n") if line]

    def users(self) -> dict[str, User]:
        """Every current user by name, from the verified log."""
        stamp = self._stamp()
        if self._cache is not None and self._cache[0] == stamp:
            return self._cache[1]
        users, _head, _count = self._replay(self.trust_store.load())
        self._cache = (stamp, users)
        return users

    def _replay(self, trust: TrustList | None) -> tuple[dict[str, User], str | None, int]:
        users: dict[str, User] = {}
        prev: str | None = None
        problems: list[str] = []
        lines = self._lines()
        for number, raw in enumerate(lines, start=1):
            where = f"trust/{USERS_FILE} line {number}"
            record, problem = _parse(raw, number, prev, where)
            if problem is None:
                problem = _seal_problem(trust, record, where)
            if problem is None:
                problem = _apply(users, record, where)
            if problem is not None:
                problems.append(problem)
                break
            prev = sha256_hex(raw)
        if problems:
            raise VerificationError(
                f"the users of this store ({self.path}) do not verify: {'; '.join(problems)}. "
                "Nobody can sign in until an owner restores the file.", problems)
        return users, prev, len(lines)

    def get(self, name: str) -> User | None:
        """The user called ``name``, or None."""
        return self.users().get(name)

    def list(self) -> list[User]:
        """Every user, by name."""
        users = self.users()
        return [users[n] for n in sorted(users)]

    # -- changes ------------------------------------------------------------------------------

    def add(self, name: str, role: str, password: str, *, signer: Signer | None = None) -> User:
        """Enrol a new user (refused when the name is taken); an owner signs it."""
        check_user_name(name)
        check_role(role)
        check_new_password(password, user=name)

        def build(users: dict[str, User]) -> dict[str, Any]:
            if name in users:
                raise AlreadyExistsError(
                    f"user '{name}' already exists (role {users[name].role}); use "
                    "`fstrain users passwd` or `fstrain users remove` first."
                )
            return {"user": name, "role": role, "password_hash": hash_password(password)}

        return self._change("user-add", signer, build)[name]

    def set_password(self, name: str, password: str, *, signer: Signer | None = None) -> User:
        """Replace a user's password (the caller revokes the user's sessions)."""
        check_new_password(password, user=name)

        def build(users: dict[str, User]) -> dict[str, Any]:
            if name not in users:
                raise self._missing(name, users)
            return {"user": name, "role": users[name].role,
                    "password_hash": hash_password(password)}

        return self._change("user-password", signer, build)[name]

    def remove(self, name: str, *, signer: Signer | None = None) -> None:
        """Remove a user (the caller revokes the user's sessions); an owner signs it."""
        def build(users: dict[str, User]) -> dict[str, Any]:
            if name not in users:
                raise self._missing(name, users)
            return {"user": name}

        self._change("user-remove", signer, build)

    def _change(self, kind: str, signer: Signer | None,
                build: Callable[[dict[str, User]], dict[str, Any]]) -> dict[str, User]:
        """Append one sealed record under the trust list's lock; the users after it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.parent / ".lock", "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            trust = self.trust_store.load()
            _check_signer(trust, signer, kind)
            users, head, count = self._replay(trust)
            record = seal({"seq": count + 1, "created": _now_precise(), "prev": head,
                           "kind": kind, "fstrain_version": installed_version(),
                           **build(users)}, signer if trust is not None else None)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "ab") as out:
                out.write(canonical_bytes(record) + b"\n")
                out.flush()
                os.fsync(out.fileno())
            self._cache = None
            return self._replay(trust)[0]

    def _missing(self, name: str, users: dict[str, Any]) -> NotFoundError:
        return NotFoundError(f"user '{name}' is not enrolled (users: {listing(sorted(users))})."
                             f"{did_you_mean(name, users)}")


def _now_precise() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _check_signer(trust: TrustList | None, signer: Signer | None, kind: str) -> None:
    if trust is None:
        return
    allowed = _KINDS[kind]
    if signer is None:
        raise UnauthorizedError(
            f"this store has a trust list: {kind} must be signed by an {' or '.join(allowed)} "
            "key; set FSTRAIN_KEY to the owner's private key."
        )
    if signer.identity.role not in allowed:
        raise UnauthorizedError(
            f"{kind} is signed by an {' or '.join(allowed)} key; {signer.identity.name} "
            f"({signer.identity.fingerprint}) is a {signer.identity.role} key."
        )


def _parse(raw: bytes, number: int, prev: str | None,
           where: str) -> tuple[dict[str, Any], str | None]:
    try:
        record = json.loads(raw)
    except ValueError:
        return {}, f"{where}: not a JSON record (edited)"
    if not isinstance(record, dict) or canonical_bytes(record) != raw:
        return {}, f"{where}: not in canonical form (edited)"
    if record.get("seq") != number or record.get("prev") != prev:
        return record, f"{where}: out of order (its seq or prev does not follow the line above)"
    if record.get("kind") not in _KINDS:
        return record, f"{where}: unknown record kind {record.get('kind')!r}"
    return record, None


def _seal_problem(trust: TrustList | None, record: dict[str, Any], where: str) -> str | None:
    if trust is None:
        if record.get("signature") is not None:
            return (f"{where}: signed, but the store has no trust list to check it against "
                    "(was trust/ deleted?)")
        return None
    problems = trust.check_seal(record, where=where)
    if problems:
        return "; ".join(problems)
    block = record.get("signer") or {}
    if record.get("signature") is not None and block.get("key_role") not in _KINDS[record["kind"]]:
        return (f"{where}: {record['kind']} signed by {block.get('name')}, a "
                f"{block.get('key_role')} key (needs {' or '.join(_KINDS[record['kind']])})")
    return None


def _apply(users: dict[str, User], record: dict[str, Any], where: str) -> str | None:
    name = str(record.get("user") or "")
    kind = record["kind"]
    if kind == "user-add" and name in users:
        return f"{where}: adds {name} a second time"
    if kind != "user-add" and name not in users:
        return f"{where}: {kind} of {name!r}, who is not enrolled"
    if kind == "user-remove":
        del users[name]
        return None
    created = users[name].created if kind == "user-password" else str(record.get("created"))
    users[name] = User(name=name, role=str(record.get("role")),
                       password_hash=record.get("password_hash"), created=created,
                       password_changed=str(record.get("created")))
    return None
