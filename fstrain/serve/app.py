"""The ASGI application: the routes and the guard on each.

:func:`create_app` builds a Starlette application over one project (the composition root
picks the backend). Every route but ``/login`` and the stylesheet needs a session; each route
names the permission it needs and whether it takes a form (then a CSRF token is checked before
anything else is read). Errors become a page with one line; nothing is written on a refused
request.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from fstrain.kernel.errors import FeatureStoreError, NotFoundError, VerificationError
from fstrain.project import login
from fstrain.serve import pages, store_pages
from fstrain.serve.access import Identity, Refused
from fstrain.serve.auth import Auth
from fstrain.serve.context import HERE, ServeContext, ServeSettings
from fstrain.serve.security import ProxyView, SecurityHeaders, same_token

__all__ = ["ServeSettings", "create_app", "error_page", "guard"]

MAX_FORM_BYTES = 64 * 1024

Handler = Callable[..., Awaitable[Response] | Response]


def guard(ctx: ServeContext, auth: Auth, handler: Handler, *, permission: str = "read",
          form: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """Wrap ``handler(request, identity[, form])``: a session (else /login), the role's
    permission (else 403), and for a form its CSRF token (else 403) before the handler runs."""
    async def endpoint(request: Request) -> Response:
        try:
            identity = auth.identify(request)
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
            response = error_page(ctx, auth, request, exc.status, exc.reason)
        except NotFoundError as exc:
            response = error_page(ctx, auth, request, 404, str(exc))
        except VerificationError as exc:
            response = error_page(ctx, auth, request, 503, str(exc))
        except FeatureStoreError as exc:
            response = error_page(ctx, auth, request, 400, str(exc))
        return auth.finish(request, response)

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


def error_page(ctx: ServeContext, auth: Auth, request: Request, status: int,
               reason: str) -> Response:
    """One line saying why, with the status."""
    identity = None
    try:
        identity = auth.identify(request)
    except (Refused, FeatureStoreError):
        pass
    return ctx.render(request, "error.html", {"status": status, "reason": reason},
                      status=status, identity=identity)


def _routes(ctx: ServeContext, auth: Auth) -> list[BaseRoute]:
    async def login_post(request: Request) -> Response:
        try:
            return await auth.login(request)
        except Refused as exc:
            return error_page(ctx, auth, request, exc.status, exc.reason)
        except VerificationError as exc:
            return error_page(ctx, auth, request, 503, str(exc))

    def g(handler: Handler, **kw: Any) -> Callable[[Request], Awaitable[Response]]:
        return guard(ctx, auth, handler, **kw)

    return [
        Route("/", g(lambda r, i: RedirectResponse("/models", status_code=303))),
        Route("/login", lambda r: auth.login_page(r), methods=["GET"]),
        Route("/favicon.ico", lambda r: Response(status_code=204)),
        Route("/login", login_post, methods=["POST"]),
        Route("/logout", g(lambda r, i, f: auth.logout(i), form=True), methods=["POST"]),
        Route("/account", g(lambda r, i: ctx.render(
            r, "account.html", {"changed": r.query_params.get("changed")}, identity=i))),
        Route("/account/password", g(auth.change_password, form=True), methods=["POST"]),
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
        project = (login(backend="local", root=settings.root, create=False)
                   if settings.backend == "local" else login(backend=settings.backend))
    ctx = ServeContext(settings, project)
    auth = Auth(ctx)

    async def not_found(request: Request, exc: Exception) -> Response:
        try:
            signed_in = auth.identify(request) is not None
        except (Refused, FeatureStoreError):
            signed_in = False
        if not signed_in and request.method == "GET":
            return RedirectResponse("/login", status_code=303)
        return error_page(ctx, auth, request, 404, "no such page.")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return error_page(ctx, auth, request, 405, "method not allowed.")

    app = Starlette(routes=[*(extra_routes or []), *_routes(ctx, auth)],
                    exception_handlers={404: not_found, 405: not_allowed})
    app.state.ctx = ctx
    return SecurityHeaders(ProxyView(app, settings.proxy))
