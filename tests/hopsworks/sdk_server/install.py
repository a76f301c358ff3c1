"""Start the fake cluster: mount the transport on the SDK's sessions, open the login port.

``serve(root)`` is a context manager yielding a :class:`FakeCluster`, whose ``login_kwargs``
are what ``feature_store.login(backend="hopsworks", **login_kwargs)`` needs. Inside it:

* every ``requests.Session`` created (the SDK creates its own in ``hopsworks.login``) gets
  :class:`FakeTransport` mounted for ``https://127.0.0.1:<port>/`` only — any other URL
  goes to the normal transport (and fails: nothing else is reachable);
* ``<port>`` is a real listening TCP socket, so fstrain's reachability probe runs unchanged;
* ``HOPSWORKS_CERT_FOLDER`` points into ``root`` (the SDK writes the placeholder certs there);
* the Delta write location seam of :mod:`hopsfs` is applied;
* the SDK's waits between polls (5 s before it first asks for a registered model or an
  environment command) are cut to :data:`POLL_WAIT_S`: the fake cluster has finished before
  the first poll, so those waits only idled (80 s of ``make test``); the polls run unchanged.
"""

from __future__ import annotations

import os
import socket
import time
import types
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from sdk_server.hopsfs import patch_delta_location
from sdk_server.server import FakeHopsworks
from sdk_server.transport import FakeTransport

API_KEY = "fake-api-key-for-the-fixture-server"

#: The longest wait between two polls of the SDK against the fake cluster, in seconds.
POLL_WAIT_S = 0.05

#: tag schemas the fake cluster has (name -> JSON schema); unknown names are refused.
DEFAULT_TAG_SCHEMAS: dict[str, dict[str, Any]] = {
    name: {"type": "object"} for name in (
        "fstrain_feature_tags", "fstrain_feature_view", "fstrain_training_dataset",
        "fstrain_lineage",
    )
} | {
    "fstrain_manifest_sha256": {"type": "string"},
    "validation_status": {"type": "string"},
} | {name: {"type": "string"} for name in ("source", "license", "modality")} | {
    name: {"type": "boolean"} for name in ("pii", "label_group", "unstructured")
}


@dataclass
class FakeCluster:
    server: FakeHopsworks
    api_key: str = API_KEY
    query_service: Any = None  #: the FakeQueryService, when serve(query_service=True)

    @property
    def login_kwargs(self) -> dict[str, Any]:
        return {"host": self.server.host, "port": self.server.port,
                "project": self.server.projects[0], "api_key_value": self.api_key}


@contextmanager
def serve(root: Path, projects: tuple[str, ...] = ("fstrain_ci",),
          tag_schemas: dict[str, dict[str, Any]] | None = None,
          query_service: bool = False) -> Iterator[FakeCluster]:
    """Run a fake Hopsworks cluster storing its files under ``root``; with ``query_service``
    also its Query Service (:mod:`query_service`, Arrow Flight over TLS), which the SDK then
    uses for every offline read."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    server = FakeHopsworks(Path(root), "127.0.0.1", port, tuple(projects),
                           dict(DEFAULT_TAG_SCHEMAS if tag_schemas is None else tag_schemas))
    with ExitStack() as stack:
        stack.callback(listener.close)
        stack.enter_context(_mounted(FakeTransport(server), f"https://127.0.0.1:{port}/"))
        stack.enter_context(_env("HOPSWORKS_CERT_FOLDER", str(Path(root) / "certs")))
        stack.enter_context(patch_delta_location(server.state.hopsfs))
        stack.enter_context(_short_sdk_polls())
        cluster = FakeCluster(server)
        if query_service:
            cluster.query_service = stack.enter_context(_query_service(server))
        yield cluster


@contextmanager
def _short_sdk_polls() -> Iterator[None]:
    """hsml's wait before each poll for a registered model and the environment engine's
    poll interval, at most :data:`POLL_WAIT_S` inside the block (restored after)."""
    from unittest import mock

    from hopsworks_common.engine import environment_engine
    from hsml.engine import model_engine

    clock = types.SimpleNamespace(**{n: getattr(time, n) for n in dir(time) if not n.startswith("_")})
    clock.sleep = lambda seconds: time.sleep(min(seconds, POLL_WAIT_S))
    # model_engine uses time for that wait and for one time stamp only
    with mock.patch.object(model_engine, "time", clock), \
            mock.patch.object(environment_engine.EnvironmentEngine, "POLL_INTERVAL", POLL_WAIT_S):
        yield


@contextmanager
def _query_service(server: FakeHopsworks) -> Iterator[Any]:
    """Start the Query Service and announce it through the cluster variables; the SDK's
    flight client (a process-wide singleton) is reset before and after, so it connects here
    and a later cluster without one does not inherit it."""
    import threading

    from hsfs.core import arrow_flight_client

    from sdk_server.query_service import (
        DOMAIN,
        FakeQueryService,
        free_loopback,
        make_certificates,
    )

    server.certificates = make_certificates()
    host = free_loopback()
    service = FakeQueryService(server, host, server.certificates)
    server.variables |= {"enable_flyingduck": "true", "service_discovery_domain": DOMAIN,
                         "loadbalancer_external_domain_feature_query": host}
    thread = threading.Thread(target=service.serve, daemon=True)
    thread.start()
    arrow_flight_client._close()
    try:
        yield service
    finally:
        arrow_flight_client._close()
        service.shutdown()
        thread.join(timeout=10)


@contextmanager
def _mounted(adapter: FakeTransport, prefix: str) -> Iterator[None]:
    original = requests.Session.__init__

    def init(self: requests.Session, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.mount(prefix, adapter)

    requests.Session.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        requests.Session.__init__ = original  # type: ignore[method-assign]


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
