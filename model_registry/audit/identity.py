"""Who acts: an enrolled key (:class:`Identity`) and a private key that signs as it (:class:`Signer`).

An identity is a named Ed25519 key with a role, belonging to a person (a person may have several
keys, and a web login; all in one namespace, the four-eyes rule compares persons). A ``service``
key (the web app's) signs for persons the owner named when enrolling it (``attests_for``, each
``person:role``, or ``*:role`` for any person the service itself vouches for in that role, as
the web app does for its owner-signed users): its records say "signed by key K, acting for
person P".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fstrain.kernel.errors import InvalidArgumentError, UnauthorizedError
from model_registry.audit import keys

ROLES = ("data-scientist", "validator", "reviewer", "owner", "service")
#: who may do what (a service key acts for a person whose attested role is listed).
ACTION_ROLES: dict[str, tuple[str, ...]] = {
    "creation": ("data-scientist", "validator"),
    "validation": ("data-scientist", "validator"),
    "approval": ("reviewer",),
    "rejection": ("reviewer",),
    "trust": ("owner",),
    "policy": ("owner",),
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


def check_name(value: str, *, what: str) -> str:
    """A key or person name: letters, digits and ``_ . @ -`` (no spaces, commas or quotes,
    so it stays one token of the allowed_signers file)."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidArgumentError(
            f"{what} must be 1-64 characters of letters, digits and _ . @ - (starting with a "
            f"letter or digit). Got {value!r} instead."
        )
    return value


def check_role(role: str) -> str:
    """One of :data:`ROLES`."""
    if role not in ROLES:
        raise InvalidArgumentError(f"role must be one of {', '.join(ROLES)}. Got {role!r} instead.")
    return role


def parse_attestation(entry: str) -> tuple[str, str]:
    """``person:role`` → ``(person, role)``; a service key attests only for non-service roles."""
    person, sep, role = str(entry).partition(":")
    if not sep:
        raise InvalidArgumentError(
            f"--attests-for entries are PERSON:ROLE (e.g. alice:reviewer, or *:reviewer for any "
            f"person). Got {entry!r} instead."
        )
    if person != "*":
        check_name(person, what="attested person")
    if check_role(role) in ("service", "owner"):
        raise InvalidArgumentError(
            f"a service key attests for data-scientist, validator or reviewer persons. Got "
            f"{entry!r} instead."
        )
    return person, role


@dataclass(frozen=True)
class Identity:
    """An enrolled key: ``name`` (the allowed_signers principal), the ``person`` it belongs to,
    its ``role``, ``fingerprint`` (``SHA256:…``), OpenSSH ``public_key``, the ``person:role``
    entries a service key attests for, and when it was enrolled and revoked."""

    name: str
    person: str
    role: str
    fingerprint: str
    public_key: str
    attests_for: tuple[str, ...] = ()
    enrolled: str | None = None
    revoked: str | None = None
    revoke_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The identity as stored in an enrolment record."""
        return {"name": self.name, "person": self.person, "role": self.role,
                "fingerprint": self.fingerprint, "public_key": self.public_key,
                "attests_for": list(self.attests_for)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Identity:
        """Back from :meth:`to_dict` (the fingerprint is recomputed from the key and must
        match the one written)."""
        identity = cls(name=str(data["name"]), person=str(data["person"]), role=str(data["role"]),
                       fingerprint=str(data["fingerprint"]), public_key=str(data["public_key"]),
                       attests_for=tuple(str(a) for a in data.get("attests_for") or ()))
        if keys.fingerprint(identity.public_key) != identity.fingerprint:
            raise InvalidArgumentError(
                f"identity {identity.name}: fingerprint {identity.fingerprint} is not that of "
                "its public key."
            )
        return identity

    def attested_role(self, person: str) -> str | None:
        """The role this service key attests for ``person`` by name, else its only ``*:role``,
        else None."""
        for entry in self.attests_for:
            who, _, role = entry.partition(":")
            if who == person:
                return role
        wild = [e.partition(":")[2] for e in self.attests_for if e.startswith("*:")]
        return wild[0] if len(wild) == 1 else None

    def may_attest(self, person: str, role: str) -> bool:
        """Whether this service key may sign for ``person`` acting as ``role``."""
        return f"{person}:{role}" in self.attests_for or f"*:{role}" in self.attests_for

    def active_at(self, when: str) -> bool:
        """Enrolled at or before ``when`` and not revoked by then (ISO 8601 UTC times)."""
        if self.enrolled is not None and when < self.enrolled:
            return False
        return self.revoked is None or when < self.revoked


@dataclass(frozen=True)
class Signer:
    """A private key signing as ``identity``; ``acting_for`` names the person a service key
    signs for (None: the identity's own person)."""

    key: Ed25519PrivateKey = field(repr=False)
    identity: Identity
    acting_for: str | None = None
    acting_role: str | None = None

    @property
    def person(self) -> str:
        """The person the signature speaks for."""
        return self.acting_for or self.identity.person

    @property
    def role(self) -> str:
        """The role the signature acts in: the key's, or for a service key the role it
        attests for the person it acts for."""
        if self.identity.role == "service" and self.acting_for is not None:
            return self.acting_role or "service"
        return self.identity.role

    def acting_as(self, person: str, role: str | None = None) -> Signer:
        """This service key acting for ``person`` in ``role`` (default: the role its
        ``attests_for`` gives that person).

        Raises:
            UnauthorizedError: the key is not a service key, or was not enrolled to attest
                for ``person`` in that role.
        """
        if self.identity.role != "service":
            raise UnauthorizedError(
                f"key {self.identity.name} ({self.identity.fingerprint}) is a "
                f"{self.identity.role} key; only a service key signs for another person."
            )
        check_name(person, what="person")
        chosen = role or self.identity.attested_role(person)
        if chosen is None or not self.identity.may_attest(person, chosen):
            raise UnauthorizedError(
                f"service key {self.identity.name} was not enrolled to attest for person "
                f"{person!r}" + (f" as a {role}" if role else "") + " (it attests for: "
                f"{', '.join(self.identity.attests_for) or 'nobody'})."
            )
        return replace(self, acting_for=person, acting_role=chosen)

    def block(self) -> dict[str, Any]:
        """The ``signer`` block of a record: name, role, fingerprint, person, acting_for."""
        return {"name": self.identity.name, "role": self.role,
                "key_role": self.identity.role, "fingerprint": self.identity.fingerprint,
                "person": self.person, "acting_for": self.acting_for}

    def sign(self, message: bytes) -> str:
        """Base64 Ed25519 signature over ``message`` (see :func:`keys.sign`)."""
        return keys.sign(self.key, message)


def role_allows(role: str, action: str) -> bool:
    """Whether ``role`` may take ``action`` (see :data:`ACTION_ROLES`)."""
    return role in ACTION_ROLES.get(action, ())
