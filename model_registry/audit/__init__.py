"""Signed, chained, verifiable records of who did what to a model version.

Modules (each small, no cycles): :mod:`~model_registry.audit.keys` (Ed25519 keys in OpenSSH
form, fingerprints, signatures), :mod:`~model_registry.audit.identity` (:class:`Identity`,
:class:`Signer`, roles), :mod:`~model_registry.audit.records` (what a signature covers, sealing),
:mod:`~model_registry.audit.trust` (the trust list: signed log + allowed_signers view, the
pinned owner).
"""

from __future__ import annotations

from model_registry.audit.identity import ACTION_ROLES, ROLES, Identity, Signer, role_allows
from model_registry.audit.keys import (
    ENV_KEY,
    ENV_PASSPHRASE,
    fingerprint,
    generate_key,
    key_path,
    load_private_key,
    public_key_line,
)
from model_registry.audit.records import seal, sha256_hex, signed_message
from model_registry.audit.trust import (
    ENV_TRUSTED_OWNER,
    TRUST_DIR,
    TrustList,
    TrustReport,
    TrustStore,
    render_allowed_signers,
)

__all__ = [
    "ACTION_ROLES", "ENV_KEY", "ENV_PASSPHRASE", "ENV_TRUSTED_OWNER", "ROLES", "TRUST_DIR",
    "Identity", "Signer", "TrustList", "TrustReport", "TrustStore", "fingerprint",
    "generate_key", "key_path", "load_private_key", "public_key_line", "render_allowed_signers",
    "role_allows", "seal", "sha256_hex", "signed_message",
]
