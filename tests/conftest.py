"""Shared fixtures: every test gets its own store root; no test touches ./.fstrain."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed sequence of examples (no flaky red builds); locally
# they explore new examples on every run.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


def _main_module_as_under_python_m_pytest() -> None:
    """A pytest-xdist worker runs from ``python -c``: its ``__main__`` has neither
    ``__spec__`` nor ``__file__``. PySpark reads that as "running doctests" and, when Spark
    Connect's dependencies are missing, calls ``sys.exit(0)`` while it is imported (Great
    Expectations imports it), which ends the worker. Give ``__main__`` the spec it has under
    ``python -m pytest``; a name ending in ``.__main__`` is also what multiprocessing's spawn
    skips re-running in its children, as in a one-process run."""
    import importlib.util
    import sys

    main = sys.modules["__main__"]
    if getattr(main, "__spec__", None) is None and not hasattr(main, "__file__"):
        main.__spec__ = importlib.util.find_spec("pytest.__main__")


if os.environ.get("PYTEST_XDIST_WORKER"):
    _main_module_as_under_python_m_pytest()
    # n workers share the cores: OpenMP pools (XGBoost, LightGBM, torch) sized to all of them
    # in every worker oversubscribe the machine, and their spinning threads slow each other
    # down many times over. Set before those libraries load; a value already set is kept.
    _share = (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _share)))


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Scheduler window variables from the environment must not leak into tests."""
    monkeypatch.delenv("HOPS_START_TIME", raising=False)
    monkeypatch.delenv("HOPS_END_TIME", raising=False)
    for signing in ("FSTRAIN_KEY", "FSTRAIN_KEY_PASSPHRASE", "FSTRAIN_TRUSTED_OWNER"):
        monkeypatch.delenv(signing, raising=False)  # a developer's own key never signs tests
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


@pytest.fixture(scope="session")
def fstrain_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fstrain's wheel built from this checkout by ``build_wheel`` (what ``fstrain jobs deploy``
    installs), once per session (about 15 s). Never change it."""
    from fstrain.cli.job_install import build_wheel

    return build_wheel(tmp_path_factory.mktemp("wheel"))


@dataclass(frozen=True)
class AdultStore:
    """A store made by the real pipelines: adult (3,000 rows), training dataset v1, model
    ``name:version`` trained on it (60 trees) and validated once with the default gates."""

    root: Path
    name: str
    version: int
    training_dataset_version: int


@pytest.fixture(scope="session")
def adult_store(tmp_path_factory: pytest.TempPathFactory) -> AdultStore:
    """One adult store per session (about 20 s), for the tests that read a registry the
    pipelines made. Never change it: take :func:`adult_copy` to edit, tamper or add to one."""
    import feature_store
    from pipelines import feature, model_validation, training, training_dataset

    root = tmp_path_factory.mktemp("adult_session") / "store"
    project = feature_store.login(backend="local", root=root)
    feature.run(project, feature.FeaturePipelineConfig(use_case="adult", sample=3000))
    td = training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult"))
    ref = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version,
        model={"params": {"n_estimators": 60}}))
    model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=ref.name, version=ref.version, bootstrap_resamples=30, shap_samples=30))
    return AdultStore(root, ref.name, ref.version, td.version)


@pytest.fixture
def adult_copy(adult_store: AdultStore, tmp_path: Path) -> Path:
    """A private copy of the session's adult store (its root), to change freely."""
    import shutil

    target = tmp_path / "adult_store"
    shutil.copytree(adult_store.root, target)
    return target


@pytest.fixture(scope="session")
def signed_adult_store(adult_store: AdultStore, tmp_path_factory: pytest.TempPathFactory):
    """The session's adult store with a trust list, and version 2 trained and validated with
    enrolled keys (:mod:`tests.signed_store`). Never change it: copy it first."""
    from tests.signed_store import build_signed

    return build_signed(adult_store, tmp_path_factory.mktemp("signed"))


#: Test files that take far longer than any other (the type checker's run alone is ~100 s of
#: one core): collected first, so under ``--dist loadfile`` one xdist worker starts on them
#: while the other works through the rest, instead of one of them starting late and leaving
#: the other worker idle at the end.
LONG_FILES_FIRST = ("tests/test_architecture.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the items of :data:`LONG_FILES_FIRST` to the front (the rest keep their order)."""
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in LONG_FILES_FIRST)
