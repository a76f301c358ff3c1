"""``fstrain keys``: make, enrol, list and revoke the signing keys of a store (``keys_app``).

A store's first key is an ``owner``, enrolled by itself (``keys new NAME --role owner``
prints the fingerprint to pin as ``FSTRAIN_TRUSTED_OWNER``); after that only an owner's key
(``--key`` or ``$FSTRAIN_KEY``) enrols or revokes. ``keys add`` enrols an existing OpenSSH
Ed25519 public key (one ``ssh-keygen -t ed25519`` made). The trust list lives in
``<root>/trust/`` (see :mod:`model_registry.audit.trust`); with ``--backend hopsworks`` in the
project itself (:mod:`model_registry.hopsworks.trust`), so every client and job shares it.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

import feature_store
from fstrain.cli.errors import fail
from fstrain.cli.options import BackendOpt, JsonOpt, RootOpt, existing_store, store_location
from fstrain.kernel.errors import FeatureStoreError
from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.errors import UnauthorizedError
from model_registry.audit import keys
from model_registry.audit.keys import ENV_PASSPHRASE
from model_registry.audit.trust import TRUST_DIR, TrustStore

keys_app = typer.Typer(
    help="Signing keys of the store: new, add (an existing ssh-keygen key), list, revoke.",
    no_args_is_help=True,
)

RoleOpt = Annotated[str, typer.Option(
    "--role", help="data-scientist, validator, reviewer, owner or service.")]
PersonOpt = Annotated[str | None, typer.Option(
    "--person", help="The person the key belongs to (default NAME); four eyes compares persons.")]
AttestsOpt = Annotated[list[str] | None, typer.Option(
    "--attests-for", help="A service key: PERSON:ROLE it may sign for (*:ROLE for any person); "
    "repeatable.")]
KeyOpt = Annotated[Path | None, typer.Option(
    "--key", help="An owner's private key that signs the change (default $FSTRAIN_KEY); not "
    "needed for a store's first key.")]


def _store(root: Path | None, backend: str = "local", *, create: bool = False) -> Any:
    """The trust list of the store: ``<root>/trust``, or on Hopsworks the project's own
    (``Resources/fstrain/trust``, through the SDK; login from the environment). Only
    ``keys new`` and ``keys add`` (which may enrol a store's first key) pass ``create``: the
    other commands refuse a root that holds no store."""
    if backend != "local":
        return feature_store.login(backend=backend).get_model_registry().trust_store
    location = store_location(root) if create else existing_store(root)
    return TrustStore(location.path / TRUST_DIR)


def _owner_key(store: Any, key: Path | None) -> Any:
    """The private key that signs a change: the owner's (``--key``/``$FSTRAIN_KEY``)."""
    path = keys.key_path(key)
    if path is None:
        raise UnauthorizedError(
            f"this store has a trust list ({store.directory}); enrolling or revoking a key is "
            f"signed by an owner: set {keys.ENV_KEY} (or --key) to an owner's private key."
        )
    return keys.load_private_key(path)


def _new_passphrase(protect: bool) -> str | None:
    if not protect:
        return None
    if not sys.stdin.isatty():
        secret = os.environ.get(ENV_PASSPHRASE)
        if not secret:
            raise InvalidArgumentError(f"--protect without a terminal reads the passphrase from "
                                       f"{ENV_PASSPHRASE}, which is not set.")
        return secret
    first = getpass.getpass("Passphrase for the new key: ")
    if not first or first != getpass.getpass("Same passphrase again: "):
        raise InvalidArgumentError("the two passphrases differ (or are empty); no key was made.")
    return first


@keys_app.command("new")
def new_command(
    name: Annotated[str, typer.Argument(help="The key's name (its allowed_signers principal).")],
    role: RoleOpt,
    out: Annotated[Path, typer.Option("--out", help="Where to write the private key (PATH and "
                                                    "PATH.pub; never overwritten).")],
    person: PersonOpt = None,
    attests_for: AttestsOpt = None,
    protect: Annotated[bool, typer.Option(
        "--protect", help="Encrypt the private key with a passphrase (asked for, or "
        "$FSTRAIN_KEY_PASSPHRASE without a terminal).")] = False,
    key: KeyOpt = None,
    root: RootOpt = None,
    backend: BackendOpt = "local",
    as_json: JsonOpt = False,
) -> None:
    """Make an Ed25519 key (OpenSSH format) and enrol it in the store's trust list."""
    try:
        store = _store(root, backend, create=True)
        signer_key = _owner_key(store, key) if store.exists() else None
        secret = _new_passphrase(protect)
        line = keys.generate_key(out, comment=name, passphrase=secret)
        try:
            identity = store.enrol(signer_key or keys.load_private_key(out, passphrase=secret),
                                   name=name, role=role, public_key=line, person=person,
                                   attests_for=attests_for or ())
        except BaseException:
            Path(out).unlink(missing_ok=True)
            Path(f"{out}.pub").unlink(missing_ok=True)
            raise
    except FeatureStoreError as exc:
        _fail(exc)
    _report(identity, store, as_json, private=Path(out))


@keys_app.command("add")
def add_command(
    name: Annotated[str, typer.Argument(help="The key's name (its allowed_signers principal).")],
    role: RoleOpt,
    public_key: Annotated[Path, typer.Option(
        "--public-key", help="The OpenSSH public key file (id_ed25519.pub).")],
    person: PersonOpt = None,
    attests_for: AttestsOpt = None,
    key: KeyOpt = None,
    root: RootOpt = None,
    backend: BackendOpt = "local",
    as_json: JsonOpt = False,
) -> None:
    """Enrol an existing Ed25519 public key (e.g. one ``ssh-keygen -t ed25519`` made); a store's
    first key signs its own enrolment with --key/$FSTRAIN_KEY."""
    try:
        store = _store(root, backend, create=True)
        try:
            line = public_key.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidArgumentError(f"--public-key {public_key} cannot be read "
                                       f"({exc.strerror or exc}).") from None
        path = keys.key_path(key)
        signing = _owner_key(store, None) if path is None else keys.load_private_key(path)
        identity = store.enrol(signing, name=name, role=role,
                               public_key=line, person=person, attests_for=attests_for or ())
    except FeatureStoreError as exc:
        _fail(exc)
    _report(identity, store, as_json, private=None)


def _where(store: Any) -> str:
    """Where the trust list lives (a Hopsworks project's folder, else the local file)."""
    return str(getattr(store, "location", None) or store.signers_path)


def _report(identity: Any, store: Any, as_json: bool, *, private: Path | None) -> None:
    if as_json:
        typer.echo(json.dumps({**identity.to_dict(), "trust_list": _where(store)}, indent=2))
        return
    typer.echo(f"enrolled {identity.name} (person {identity.person}, role {identity.role}) "
               f"{identity.fingerprint} in {_where(store)}")
    if private is not None:
        typer.echo(f"private key {private} (keep it secret), public key {private}.pub")
    if identity.role == "owner":
        typer.echo(f"pin this owner outside the store: export "
                   f"FSTRAIN_TRUSTED_OWNER={identity.fingerprint}")


@keys_app.command("list")
def list_command(root: RootOpt = None, backend: BackendOpt = "local",
                 as_json: JsonOpt = False) -> None:
    """List the enrolled keys (revoked ones too) and which owner roots the trust list."""
    try:
        store = _store(root, backend)
        report = store.read()
        trust = store.load()
    except FeatureStoreError as exc:
        _fail(exc)
    identities = [] if trust is None else list(trust.identities.values())
    if as_json:
        typer.echo(json.dumps([{**i.to_dict(), "enrolled": i.enrolled, "revoked": i.revoked,
                                "revoke_reason": i.revoke_reason} for i in identities],
                              indent=2))
        return
    if trust is None:
        typer.echo("no trust list: this store is unsigned (fstrain keys new NAME --role owner "
                   "--out PATH starts one)")
        return
    for note in report.notes:
        typer.echo(note)
    for i in identities:
        state = f"revoked {i.revoked[:19]} ({i.revoke_reason})" if i.revoked else "active"
        extra = f" attests for {', '.join(i.attests_for)}" if i.attests_for else ""
        typer.echo(f"{i.name:<16} {i.person:<12} {i.role:<15} {i.fingerprint}  {state}{extra}")


@keys_app.command("revoke")
def revoke_command(
    target: Annotated[str, typer.Argument(metavar="NAME|FINGERPRINT")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded, signed).")],
    key: KeyOpt = None,
    root: RootOpt = None,
    backend: BackendOpt = "local",
    as_json: JsonOpt = False,
) -> None:
    """Revoke a key: it signs nothing from now on (its earlier records still verify)."""
    try:
        store = _store(root, backend)
        identity = store.revoke(_owner_key(store, key), target, reason=reason)
    except FeatureStoreError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps({**identity.to_dict(), "revoked": identity.revoked}, indent=2))
        return
    typer.echo(f"revoked {identity.name} ({identity.fingerprint}) at {identity.revoked}")


def _fail(exc: Exception) -> Any:
    fail(exc)
