"""Shared fixtures: every test gets its own store root; no test touches ./.fstrain."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed sequence of examples (no flaky red builds); locally
# they explore new examples on every run.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Scheduler window variables from the environment must not leak into tests."""
    monkeypatch.delenv("HOPS_START_TIME", raising=False)
    monkeypatch.delenv("HOPS_END_TIME", raising=False)
    monkeypatch.setenv("FSTRAIN_HOME", str(tmp_path_factory.mktemp("fstrain_home")))


@pytest.fixture
def project(tmp_path):
    """A fresh local project rooted in the test's temporary directory."""
    import feature_store

    return feature_store.login(root=tmp_path / "store")


@pytest.fixture
def fs(project):
    """The project's feature store."""
    return project.get_feature_store()
