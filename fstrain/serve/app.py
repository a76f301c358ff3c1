"""The ASGI application: settings, the shared context, the routes and the guard on each.

:func:`create_app` builds a Starlette application over one project (the composition root
picks the backend). Every route but ``/login`` and the stylesheet needs a session; each route
names the permission it needs and whether it takes a form (then a CSRF token is checked before
anything else is read). Errors become a page with one line; nothing is written on a refused
request.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from fstrain.kernel.errors import (
    ConfigError,
    FeatureStoreError,
    NotFoundError,
    VerificationError,
)
from fstrain.serve.auth import Auth, Identity, Refused
from fstrain.serve.security import CookieSigner, ProxyView, SecurityHeaders, is_loopback, same_token
from fstrain.serve.state import ServerState
from fstrain.serve.users import UserStore

HERE = Path(__file__).resolve().parent
MAX_FORM_BYTES = 64 * 1024

Handler = Callable[..., Awaitable[Response] | Response]


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
            import ipaddress

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
        self.auth = Auth(self)

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
    from model_registry.audit import key_path, load_private_key

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


def guard(ctx: ServeContext, handler: Handler, *, permission: str = "read",
          form: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """Wrap ``handler(request, identity[, form])``: a session (else /login), the role's
    permission (else 403), and for a form its CSRF token (else 403) before the handler runs."""
    import inspect

    async def endpoint(request: Request) -> Response:
        try:
            identity = ctx.auth.identify(request)
            if identity is None:
                if request.method == "GET":
                    return RedirectResponse("/login", status_code=303)
                raise Refused(401, "sign in first.")
            if not identity.may(permission):
                raise Refused(403, f"{identity.user.name} ({identity.user.role}) may not do this.")
            args: list[Any] = [request, identity]
            if form:
                args.append(await _checked_form(request, identity))
            if inspect.iscoroutinefunction(handler):
                response = await handler(*args)
            else:
                response = await run_in_threadpool(handler, *args)
        except Refused as exc:
            response = error_page(ctx, request, exc.status, exc.reason)
        except NotFoundError as exc:
            response = error_page(ctx, request, 404, str(exc))
        except VerificationError as exc:
            response = error_page(ctx, request, 503, str(exc))
        except FeatureStoreError as exc:
            response = error_page(ctx, request, 400, str(exc))
        return ctx.auth.finish(request, response)

    return endpoint


async def _checked_form(request: Request, identity: Identity) -> Any:
    length = request.headers.get("content-length")
    if length is None or not length.isdigit() or int(length) > MAX_FORM_BYTES:
        raise Refused(413, f"a form is at most {MAX_FORM_BYTES} bytes.")
    origin = request.headers.get("origin")
    if origin is not None and origin != "null" and origin.rstrip("/") != _own_origin(request):
        raise Refused(403, f"the form was posted from another site ({origin}).")
    data = await request.form(max_files=0, max_fields=32)
    if not same_token(identity.csrf, data.get("csrf")):
        raise Refused(403, "the form's CSRF token is missing or wrong; reload the page.")
    return data


def _own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


def error_page(ctx: ServeContext, request: Request, status: int, reason: str) -> Response:
    """One line saying why, with the status."""
    identity = None
    try:
        identity = ctx.auth.identify(request)
    except (Refused, FeatureStoreError):
        pass
    return ctx.render(request, "error.html", {"status": status, "reason": reason},
                      status=status, identity=identity)


def _routes(ctx: ServeContext) -> list[BaseRoute]:
    from fstrain.serve import pages, store_pages

    async def login_post(request: Request) -> Response:
        try:
            return await ctx.auth.login(request)
        except Refused as exc:
            return error_page(ctx, request, exc.status, exc.reason)
        except VerificationError as exc:
            return error_page(ctx, request, 503, str(exc))

    def g(handler: Handler, **kw: Any) -> Callable[[Request], Awaitable[Response]]:
        return guard(ctx, handler, **kw)

    return [
        Route("/", g(lambda r, i: RedirectResponse("/models", status_code=303))),
        Route("/login", lambda r: ctx.auth.login_page(r), methods=["GET"]),
        Route("/favicon.ico", lambda r: Response(status_code=204)),
        Route("/login", login_post, methods=["POST"]),
        Route("/logout", g(lambda r, i, f: ctx.auth.logout(i), form=True), methods=["POST"]),
        Route("/account", g(lambda r, i: ctx.render(
            r, "account.html", {"changed": r.query_params.get("changed")}, identity=i))),
        Route("/account/password", g(ctx.auth.change_password, form=True), methods=["POST"]),
        *pages.routes(ctx, g),
        *store_pages.routes(ctx, g),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


def create_app(settings: ServeSettings, project: Any | None = None, *,
               extra_routes: list[BaseRoute] | None = None) -> Any:
    """The web application over ``project`` (default: ``login()`` on ``settings``).

    ``extra_routes`` are served before the application's own, without its guard (the load
    benchmark's static file of a page's size, ``bench/serve_load.py``); the security headers
    still apply to them.
    """
    settings.check()
    if project is None:
        from fstrain.project import login

        project = (login(backend="local", root=settings.root) if settings.backend == "local"
                   else login(backend=settings.backend))
    ctx = ServeContext(settings, project)

    async def not_found(request: Request, exc: Exception) -> Response:
        try:
            signed_in = ctx.auth.identify(request) is not None
        except (Refused, FeatureStoreError):
            signed_in = False
        if not signed_in and request.method == "GET":
            return RedirectResponse("/login", status_code=303)
        return error_page(ctx, request, 404, "no such page.")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return error_page(ctx, request, 405, "method not allowed.")

    app = Starlette(routes=[*(extra_routes or []), *_routes(ctx)], exception_handlers={404: not_found, 405: not_allowed})
    app.state.ctx = ctx
    return SecurityHeaders(ProxyView(app, settings.proxy))
