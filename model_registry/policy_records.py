"""Records of a model's gate-policy files, backend-neutral: build, seal and check them.

A policy file (``fstrain registry policy set MODEL --file gates.yaml``) is stored as an
immutable version ``N`` of the model's policy: the file's bytes exactly as the owner wrote them
and a ``record.json`` naming the model, the version, who stored it and when, the file's sha256,
the policy's own hash (of what it decides, :mod:`validation.policy`), and ``prev``, the sha256
of the previous version's record (a chain: removing or reordering a version breaks it).

Records are sealed as every audit record is (:func:`model_registry.audit.records.seal`): a
``signer`` block and an Ed25519 ``signature`` over the rest. Only an ``owner`` key signs a
policy. A store without a trust list stores it unsigned (``"signer": null``), and every page
that shows it says so; once a trust list exists an unsigned policy written after it began, one
signed by a key that is not an active owner, or an edited one, does not verify. The registry
does not parse the gates (that is :mod:`validation.policy`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fstrain.kernel.errors import IntegrityError, UnauthorizedError, VerificationError
from model_registry.audit.identity import Signer, role_allows
from model_registry.audit.records import seal, sha256_hex
from model_registry.audit.trust import TrustList

POLICY_FILE = "policy.yaml"
RECORD_FILE = "record.json"
RECORD_KIND = "gate_policy"
ACTION = "policy"


def record_bytes(record: Mapping[str, Any]) -> bytes:
    """``record.json`` as stored (sorted, indented JSON)."""
    return (json.dumps(dict(record), indent=2, sort_keys=True) + "\n").encode()


def build_record(name: str, version: int, document: bytes, *, policy_sha256: str,
                 previous: bytes | None, created: str, user: str,
                 signer: Signer | None = None) -> dict[str, Any]:
    """The sealed record of policy version ``version`` of model ``name`` holding ``document``.

    Args:
        name: the model.
        version: 1 for the first policy file, then one more than the newest.
        document: the policy file's bytes.
        policy_sha256: the policy's hash (``PolicyDocument.sha256()``).
        previous: the newest stored version's ``record.json`` bytes (``None`` for version 1).
        created: ISO-8601 UTC time.
        user: the operating-system user (the signer block names the key and person).
        signer: an owner's signer; ``None`` stores it unsigned (a store without a trust list).

    Raises:
        UnauthorizedError: the signer's role may not sign a gate policy.
    """
    if (previous is None) != (version == 1):
        raise IntegrityError(f"policy of model '{name}': version {version} does not follow "
                             "the stored versions.")
    if signer is not None and not role_allows(signer.role, ACTION):
        raise UnauthorizedError(
            f"policy of model '{name}': only an owner key signs a gate policy; key "
            f"{signer.identity.name} ({signer.identity.fingerprint}) is a {signer.role}.")
    return seal({
        "kind": RECORD_KIND, "model": name, "version": version, "created": created,
        "user": user, "file": POLICY_FILE, "file_sha256": sha256_hex(document),
        "policy_sha256": policy_sha256,
        "prev": None if previous is None else sha256_hex(previous),
    }, signer)


def parse_stored(name: str, folder: str, raw: bytes | None,
                 document: bytes | None) -> dict[str, Any]:
    """The record of one stored version folder ``folder`` (``0003``), from its record and
    policy file bytes (``None``: the file is missing).

    Raises:
        IntegrityError: not a version folder, a missing file, a record that is not JSON or
            names another version (naming the folder).
    """
    where = f"policy of model '{name}' folder {folder}"
    if not folder.isdigit():
        raise IntegrityError(f"{where}: not a policy version (added outside fstrain).")
    for file, data in ((RECORD_FILE, raw), (POLICY_FILE, document)):
        if data is None:
            raise IntegrityError(f"{where}: {file} is missing.")
    try:
        record = json.loads(raw or b"")
    except ValueError:
        raise IntegrityError(f"{where}: {RECORD_FILE} is not valid JSON.") from None
    if not isinstance(record, dict) or record.get("version") != int(folder):
        raise IntegrityError(f"{where}: {RECORD_FILE} names another version.")
    return record


def check_chain(name: str, versions: Sequence[tuple[Mapping[str, Any], bytes, bytes]],
                trust: TrustList | None = None) -> None:
    """Check every stored policy version of ``name``, oldest first: ``(record, record file
    bytes, policy file bytes)`` each. The numbers run 1, 2, ...; each file matches its
    record's sha256; each record names the previous one's sha256; with a trust list, each
    record's seal verifies (:meth:`TrustList.check_seal`) and a signed one was signed by an
    owner.

    Raises:
        IntegrityError: an edited, missing or reordered version (naming its file).
        VerificationError: a seal that does not verify (unsigned after the trust list began,
            forged, unknown or revoked key, not an owner), one line per problem.
    """
    previous_raw: bytes | None = None
    problems: list[str] = []
    for expected, (record, raw, document) in enumerate(versions, start=1):
        where = f"policy of model '{name}' version {record.get('version')}"
        if record.get("kind") != RECORD_KIND or record.get("model") != name:
            raise IntegrityError(f"{where}: {RECORD_FILE} is not a policy record of this model.")
        if record.get("version") != expected:
            raise IntegrityError(f"{where}: out of order (expected version {expected}); a "
                                 "policy version was removed or renumbered.")
        if sha256_hex(document) != record.get("file_sha256"):
            raise IntegrityError(f"{where}: {POLICY_FILE} was edited (its sha256 no longer "
                                 f"matches {RECORD_FILE}).")
        if record.get("prev") != (None if previous_raw is None else sha256_hex(previous_raw)):
            raise IntegrityError(f"{where}: the chain is broken ({RECORD_FILE} does not name "
                                 "the previous version's record).")
        if trust is not None:
            problems += trust.check_seal(dict(record), where=f"{where} ({RECORD_FILE})")
            block = record.get("signer") or {}
            if record.get("signature") and not role_allows(str(block.get("role")), ACTION):
                problems.append(f"{where}: signed by {block.get('name')}, a {block.get('role')};"
                                " only an owner signs a gate policy")
        previous_raw = raw
    if problems:
        raise VerificationError("; ".join(problems), problems)
