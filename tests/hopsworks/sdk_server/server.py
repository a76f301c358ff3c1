"""``FakeHopsworks``: routing of ``method + path`` to handlers, and the state they share.

Handlers live in the ``routes_*`` modules and register with :func:`route`; each takes the
server and a :class:`~sdk_server.transport.Call` plus the path's named groups,
and returns a JSON-able body (status 200), ``(status, body)``, or raises
:class:`~sdk_server.errors.HttpError`. A request no rule matches is answered
with HTTP 501 and recorded in :attr:`FakeHopsworks.unrouted`, so a test can fail on it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdk_server.errors import UNROUTED, HttpError
from sdk_server.state import State
from sdk_server.transport import Call

Handler = Callable[..., Any]
API = "/hopsworks-api/api"
_ROUTES: list[tuple[str, re.Pattern[str], Handler]] = []


def route(method: str, pattern: str) -> Callable[[Handler], Handler]:
    """Register a handler for ``method`` and a path pattern below ``/hopsworks-api/api``.

    ``{name}`` matches one path segment and is passed as keyword ``name``; ``{name:path}``
    matches the rest of the path.
    """
    regex = re.sub(r"\{(\w+):path\}", r"(?P<\1>.+)", pattern)
    regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", regex)

    def register(handler: Handler) -> Handler:
        _ROUTES.append((method, re.compile(f"^{API}{regex}/?$"), handler))
        return handler

    return register


@dataclass
class Request:
    """What the fake server recorded of one request (for assertions)."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int


@dataclass
class FakeHopsworks:
    """The fake cluster: state, rules and the request log."""

    root: Path
    host: str
    port: int
    projects: tuple[str, ...] = ("fstrain_ci",)
    tag_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: cluster variables overriding :data:`routes_platform.VARIABLES` (the Query Service's)
    variables: dict[str, str] = field(default_factory=dict)
    #: PEM key material ``GET /credentials`` hands out (:mod:`query_service`), else placeholders
    certificates: dict[str, bytes] = field(default_factory=dict)
    state: State = field(init=False)
    log: list[Request] = field(default_factory=list)
    unrouted: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state = State(self.root, self.projects, self.tag_schemas)
        self._lock = threading.Lock()
        _load_routes()

    def handle(self, call: Call) -> tuple[int, Any, dict[str, str]]:
        """Answer one request: ``(status, body, headers)``."""
        with self._lock:
            status, body = self._dispatch(call)
        try:
            recorded = call.json() if not call.files else {"files": sorted(call.files)}
        except ValueError:
            recorded = None
        self.log.append(Request(call.method, call.path, call.query, recorded, status))
        return status, body, {}

    def _dispatch(self, call: Call) -> tuple[int, Any]:
        for method, regex, handler in _ROUTES:
            if method != call.method:
                continue
            match = regex.match(call.path)
            if match is None:
                continue
            try:
                answer = handler(self, call, **match.groupdict())
            except HttpError as exc:
                return exc.status, exc.body()
            if isinstance(answer, tuple):
                return answer
            return 200, answer
        self.unrouted.append(f"{call.method} {call.path}")
        return 501, HttpError(501, UNROUTED, f"fake server: no rule for {call.method} "
                                             f"{call.path}").body()

    def requests_to(self, method: str, fragment: str) -> list[Request]:
        """Recorded requests with ``method`` whose path contains ``fragment``."""
        return [r for r in self.log if r.method == method and fragment in r.path]


def _load_routes() -> None:
    if _ROUTES:
        return
    from sdk_server import (  # noqa: F401  (registration by import)
        routes_datasets,
        routes_environments,
        routes_featurestore,
        routes_jobs,
        routes_models,
        routes_platform,
        routes_query,
        routes_training_datasets,
        routes_uploads,
        routes_views,
    )
