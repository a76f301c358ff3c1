"""Who may do what in the web application: roles' permissions, a request's identity, and the
refusal a guard turns into a one-line error page."""

from __future__ import annotations

from dataclasses import dataclass

from fstrain.serve.users import User

#: what each role may do in the web application
PERMISSIONS = {"read": ("viewer", "data-scientist", "reviewer", "owner"),
               "sign_off": ("reviewer",)}


class Refused(Exception):
    """A request that must stop with ``status`` and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Identity:
    """The signed-in user of a request and the session's CSRF token."""

    user: User
    session_id: str
    csrf: str

    def may(self, permission: str) -> bool:
        """Whether the user's role grants ``permission``."""
        return self.user.role in PERMISSIONS[permission]
