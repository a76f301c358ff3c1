"""``fstrain serve`` (the web application) and ``fstrain users`` (its local users).

``users add|passwd`` read the password from standard input (twice, hidden, at a terminal;
one line from a pipe), never from an argument. In a store with a trust list, ``add`` and
``remove`` are signed by the owner's key (``FSTRAIN_KEY`` or ``--key``) and ``passwd`` by an
owner's key; without one they are recorded unsigned, as every other record there.
"""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from fstrain.cli.errors import guarded
from fstrain.cli.options import BackendOpt, DebugOpt, JsonOpt, RootOpt, existing_store, store_location
from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.errors import UnauthorizedError
from fstrain.kernel.store_root import resolve_root
from model_registry.audit import key_path, load_private_key

users_app = typer.Typer(help="Web users of `fstrain serve`: add, passwd, remove, list.",
                        no_args_is_help=True)

KeyOpt = Annotated[Path | None, typer.Option(
    "--key", help="Private key that signs (default $FSTRAIN_KEY): an owner's for users, the "
    "server's service key for serve.")]


def serve_command(
    root: RootOpt = None,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    trusted_header: Annotated[str | None, typer.Option(
        "--trusted-header", metavar="NAME",
        help="Believe the user named by this header of a single-sign-on proxy (off by default).")] = None,
    proxy: Annotated[str | None, typer.Option(
        "--proxy", metavar="ADDR",
        help="The proxy's IP address: its X-Forwarded-For/-Proto and header are believed.")] = None,
    key: KeyOpt = None,
    backend: BackendOpt = "local",
    debug: DebugOpt = False,
) -> None:
    """Serve the store and the model registry in a browser (pages read the store live; sign-off
    follows the command line's rules)."""
    from fstrain.serve import ServeSettings
    from fstrain.serve.server import serve

    settings = guarded(lambda: ServeSettings(
        root=_served_root(root, backend), host=host, port=port, trusted_header=trusted_header,
        proxy=proxy, backend=backend, key=key).check(), debug=debug)
    typer.echo(f"fstrain serve: http://{host}:{port}/ over {settings.root}", err=True)
    guarded(lambda: serve(settings), debug=debug)


def _served_root(root: Path | None, backend: str) -> Path:
    """The store ``serve`` shows: an existing one (serving never creates a store)."""
    return existing_store(root).path if backend == "local" else store_location(root).path


def _store(root: Path | None) -> Any:
    """The web users of an existing store (``users`` commands never create a store)."""
    from fstrain.serve.users import UserStore

    return UserStore(existing_store(root).path)


def _owner(store: Any, key: Path | None) -> Any:
    """The owner's signer in a store with a trust list, else None (unsigned records)."""
    trust = store.trust_store.load()
    if trust is None:
        return None
    path = key_path(key)
    if path is None:
        raise UnauthorizedError("this store has a trust list: changing its users needs the "
                                "owner's key; set FSTRAIN_KEY (or --key).")
    return trust.signer(load_private_key(path))


def read_password(user: str) -> str:
    """The new password from standard input: twice, hidden, at a terminal; else one line."""
    if sys.stdin is not None and sys.stdin.isatty():
        first = getpass.getpass(f"password for {user}: ")
        if getpass.getpass("again: ") != first:
            raise InvalidArgumentError(f"user '{user}': the two passwords differ.")
        return first
    line = sys.stdin.readline() if sys.stdin is not None else ""
    return line.rstrip("\r\n")


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(help="User name (the person's name, as on their keys).")],
    role: Annotated[str, typer.Option(help="viewer, data-scientist, reviewer or owner.")],
    root: RootOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Enrol a web user; the password comes from standard input (never an argument)."""
    from fstrain.serve.users import check_role, check_user_name

    def body() -> Any:
        check_user_name(name)
        check_role(role)
        store = _store(root)
        signer = _owner(store, key)
        return store.add(name, role, read_password(name), signer=signer), signer

    user, signer = guarded(body, debug=debug)
    _report(user.public(), f"added {user.name} ({user.role})", signer, as_json)


@users_app.command("passwd")
def users_passwd(
    name: Annotated[str, typer.Argument()],
    root: RootOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Set a user's password (from standard input) and end every session of theirs."""
    def body() -> Any:
        store = _store(root)
        signer = _owner(store, key)
        user = store.set_password(name, read_password(name), signer=signer)
        _revoke(root, name)
        return user, signer

    user, signer = guarded(body, debug=debug)
    _report(user.public(), f"password of {user.name} changed; their sessions ended", signer,
            as_json)


@users_app.command("remove")
def users_remove(
    name: Annotated[str, typer.Argument()],
    root: RootOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Remove a user and end every session of theirs."""
    def body() -> Any:
        store = _store(root)
        signer = _owner(store, key)
        store.remove(name, signer=signer)
        _revoke(root, name)
        return signer

    signer = guarded(body, debug=debug)
    _report({"name": name, "removed": True}, f"removed {name}", signer, as_json)


@users_app.command("list")
def users_list(root: RootOpt = None, as_json: JsonOpt = False, debug: DebugOpt = False) -> None:
    """Every web user with their role (never a hash)."""
    users = guarded(lambda: [u.public() for u in _store(root).list()], debug=debug)
    if as_json:
        typer.echo(json.dumps(users, indent=2))
        return
    for u in users:
        typer.echo(f"{u['name']}\t{u['role']}\tsince {u['created'][:19]}")
    if not users:
        typer.echo("no users (add one with: fstrain users add NAME --role ROLE)")


def _revoke(root: Path | None, name: str) -> None:
    from fstrain.serve.state import STATE_DIR, ServerState

    if (resolve_root(root) / STATE_DIR).is_dir():
        ServerState(resolve_root(root)).revoke_user(name)


def _report(payload: dict[str, Any], human: str, signer: Any, as_json: bool) -> None:
    signed = ("unsigned (this store has no trust list)" if signer is None
              else f"signed by {signer.identity.name} ({signer.identity.fingerprint})")
    if as_json:
        typer.echo(json.dumps({**payload, "signed_by": None if signer is None
                               else signer.identity.fingerprint}, indent=2))
    else:
        typer.echo(f"{human}; {signed}")
