"""HTTP hardening shared by every route: response headers, the proxy's view of the client, the
signed session cookie and CSRF checks.

Pages get a Content-Security-Policy without any script source (no JavaScript at all), are
never framed (``X-Frame-Options: DENY``) and never cached. The one exception is the route that
serves a version's recorded scorecard or model card: it is framed by the version page only
(``SAMEORIGIN``) and runs under ``sandbox`` with no script, no network and no form target, so
even a file that carried markup from a hostile model card cannot act.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

PAGE_CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; frame-src 'self'; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
EMBED_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; "
             "base-uri 'none'; frame-ancestors 'self'; sandbox")
SESSION_COOKIE = "fstrain_session"
LOGIN_COOKIE = "fstrain_login"
EMBED_PREFIX = "/embed/"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _headers(path: str) -> list[tuple[bytes, bytes]]:
    embed = path.startswith(EMBED_PREFIX)
    common = [
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"cache-control", b"no-store"),
        (b"pragma", b"no-cache"),
        (b"cross-origin-opener-policy", b"same-origin"),
        (b"cross-origin-resource-policy", b"same-origin"),
        (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), payment=()"),
    ]
    if embed:
        return common + [(b"content-security-policy", EMBED_CSP.encode()),
                         (b"x-frame-options", b"SAMEORIGIN")]
    return common + [(b"content-security-policy", PAGE_CSP.encode()),
                     (b"x-frame-options", b"DENY")]


class SecurityHeaders:
    """ASGI middleware: the hardening headers on every response (errors included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = _headers(str(scope.get("path", "")))
        names = {name for name, _ in extra}

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message["headers"] = kept + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is on the loopback interface."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ProxyView:
    """ASGI middleware: keeps the direct peer's address in ``scope["fstrain.peer"]`` and, only
    when that peer is the configured proxy, takes the client address and scheme from its
    ``X-Forwarded-For`` (last entry) and ``X-Forwarded-Proto``."""

    def __init__(self, app: ASGIApp, proxy: str | None) -> None:
        self.app = app
        self.proxy = proxy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            peer = (scope.get("client") or ("", 0))[0]
            scope["fstrain.peer"] = peer
            if self.proxy is not None and peer == self.proxy:
                headers = {k.lower(): v for k, v in scope.get("headers", [])}
                forwarded = headers.get(b"x-forwarded-for", b"").decode("latin-1")
                if forwarded.strip():
                    scope["client"] = (forwarded.split(",")[-1].strip(), 0)
                proto = headers.get(b"x-forwarded-proto", b"").decode("latin-1").strip()
                if proto in ("http", "https"):
                    scope["scheme"] = proto
        await self.app(scope, receive, send)


def same_token(expected: str, given: object) -> bool:
    """Constant-time comparison of a CSRF token (a missing or non-text token never matches)."""
    return isinstance(given, str) and bool(given) and hmac.compare_digest(expected, given)


class CookieSigner:
    """Signs session and login-form cookie values with the store's secret (``itsdangerous``)."""

    def __init__(self, secret: bytes) -> None:
        from itsdangerous import Signer

        self._session = Signer(secret, salt="fstrain.session")
        self._login = Signer(secret, salt="fstrain.login-form")

    def sign_session(self, session_id: str) -> str:
        """The cookie value for a session id."""
        return self._session.sign(session_id).decode()

    def session_id(self, cookie: str | None) -> str | None:
        """The session id in a cookie, or None when it is missing or its signature is wrong."""
        return self._unsign(self._session, cookie)

    def sign_login(self, token: str) -> str:
        """The cookie value binding the login form's CSRF token to this browser."""
        return self._login.sign(token).decode()

    def login_token(self, cookie: str | None) -> str | None:
        """The login form's token in a cookie, or None."""
        return self._unsign(self._login, cookie)

    @staticmethod
    def _unsign(signer: Any, cookie: str | None) -> str | None:
        from itsdangerous import BadSignature

        if not cookie:
            return None
        try:
            return str(signer.unsign(cookie).decode())
        except (BadSignature, UnicodeDecodeError):
            return None
