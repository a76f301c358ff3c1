"""Fixtures for the Hopsworks backend tests: a fake Hopsworks 5.2 cluster for the real SDK.

``hops_cluster`` (module-scoped: importing and logging in to the SDK takes seconds) starts
:mod:`sdk_server` and logs in with ``feature_store.login(backend="hopsworks", ...)``; tests
get ``(cluster, project)``. State is shared within a module, so tests there build on each
other only where they say so (e.g. the feature stage before the view).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # makes `sdk_server` importable

from sdk_server import FakeCluster, serve

_HOPSWORKS_VARS = ("HOPSWORKS_HOST", "HOPSWORKS_PORT", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY",
                   "HOPSWORKS_API_KEY_FILE", "HOPSWORKS_LOGIN_TIMEOUT", "REST_ENDPOINT",
                   "HOPSWORKS_ENGINE")


@pytest.fixture(scope="module")
def hops_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeCluster, object]]:
    """A fake cluster and a logged-in fstrain ``HopsworksProject`` (module-scoped)."""
    import feature_store

    with pytest.MonkeyPatch.context() as mp:
        for var in _HOPSWORKS_VARS:
            mp.delenv(var, raising=False)
        root = tmp_path_factory.mktemp("hopsworks_cluster")
        with serve(root) as cluster:
            project = feature_store.login(backend="hopsworks", root=root / "client",
                                          **cluster.login_kwargs)
            yield cluster, project
            assert not cluster.server.unrouted, f"requests with no server rule: {cluster.server.unrouted}"
