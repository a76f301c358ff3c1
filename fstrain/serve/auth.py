"""Who is asking: the login form, server-side sessions, trusted-header users, roles and CSRF.

* Login form (``/login``): its CSRF token is bound to the browser by a signed cookie; at most
  :data:`~fstrain.serve.state.MAX_FAILURES` failures per user and address in 15 minutes, then a
  15-minute lockout (a correct password is refused too while locked). A successful login always
  makes a **new** session id (a session id planted before login is never promoted).
* Sessions: the cookie holds a signed random id (HttpOnly, SameSite=Strict, Secure over
  HTTPS); the server keeps the session, so logout and a password change end it for good.
* Trusted-header mode (off by default): the proxy's header names the user, and is believed
  only from the proxy's address (or loopback when the server is bound there). A header user
  who is not enrolled gets 403, as does a header from anyone else.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from fstrain.kernel.errors import FeatureStoreError
from fstrain.serve.access import Identity, Refused
from fstrain.serve.security import LOGIN_COOKIE, SESSION_COOKIE, is_loopback, same_token
from fstrain.serve.users import check_password

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fstrain.serve.context import ServeContext

def client_address(request: Request) -> str:
    """The client's address as the server sees it (the proxy's forwarded one behind a proxy)."""
    return request.client.host if request.client else "unknown"


def _cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")


class Auth:
    """Identifies requests and serves the login, logout and password routes."""

    def __init__(self, ctx: ServeContext) -> None:
        self.ctx = ctx

    # -- identifying a request ---------------------------------------------------------------

    def identify(self, request: Request) -> Identity | None:
        """The request's identity, None without one; raises :class:`Refused` for a header
        user the server must not believe or does not know."""
        header = self.ctx.settings.trusted_header
        if header is not None:
            return self._from_header(request, header)
        session_id = self.ctx.signer.session_id(request.cookies.get(SESSION_COOKIE))
        if session_id is None:
            return None
        session = self.ctx.state.session(session_id)
        if session is None:
            return None
        user = self.ctx.users.get(session.user)
        if user is None:  # removed since login
            self.ctx.state.revoke(session_id)
            return None
        return Identity(user=user, session_id=session_id, csrf=session.csrf)

    def _trusted_peer(self, request: Request) -> bool:
        peer = str(request.scope.get("fstrain.peer") or "")
        proxy = self.ctx.settings.proxy
        return peer == proxy if proxy is not None else is_loopback(peer)

    def _from_header(self, request: Request, header: str) -> Identity:
        name = request.headers.get(header)
        if not self._trusted_peer(request):
            raise Refused(403, f"requests must come through the proxy; {header} is not believed "
                               "from this address.")
        if not name:
            raise Refused(401, f"the proxy sent no {header} header: sign in through the proxy.")
        user = self.ctx.users.get(name.strip())
        if user is None:
            raise Refused(403, f"user {name.strip()!r} is not enrolled here; ask an owner to run "
                               "`fstrain users add`.")
        session_id = self.ctx.signer.session_id(request.cookies.get(SESSION_COOKIE))
        session = None if session_id is None else self.ctx.state.session(session_id)
        if session_id is None or session is None or session.user != user.name:
            if session_id is not None:
                self.ctx.state.revoke(session_id)
            session_id = self.ctx.state.create_session(user.name, client_address(request))
            session = self.ctx.state.session(session_id)
            request.state.new_session = session_id
        assert session is not None
        return Identity(user=user, session_id=session_id, csrf=session.csrf)

    def finish(self, request: Request, response: Response) -> Response:
        """Set the cookie of a session made while answering (trusted-header mode)."""
        new = getattr(request.state, "new_session", None)
        if new:
            _cookie(response, request, SESSION_COOKIE, self.ctx.signer.sign_session(new),
                    12 * 3600)
        return response

    # -- the login form ----------------------------------------------------------------------

    def login_page(self, request: Request, *, error: str | None = None,
                   status: int = 200) -> Response:
        """The form, with a fresh CSRF token bound to this browser."""
        if self.ctx.settings.trusted_header is not None:
            return RedirectResponse("/models", status_code=303)
        # one token per browser until it signs in: a second tab or a stray request for
        # /login (a favicon redirect) must not invalidate the form already shown
        token = (self.ctx.signer.login_token(request.cookies.get(LOGIN_COOKIE))
                 or secrets.token_urlsafe(32))
        response = self.ctx.render(request, "login.html", {"login_csrf": token, "error": error},
                                   status=status, identity=None)
        _cookie(response, request, LOGIN_COOKIE, self.ctx.signer.sign_login(token), 3600)
        return response

    async def login(self, request: Request) -> Response:
        """Check the form: CSRF, lockout, password; on success a new session."""
        if self.ctx.settings.trusted_header is not None:
            raise Refused(404, "password login is off: this server trusts its proxy's header.")
        form = await request.form()
        expected = self.ctx.signer.login_token(request.cookies.get(LOGIN_COOKIE))
        if expected is None or not same_token(expected, form.get("csrf")):
            raise Refused(403, "the login form expired or was not this server's; reload it.")
        name = str(form.get("username") or "").strip()[:64]
        password = str(form.get("password") or "")[:1024]
        address = client_address(request)
        wait = self.ctx.state.locked_for(name, address)
        if wait > 0:
            return self.login_page(request, status=429, error=(
                f"Too many failed attempts: try again in {int(wait // 60) + 1} minutes."))
        user = self.ctx.users.get(name) if name else None
        if not check_password(user, password) or user is None:
            self.ctx.state.record_failure(name, address)
            return self.login_page(request, status=401, error="Wrong user name or password.")
        self.ctx.state.clear_failures(name, address)
        old = self.ctx.signer.session_id(request.cookies.get(SESSION_COOKIE))
        if old is not None:
            self.ctx.state.revoke(old)
        session_id = self.ctx.state.create_session(user.name, address)
        response = RedirectResponse("/models", status_code=303)
        _cookie(response, request, SESSION_COOKIE, self.ctx.signer.sign_session(session_id),
                12 * 3600)
        response.delete_cookie(LOGIN_COOKIE, path="/")
        return response

    def logout(self, identity: Identity) -> Response:
        """End the session server-side and clear the cookie."""
        self.ctx.state.revoke(identity.session_id)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    def change_password(self, request: Request, identity: Identity,
                        form: Any) -> Response:
        """Check the current password, set the new one, end every session of the user and
        start a new one for this browser."""
        current = str(form.get("current") or "")
        new, again = str(form.get("new") or ""), str(form.get("again") or "")
        error = None
        if self.ctx.settings.trusted_header is not None:
            error = "Passwords are managed by the single-sign-on proxy."
        elif not check_password(identity.user, current):
            error = "The current password is wrong."
        elif new != again:
            error = "The new passwords differ."
        if error is None:
            try:
                self.ctx.users.set_password(identity.user.name, new, signer=self.ctx.service)
            except FeatureStoreError as exc:
                error = str(exc)
        if error is not None:
            return self.ctx.render(request, "account.html", {"error": error}, status=400,
                                   identity=identity)
        self.ctx.state.revoke_user(identity.user.name)
        session_id = self.ctx.state.create_session(identity.user.name, client_address(request))
        response = RedirectResponse("/account?changed=1", status_code=303)
        _cookie(response, request, SESSION_COOKIE, self.ctx.signer.sign_session(session_id),
                12 * 3600)
        return response
