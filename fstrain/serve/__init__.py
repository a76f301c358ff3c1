"""``fstrain serve``: the store and the model registry in a browser, behind a login.

The application layer (only the CLI imports it): server-rendered pages over the composition
root's project (:mod:`fstrain.project`), read live on every request; local users with argon2
hashes (:mod:`fstrain.serve.users`), server-side sessions and CSRF tokens
(:mod:`fstrain.serve.auth`, :mod:`fstrain.serve.state`), the hardening headers
(:mod:`fstrain.serve.security`) and sign-off with the command line's rules
(:mod:`fstrain.serve.signoff_rules`). :func:`create_app` builds the ASGI application and
:func:`fstrain.serve.server.serve` runs it under uvicorn.
"""

from __future__ import annotations

from fstrain.serve.app import create_app
from fstrain.serve.context import ServeSettings

__all__ = ["ServeSettings", "create_app"]
