"""Signed, chained records: what a record's signature covers and how a record is sealed.

A record (a history event of a model version, or a trust-list change) is a JSON object. Its
signature covers the canonical JSON (:func:`fstrain.kernel.canonical_json.canonical_bytes`) of
every field but ``signature`` itself, among them:

* ``prev``: the sha256 of the previous record's stored bytes (None for the first), so a
  removed, reordered or edited earlier record breaks the chain;
* the sha256 of every file the record covers (``files``: the event's own files;
  ``artefacts``: the version's files outside ``history/`` when it was written);
* ``created``, the code version and the ``signer`` block (name, role, fingerprint, person and
  the person a service key acts for).

A record written without a key (a store without a trust list) carries ``"signer": null`` and
``"signature": null``: it is chained and hashed, but unsigned.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from fstrain.kernel.canonical_json import canonical_bytes
from model_registry.audit.identity import Signer

HISTORY_PREFIX = "history/"


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of bytes (how records name files and other records)."""
    return hashlib.sha256(data).hexdigest()


def signed_message(record: Mapping[str, Any]) -> bytes:
    """The bytes a record's signature covers: its canonical JSON without ``signature``."""
    return canonical_bytes({k: v for k, v in record.items() if k != "signature"})


def seal(record: Mapping[str, Any], signer: Signer | None) -> dict[str, Any]:
    """``record`` with its ``signer`` block and ``signature`` (both None without a signer)."""
    body = {k: v for k, v in record.items() if k != "signature"}
    body["signer"] = None if signer is None else signer.block()
    return {**body, "signature": None if signer is None else signer.sign(signed_message(body))}


def artefact_evidence(manifest: Mapping[str, Any]) -> dict[str, str]:
    """``path → sha256`` of every file of a version outside ``history/`` (model files, input
    example, schema, attachments): what a history record vouches for besides its own files."""
    return {str(e["path"]): str(e["sha256"]) for e in manifest.get("files", [])
            if not str(e["path"]).startswith(HISTORY_PREFIX)}


def immutable_artefacts(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The artefacts that can never change while the version exists (not attachments)."""
    return {str(e["path"]): str(e["sha256"]) for e in manifest.get("files", [])
            if not str(e["path"]).startswith(HISTORY_PREFIX) and e.get("kind") != "attachment"}
