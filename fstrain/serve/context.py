"""What every request of the web application shares: its settings, the project, the users,
the server's state, the service key and the templates."""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from fstrain.kernel.errors import ConfigError
from fstrain.serve.access import Identity
from fstrain.serve.security import CookieSigner, is_loopback
from fstrain.serve.state import ServerState
from fstrain.serve.users import UserStore
from model_registry.audit import key_path, load_private_key

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ServeSettings:
    """How ``fstrain serve`` runs: the store root, where it listens and how it trusts a proxy."""

    root: Path
    host: str = "127.0.0.1"
    port: int = 8765
    trusted_header: str | None = None
    proxy: str | None = None
    backend: str = "local"
    key: Path | None = None

    def check(self) -> ServeSettings:
        """Refuse settings that would let anyone claim to be anyone."""
        if self.trusted_header is not None:
            if not self.trusted_header.strip() or not self.trusted_header.isascii():
                raise ConfigError(f"--trusted-header must name an HTTP header. Got "
                                  f"{self.trusted_header!r} instead.")
            if self.proxy is None and not is_loopback(self.host):
                raise ConfigError(
                    f"--trusted-header {self.trusted_header} believes a header anyone could "
                    f"send: bound to {self.host}, the server needs --proxy ADDRESS (the "
                    "single-sign-on proxy's address), or bind it to 127.0.0.1 behind a local proxy."
                )
        if self.proxy is not None:
            try:
                ipaddress.ip_address(self.proxy)
            except ValueError:
                raise ConfigError(f"--proxy must be the proxy's IP address (as the server sees "
                                  f"it connect). Got {self.proxy!r} instead.") from None
        if not 0 < self.port < 65536:
            raise ConfigError(f"--port must be 1-65535. Got {self.port} instead.")
        return self


class ServeContext:
    """What every request shares: settings, the project, users, server state, templates."""

    def __init__(self, settings: ServeSettings, project: Any) -> None:
        from jinja2 import Environment, FileSystemLoader

        self.settings = settings
        self.project = project
        self.users = UserStore(settings.root)
        self.service = service_signer(self.users, settings.key)
        self.state = ServerState(settings.root)
        self.signer = CookieSigner(self.state.secret)
        self.store_lock = threading.Lock()
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True,
                               trim_blocks=True, lstrip_blocks=True)
        self.env.filters["num"] = _number_text

    def render(self, request: Request, template: str, values: dict[str, Any], *,
               identity: Identity | None, status: int = 200) -> HTMLResponse:
        """A page from ``templates/`` (every value autoescaped)."""
        html = self.env.get_template(template).render(
            **values, identity=identity, path=request.url.path,
            mode="header" if self.settings.trusted_header else "password")
        return HTMLResponse(html, status_code=status)

    def read(self, fn: Callable[[], Any]) -> Any:
        """Run a store read (the embedded store's handles are not shared across threads)."""
        with self.store_lock:
            return fn()


def service_signer(users: UserStore, key: Path | None) -> Any:
    """The server's enrolled ``service`` key as a signer (``--key``, else ``$FSTRAIN_KEY``),
    or None in a store without a trust list (sign-offs are then unsigned, and say so).

    Raises:
        ConfigError: the store has a trust list and no key was given, or the key is not an
            enrolled, unrevoked ``service`` key.
    """
    trust = users.trust_store.load()
    users.users()  # a users log that does not verify stops the start, not the first login
    if trust is None:
        return None
    path = key_path(key)
    if path is None:
        raise ConfigError(
            "this store has a trust list, so the server signs sign-offs with its own service "
            "key: set FSTRAIN_KEY (or --key) to it. An owner makes one with `fstrain keys new "
            "web --role service --attests-for NAME:reviewer --out PATH`."
        )
    signer = trust.signer(load_private_key(path))
    if signer.identity.role != "service":
        raise ConfigError(
            f"key {signer.identity.name} ({signer.identity.fingerprint}) is a "
            f"{signer.identity.role} key; the server needs a service key (its records say "
            "'signed by the service key, acting for the signed-in person')."
        )
    return signer


def _number_text(value: Any, signed: bool = False) -> str:
    """A number for a table: 4 significant digits (``+`` on changes); text as it is."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:+.4g}" if signed else f"{value:.4g}"
