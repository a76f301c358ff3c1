"""The trust list of a store: which keys may sign, as whom, in which role, since when.

Two files under ``<store root>/trust/``:

* ``log.jsonl``: the append-only log of trust records, one canonical JSON record a line:
  ``enrol`` (a key, its name, person, role and, for a service key, the ``person:role`` entries
  it attests for) and ``revoke``. Each record is chained to the previous line (``prev``, the
  sha256 of its bytes) and signed. The first record enrols an ``owner`` key and is signed by
  that key; every later one is signed by an owner key enrolled (and not revoked) before it.
* ``allowed_signers``: the trust list in git's ``allowed_signers`` form (principal, options,
  ``ssh-ed25519 AAAA…``, comment), written from the log after every change. It is a view:
  :meth:`TrustStore.read` checks it against the log, so an edited line is reported.

Root of trust: a log can be rewritten wholesale with a new self-signed owner, so the owner's
fingerprint is pinned outside the store (``$FSTRAIN_TRUSTED_OWNER``); a log rooted at another
key is refused. Without a pin the rest is checked and the report says it is unpinned.

Limit: like any hash chain, the log cannot show that its newest lines were removed (a removed
revocation); compare :attr:`TrustList.head` with a head you noted.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fstrain.kernel.build_info import installed_version
from fstrain.kernel.canonical_json import canonical_bytes
from fstrain.kernel.errors import (
    InvalidArgumentError,
    NotFoundError,
    UnauthorizedError,
    VerificationError,
    did_you_mean,
    listing,
)
from fstrain.kernel.timeutil import utc_now_iso
from model_registry.audit import keys
from model_registry.audit.identity import (
    Identity,
    Signer,
    check_name,
    check_role,
    parse_attestation,
)
from model_registry.audit.records import seal, sha256_hex, signed_message

TRUST_DIR = "trust"
LOG_FILE = "log.jsonl"
ALLOWED_SIGNERS = "allowed_signers"
ENV_TRUSTED_OWNER = "FSTRAIN_TRUSTED_OWNER"
_HEADER = ("# fstrain trust list, written from the signed log (log.jsonl) by `fstrain keys`; "
           "an edit here is detected, not obeyed.\n")


@dataclass(frozen=True)
class TrustList:
    """The verified state of a trust log: every identity (revoked ones too) by fingerprint."""

    identities: dict[str, Identity]
    root: Identity
    head: str
    started: str
    records: int

    def identity(self, fingerprint: str) -> Identity | None:
        """The identity of a fingerprint, or None when the key was never enrolled."""
        return self.identities.get(fingerprint)

    def find(self, name_or_fingerprint: str) -> Identity:
        """An identity by key name or fingerprint.

        Raises:
            NotFoundError: no such key, naming the enrolled ones.
        """
        for identity in self.identities.values():
            if name_or_fingerprint in (identity.name, identity.fingerprint):
                return identity
        names = [i.name for i in self.identities.values()]
        raise NotFoundError(
            f"no key {name_or_fingerprint!r} in the trust list (keys: {listing(names)})."
            + did_you_mean(name_or_fingerprint, names)
        )

    def signer(self, key: Ed25519PrivateKey, *, when: str | None = None) -> Signer:
        """A :class:`Signer` for ``key``, which must be enrolled and not revoked.

        Raises:
            UnauthorizedError: the key is unknown to the trust list, or revoked.
        """
        fp = keys.fingerprint(key)
        identity = self.identities.get(fp)
        if identity is None:
            raise UnauthorizedError(
                f"key {fp} is not enrolled in this store's trust list; an owner enrols it with "
                "`fstrain keys add NAME --role ROLE --public-key KEY.pub`."
            )
        if identity.revoked is not None and (when or utc_now_iso()) >= identity.revoked:
            raise UnauthorizedError(
                f"key {identity.name} ({fp}) was revoked at {identity.revoked}"
                + (f" ({identity.revoke_reason})" if identity.revoke_reason else "")
                + "; it signs nothing any more."
            )
        return Signer(key, identity)

    def persons(self) -> dict[str, set[str]]:
        """Person → the roles of their active keys."""
        out: dict[str, set[str]] = {}
        for identity in self.identities.values():
            if identity.revoked is None:
                out.setdefault(identity.person, set()).add(identity.role)
        return out

    def active_owners(self) -> list[Identity]:
        """The owner keys that are not revoked."""
        return [i for i in self.identities.values() if i.role == "owner" and i.revoked is None]

    def check_seal(self, record: dict[str, Any], *, where: str) -> list[str]:
        """Problems with a record's signature, one line each (empty: validly signed, or an
        unsigned record written before this trust list began)."""
        signature, block = record.get("signature"), record.get("signer")
        created = str(record.get("created") or "")
        if signature is None:
            if created and created < self.started:
                return []
            return [f"{where}: unsigned, in a store whose trust list began {self.started}"]
        fp = str((block or {}).get("fingerprint") or "")
        identity = self.identities.get(fp)
        if identity is None:
            return [f"{where}: signed by an unknown key {fp or '(none named)'}"]
        if not keys.signature_valid(identity.public_key, signed_message(record), str(signature)):
            return [f"{where}: forged (the signature of key {identity.name} does not match "
                    "the record)"]
        problems = _block_problems(dict(block or {}), identity, where)
        if identity.revoked is not None and created >= identity.revoked:
            problems.append(f"{where}: signed by the revoked key {identity.name} ({fp}, revoked "
                            f"{identity.revoked})")
        elif identity.enrolled is not None and created < identity.enrolled:
            problems.append(f"{where}: dated before its key {identity.name} was enrolled")
        return problems


def _block_problems(block: dict[str, Any], identity: Identity, where: str) -> list[str]:
    acting = block.get("acting_for")
    person = acting if acting is not None else identity.person
    role = block.get("role") if acting is not None else identity.role
    if acting is not None and identity.role != "service":
        return [f"{where}: key {identity.name} is not a service key but acts for {acting!r}"]
    if acting is not None and not identity.may_attest(str(acting), str(role)):
        return [f"{where}: service key {identity.name} was not enrolled to attest for "
                f"{acting!r} as a {role}"]
    expected = {"name": identity.name, "key_role": identity.role, "person": person, "role": role}
    wrong = [k for k, v in expected.items() if block.get(k) != v]
    return [f"{where}: its signer block does not match the trust list ({', '.join(wrong)})"
            ] if wrong else []


@dataclass
class TrustReport:
    """What reading a trust log found: the state (None without a trust list), problems, notes."""

    trust: TrustList | None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pinned: str | None = None


class TrustStore:
    """The trust list files under ``directory`` (``<store root>/trust``)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.log_path = self.directory / LOG_FILE
        self.signers_path = self.directory / ALLOWED_SIGNERS

    def __repr__(self) -> str:
        return f"TrustStore('{self.directory}')"

    def exists(self) -> bool:
        """Whether this store has a trust list (either file; one without the other is broken)."""
        return self.log_path.exists() or self.signers_path.exists()

    def read(self, *, pin: str | None = None) -> TrustReport:
        """Replay and check the log and the allowed_signers file against each other and the
        pinned owner (``pin``, default ``$FSTRAIN_TRUSTED_OWNER``)."""
        pin = pin if pin is not None else (os.environ.get(ENV_TRUSTED_OWNER) or None)
        if not self.exists():
            return TrustReport(None, pinned=pin)
        if not self.log_path.is_file():
            return TrustReport(None, [f"{TRUST_DIR}/{LOG_FILE}: missing (the trust list has no "
                                      "signed log behind it)"], pinned=pin)
        report = _replay(self.log_path.read_bytes().split(b"\n"))
        report.pinned = pin
        if report.trust is not None:
            _check_pin(report, pin)
            _check_view(report, self.signers_path)
        return report

    def load(self) -> TrustList | None:
        """The verified trust list, or None when the store has none.

        Raises:
            VerificationError: the log, the allowed_signers file or the pin does not verify.
        """
        report = self.read()
        if report.problems:
            raise VerificationError(
                f"the trust list at {self.directory} does not verify: "
                + "; ".join(report.problems), report.problems)
        return report.trust

    # ------------------------------------------------------------------ changes

    def enrol(self, key: Ed25519PrivateKey, *, name: str, role: str, public_key: str,
              person: str | None = None, attests_for: Sequence[str] = ()) -> Identity:
        """Enrol ``public_key`` as ``name`` (of ``person``, default ``name``) in ``role``,
        signed by ``key``: the new key itself for a store's first key (which must be an
        owner), else an enrolled owner's key. Returns the enrolled identity.

        Raises:
            UnauthorizedError: ``key`` may not enrol (not an owner, unknown, revoked; or a
                first key that is not an owner or not self-signed).
            InvalidArgumentError: a bad name, role, key or attestation, or a name or key that
                is enrolled already.
        """
        line = keys.canonical_public_line(public_key)
        identity = Identity(
            name=check_name(name, what="key name"),
            person=check_name(person or name, what="person"), role=check_role(role),
            fingerprint=keys.fingerprint(line), public_key=line,
            attests_for=tuple(f"{p}:{r}" for p, r in map(parse_attestation, attests_for)))
        if identity.attests_for and role != "service":
            raise InvalidArgumentError(f"--attests-for is for service keys; {name} is a {role}.")
        with self._locked() as trust:
            signer = self._enrolling_signer(trust, key, identity)
            if trust is not None:
                _refuse_duplicate(trust, identity)
            self._append(trust, {"kind": "enrol", "identity": identity.to_dict()}, signer)
        return identity

    def revoke(self, key: Ed25519PrivateKey, target: str, *, reason: str) -> Identity:
        """Revoke the key named ``target`` (name or fingerprint), signed by an owner's ``key``.

        Raises:
            UnauthorizedError: ``key`` is not an active owner; or ``target`` is the last
                active owner (the store could never change its trust list again).
            NotFoundError: no such key.
        """
        if not reason or not reason.strip():
            raise InvalidArgumentError("revoking a key needs a reason (--reason).")
        with self._locked() as trust:
            if trust is None:
                raise NotFoundError(f"no trust list at {self.directory}: nothing to revoke.")
            signer = _owner_signer(trust, key)
            victim = trust.find(target)
            if victim.revoked is not None:
                raise InvalidArgumentError(f"key {victim.name} was revoked at {victim.revoked}.")
            if victim.role == "owner" and len(trust.active_owners()) == 1:
                raise UnauthorizedError(
                    f"key {victim.name} is the store's last active owner; enrol another owner "
                    "before revoking it."
                )
            created = self._append(trust, {"kind": "revoke", "fingerprint": victim.fingerprint,
                                           "name": victim.name, "reason": reason.strip()}, signer)
        return replace(victim, revoked=created, revoke_reason=reason.strip())

    def _enrolling_signer(self, trust: TrustList | None, key: Ed25519PrivateKey,
                          identity: Identity) -> Signer:
        if trust is not None:
            return _owner_signer(trust, key)
        if identity.role != "owner":
            raise UnauthorizedError(
                f"a store's first key must be an owner (it enrols the others); {identity.name} "
                f"is a {identity.role}. Make the owner key first: fstrain keys new NAME --role "
                "owner --out PATH."
            )
        if keys.fingerprint(key) != identity.fingerprint:
            raise UnauthorizedError(
                f"the first owner key {identity.name} must sign its own enrolment: set "
                f"{keys.ENV_KEY} (or --key) to its private key."
            )
        return Signer(key, identity)

    def _append(self, trust: TrustList | None, body: dict[str, Any], signer: Signer) -> str:
        created = utc_now_iso()
        record = seal({"seq": 1 if trust is None else trust.records + 1, "created": created,
                       "prev": None if trust is None else trust.head,
                       "fstrain_version": installed_version(), **body}, signer)
        with open(self.log_path, "ab") as fh:
            fh.write(canonical_bytes(record) + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        report = _replay(self.log_path.read_bytes().split(b"\n"))
        assert report.trust is not None and not report.problems, report.problems
        _write_view(self.signers_path, report.trust)
        return created

    @contextmanager
    def _locked(self) -> Iterator[TrustList | None]:
        """The trust list under an exclusive lock (refused when it does not verify)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield self.load()
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _owner_signer(trust: TrustList, key: Ed25519PrivateKey) -> Signer:
    signer = trust.signer(key)
    if signer.identity.role != "owner":
        raise UnauthorizedError(
            f"only an owner key enrols or revokes keys; {signer.identity.name} "
            f"({signer.identity.fingerprint}) is a {signer.identity.role}."
        )
    return signer


def _refuse_duplicate(trust: TrustList, identity: Identity) -> None:
    for known in trust.identities.values():
        if known.fingerprint == identity.fingerprint:
            raise InvalidArgumentError(
                f"key {identity.fingerprint} is enrolled already, as {known.name}"
                + (" (revoked)" if known.revoked else "") + "; a key is enrolled once."
            )
        if known.name == identity.name:
            raise InvalidArgumentError(
                f"a key named {identity.name} is enrolled already ({known.fingerprint}); "
                "choose another name."
            )


# ---------------------------------------------------------------------- replaying the log


def _replay(lines: list[bytes]) -> TrustReport:
    """Check every record of the log in order; the state of the good prefix and the problems."""
    if lines and lines[-1] == b"":
        lines = lines[:-1]
    where = f"{TRUST_DIR}/{LOG_FILE}"
    if not lines:
        return TrustReport(None, [f"{where}: empty (no owner enrolled)"])
    identities: dict[str, Identity] = {}
    prev: str | None = None
    last_created = ""
    problems: list[str] = []
    for number, raw in enumerate(lines, start=1):
        here = f"{where} line {number}"
        problem = _replay_one(raw, number, prev, last_created, identities, here)
        if problem:
            problems.append(problem)
            break  # the chain is broken: nothing after it can be trusted
        record = json.loads(raw)
        prev, last_created = sha256_hex(raw), str(record["created"])
    root = next(iter(identities.values()), None)
    if root is None:
        return TrustReport(None, problems)
    first = json.loads(lines[0])
    return TrustReport(TrustList(identities, root, prev or "", str(first["created"]),
                                 len(lines) if not problems else 0), problems)


def _replay_one(raw: bytes, number: int, prev: str | None, last_created: str,
                identities: dict[str, Identity], here: str) -> str | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return f"{here}: not a JSON record (edited)"
    if not isinstance(record, dict) or canonical_bytes(record) != raw:
        return f"{here}: not in canonical form (edited)"
    if record.get("seq") != number or record.get("prev") != prev:
        return f"{here}: out of order (its seq or prev does not follow line {number - 1})"
    if str(record.get("created") or "") < last_created:
        return f"{here}: out of order (dated before the line above it)"
    try:
        signer = _record_signer(record, number, identities)
    except (InvalidArgumentError, KeyError, TypeError) as exc:
        return f"{here}: {exc}"
    if signer is None or isinstance(signer, str):
        return f"{here}: {signer or 'signed by an unknown key'}"
    if not keys.signature_valid(signer.public_key, signed_message(record),
                                str(record.get("signature") or "")):
        return f"{here}: forged (the signature of {signer.name} does not match)"
    return _apply(record, identities, here)


def _record_signer(record: dict[str, Any], number: int,
                   identities: dict[str, Identity]) -> Identity | str | None:
    fp = str((record.get("signer") or {}).get("fingerprint") or "")
    if number == 1:
        if record.get("kind") != "enrol":
            return "the first record must enrol the owner"
        first = Identity.from_dict(record["identity"])
        if first.role != "owner" or first.fingerprint != fp:
            return "the first record must enrol an owner key, signed by that key"
        return first
    signer = identities.get(fp)
    if signer is None:
        return None
    created = str(record.get("created"))
    if signer.role != "owner":
        return f"signed by {signer.name}, a {signer.role} key (only owners change the trust list)"
    if signer.revoked is not None and created >= signer.revoked:
        return f"signed by the revoked key {signer.name} ({signer.fingerprint})"
    return signer


def _apply(record: dict[str, Any], identities: dict[str, Identity], here: str) -> str | None:
    created = str(record["created"])
    if record.get("kind") == "enrol":
        identity = replace(Identity.from_dict(record["identity"]), enrolled=created)
        if identity.fingerprint in identities or any(
                i.name == identity.name for i in identities.values()):
            return f"{here}: enrols {identity.name} ({identity.fingerprint}) a second time"
        identities[identity.fingerprint] = identity
        return None
    if record.get("kind") == "revoke":
        victim = identities.get(str(record.get("fingerprint")))
        if victim is None or victim.revoked is not None:
            return f"{here}: revokes a key that is not enrolled and active"
        identities[victim.fingerprint] = replace(victim, revoked=created,
                                                 revoke_reason=record.get("reason"))
        return None
    return f"{here}: unknown record kind {record.get('kind')!r}"


def _check_pin(report: TrustReport, pin: str | None) -> None:
    assert report.trust is not None
    root = report.trust.root
    if pin is None:
        report.notes.append(
            f"warning: no owner pinned ({ENV_TRUSTED_OWNER} unset); the trust list is rooted at "
            f"{root.name} ({root.fingerprint}), which nothing outside the store confirms"
        )
    elif pin.strip() != root.fingerprint:
        report.problems.append(
            f"{TRUST_DIR}/{LOG_FILE}: rooted at owner {root.name} ({root.fingerprint}), not at "
            f"the pinned owner {pin.strip()} ({ENV_TRUSTED_OWNER}); refusing it"
        )
    else:
        report.notes.append(f"trusted owner: {root.name} ({root.fingerprint}), pinned by "
                            f"{ENV_TRUSTED_OWNER}")


# ---------------------------------------------------------------------- the allowed_signers view


def _stamp(iso: str) -> str:
    """ISO 8601 UTC → ``YYYYMMDDHHMMSSZ`` (the allowed_signers time form)."""
    digits = "".join(ch for ch in iso[:19] if ch.isdigit())
    return digits + "Z"


def render_allowed_signers(trust: TrustList) -> str:
    """The allowed_signers text of a trust list: one line per key, revoked keys with
    ``valid-before`` (so signatures older than the revocation still verify)."""
    lines = [_HEADER]
    for identity in trust.identities.values():
        options = [f'role="{identity.role}"', f'person="{identity.person}"']
        if identity.attests_for:
            options.append(f'attests-for="{"|".join(identity.attests_for)}"')
        if identity.enrolled:
            options.append(f'valid-after="{_stamp(identity.enrolled)}"')
        if identity.revoked:
            options.append(f'valid-before="{_stamp(identity.revoked)}"')
        comment = identity.fingerprint + (" revoked" if identity.revoked else "")
        lines.append(f"{identity.name} {','.join(options)} {identity.public_key} {comment}\n")
    return "".join(lines)


def _write_view(path: Path, trust: TrustList) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(render_allowed_signers(trust), encoding="utf-8")
    os.replace(tmp, path)


def _check_view(report: TrustReport, path: Path) -> None:
    assert report.trust is not None
    where = f"{TRUST_DIR}/{ALLOWED_SIGNERS}"
    if not path.is_file():
        report.problems.append(f"{where}: missing (the signed log has {report.trust.records} "
                               "records)")
        return
    expected = render_allowed_signers(report.trust).splitlines()
    actual = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(actual, start=1):
        if line not in expected:
            report.problems.append(f"{where} line {number}: edited (not what the signed log "
                                   f"says): {line[:60]}")
    for line in expected:
        if line not in actual:
            report.problems.append(f"{where}: a key of the signed log is missing: {line[:60]}")
