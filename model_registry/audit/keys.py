"""Ed25519 keys in OpenSSH format: make one, load one (with its passphrase), fingerprint, sign.

Keys are what ``ssh-keygen -t ed25519`` writes, so an existing SSH key can serve as an
fstrain identity. Everything cryptographic is the ``cryptography`` library's; this module only
chooses the formats:

* a public key is its OpenSSH line without comment, ``ssh-ed25519 AAAA…``;
* a fingerprint is what ``ssh-keygen -lf`` prints: ``SHA256:`` and the unpadded base64 of the
  sha256 of the key blob (the base64 part of the public line);
* a signature is the base64 of the raw 64-byte Ed25519 signature over a domain-separated
  message (:func:`sign`), so a record signature can never be replayed as another kind of
  signature made with the same key.

The active key is ``--key PATH`` or ``$FSTRAIN_KEY``; its passphrase comes from
``$FSTRAIN_KEY_PASSPHRASE`` or, when fstrain runs in a terminal, a prompt.
"""

from __future__ import annotations

import base64
import binascii
import getpass
import hashlib
import os
import sys
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fstrain.kernel.errors import ConfigError, InvalidArgumentError

ENV_KEY = "FSTRAIN_KEY"
ENV_PASSPHRASE = "FSTRAIN_KEY_PASSPHRASE"
KEY_TYPE = "ssh-ed25519"
#: prefixed to every signed message (domain separation between fstrain and other uses).
SIGNATURE_DOMAIN = b"fstrain-signature-v1\n"


def public_key_line(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """``ssh-ed25519 AAAA…`` (OpenSSH public-key line, no comment)."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.OpenSSH,
                               serialization.PublicFormat.OpenSSH).decode("ascii")


def parse_public_key(text: str, *, what: str = "public key") -> Ed25519PublicKey:
    """An Ed25519 public key from an OpenSSH line (``ssh-ed25519 AAAA… [comment]``).

    Raises:
        InvalidArgumentError: not an OpenSSH Ed25519 public key (naming ``what``).
    """
    parts = text.strip().split()
    if len(parts) < 2 or parts[0] != KEY_TYPE:
        raise InvalidArgumentError(
            f"{what} must be an OpenSSH Ed25519 public key ('{KEY_TYPE} AAAA…'). "
            f"Got {text.strip()[:40]!r} instead."
        )
    try:
        key = serialization.load_ssh_public_key(f"{parts[0]} {parts[1]}".encode("ascii"))
    except (ValueError, UnsupportedAlgorithm, UnicodeEncodeError) as exc:
        raise InvalidArgumentError(f"{what} is not a valid OpenSSH key: {exc}.") from None
    if not isinstance(key, Ed25519PublicKey):  # pragma: no cover - the prefix was checked
        raise InvalidArgumentError(f"{what} must be an Ed25519 key.")
    return key


def canonical_public_line(text: str, *, what: str = "public key") -> str:
    """The public line of ``text`` re-encoded (drops a comment, checks the key)."""
    return public_key_line(parse_public_key(text, what=what))


def fingerprint(key: str | Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """``SHA256:…`` exactly as ``ssh-keygen -lf`` prints it for this key."""
    line = key if isinstance(key, str) else public_key_line(key)
    blob = base64.b64decode(canonical_public_line(line).split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def generate_key(path: str | os.PathLike[str], *, comment: str,
                 passphrase: str | None = None) -> str:
    """Write a new Ed25519 key: ``path`` (OpenSSH private key, mode 0600, encrypted when
    ``passphrase`` is given) and ``path.pub``; return the public line.

    Raises:
        InvalidArgumentError: ``path`` or ``path.pub`` exists already (never overwritten).
    """
    target = Path(path).expanduser()
    pub = target.with_name(target.name + ".pub")
    for existing in (target, pub):
        if existing.exists():
            raise InvalidArgumentError(
                f"key file {existing} exists already; keys are never overwritten. Choose "
                "another --out path."
            )
    key = Ed25519PrivateKey.generate()
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase.encode()) if passphrase
        else serialization.NoEncryption())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                encryption)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(private)
    line = public_key_line(key)
    pub.write_text(f"{line} {comment}\n", encoding="utf-8")
    return line


def key_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The active private key's path: ``explicit`` (``--key``), else ``$FSTRAIN_KEY``, else None."""
    chosen = explicit if explicit is not None else os.environ.get(ENV_KEY) or None
    return None if chosen is None else Path(chosen).expanduser()


def load_private_key(path: str | os.PathLike[str], *,
                     passphrase: str | None = None) -> Ed25519PrivateKey:
    """The Ed25519 private key in the OpenSSH file ``path``.

    A passphrase-protected key takes ``passphrase``, else ``$FSTRAIN_KEY_PASSPHRASE``, else a
    prompt when stdin is a terminal.

    Raises:
        ConfigError: the file is missing or unreadable, is not an OpenSSH Ed25519 private key,
            or its passphrase is missing or wrong.
    """
    source = Path(path).expanduser()
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"key {source} cannot be read ({exc.strerror or exc}); set --key or "
            f"{ENV_KEY} to an OpenSSH private key file."
        ) from None
    try:
        key = serialization.load_ssh_private_key(data, password=None)
    except TypeError:  # encrypted: needs the passphrase
        key = _load_encrypted(source, data, passphrase)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise ConfigError(f"key {source} is not an OpenSSH private key ({exc}).") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(
            f"key {source} is a {type(key).__name__.replace('PrivateKey', '')} key; fstrain "
            "identities are Ed25519 (ssh-keygen -t ed25519)."
        )
    return key


def _load_encrypted(source: Path, data: bytes, passphrase: str | None) -> Any:
    secret = passphrase if passphrase is not None else os.environ.get(ENV_PASSPHRASE)
    if secret is None and sys.stdin is not None and sys.stdin.isatty():
        secret = getpass.getpass(f"Passphrase for {source}: ")
    if not secret:
        raise ConfigError(
            f"key {source} is protected by a passphrase; set {ENV_PASSPHRASE} (or run in a "
            "terminal to be asked for it)."
        )
    try:
        return serialization.load_ssh_private_key(data, password=secret.encode())
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ConfigError(f"key {source}: the passphrase is wrong.") from None


def sign(key: Ed25519PrivateKey, message: bytes) -> str:
    """Base64 of the Ed25519 signature over :data:`SIGNATURE_DOMAIN` + ``message``."""
    return base64.b64encode(key.sign(SIGNATURE_DOMAIN + message)).decode("ascii")


def signature_valid(public_line: str, message: bytes, signature: str) -> bool:
    """Whether ``signature`` (from :func:`sign`) is the key's signature over ``message``."""
    try:
        raw = base64.b64decode(signature.encode("ascii"), validate=True)
        parse_public_key(public_line).verify(raw, SIGNATURE_DOMAIN + message)
    except (InvalidSignature, InvalidArgumentError, binascii.Error, ValueError,
            UnicodeEncodeError, AttributeError):
        return False
    return True
