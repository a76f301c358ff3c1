"""Login to Hopsworks fails fast and clearly, for real, against a closed local port."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import feature_store
from feature_store.hopsworks import connection
from fstrain.kernel.errors import BackendError, ConfigError

REPO = Path(__file__).resolve().parents[2]
CLOSED = ("127.0.0.1", 1)  # nothing listens on port 1: connection refused


@pytest.fixture(autouse=True)
def _no_hopsworks_env(monkeypatch):
    for var in ("HOPSWORKS_HOST", "HOPSWORKS_PORT", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY",
                "HOPSWORKS_API_KEY_FILE", "HOPSWORKS_LOGIN_TIMEOUT", "REST_ENDPOINT",
                "HOPSWORKS_PROJECT_ID", "HOPSWORKS_PROJECT_NAME"):
        monkeypatch.delenv(var, raising=False)


def _login_error(**kwargs) -> tuple[BackendError, float]:
    started = time.perf_counter()
    with pytest.raises(BackendError) as info:
        feature_store.login(backend="hopsworks", **kwargs)
    return info.value, time.perf_counter() - started


def test_unreachable_host_fails_fast_naming_host_and_what_to_check():
    err, elapsed = _login_error(host=CLOSED[0], port=CLOSED[1], project="p",
                                api_key_value="key", timeout=2)
    assert elapsed < 3
    assert "127.0.0.1:1" in str(err)
    assert "connection refused" in str(err).lower()
    assert "HOPSWORKS_HOST" in str(err)


def test_sdk_connection_error_is_translated_too(monkeypatch):
    """Past the probe, the real ``hopsworks.login()`` raises requests.ConnectionError: we
    translate it into one BackendError (no chained traceback)."""
    monkeypatch.setattr(connection, "_probe", lambda *a: None)
    err, elapsed = _login_error(host=f"{CLOSED[0]}:{CLOSED[1]}", project="p",
                                api_key_value="key", timeout=2)
    assert elapsed < 10
    assert "127.0.0.1:1" in str(err) and "connection refused" in str(err)
    assert err.__suppress_context__ and err.__cause__ is None
    assert "Traceback" not in str(err) and "MaxRetryError" not in str(err)


def test_settings_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HOPSWORKS_HOST", "127.0.0.1")
    monkeypatch.setenv("HOPSWORKS_PORT", "1")
    monkeypatch.setenv("HOPSWORKS_PROJECT", "p")
    monkeypatch.setenv("HOPSWORKS_API_KEY", "key")
    err, _ = _login_error()
    assert "127.0.0.1:1" in str(err)


def test_a_silent_host_times_out_within_the_limit(monkeypatch):
    def hanging(address, timeout):
        assert timeout == pytest.approx(0.2)
        raise TimeoutError

    monkeypatch.setattr(connection.socket, "create_connection", hanging)
    err, elapsed = _login_error(host="10.255.255.1", project="p", api_key_value="k", timeout=0.2)
    assert "no answer within 0.2 s" in str(err) and "10.255.255.1:443" in str(err)
    assert elapsed < 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"project": "p", "api_key_value": "k"}, "needs a host"),
        ({"host": "h.example", "project": "p"}, "no API key"),
        ({"host": "h.example", "api_key_file": "/nonexistent/key"}, "does not exist"),
        ({"host": "h.example", "api_key_value": "k", "port": "https"}, "port must be an integer"),
        ({"host": "h.example", "api_key_value": "k", "port": 70000}, "1..65535"),
        ({"host": "h.example", "api_key_value": "k"}, "no project. Pass project="),
    ],
)
def test_missing_or_bad_settings_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        feature_store.login(backend="hopsworks", **kwargs)


def test_api_key_file_is_accepted(tmp_path):
    key = tmp_path / "key"
    key.write_text("secret")
    err, _ = _login_error(host="127.0.0.1", port=1, api_key_file=key, project="p",
                            timeout=1)
    assert "127.0.0.1:1" in str(err)


def test_cli_reports_one_clean_line_and_exit_2(monkeypatch):
    from typer.testing import CliRunner

    from fstrain.cli.app import app

    monkeypatch.setenv("HOPSWORKS_HOST", "127.0.0.1:1")
    monkeypatch.setenv("HOPSWORKS_API_KEY", "key")
    monkeypatch.setenv("HOPSWORKS_PROJECT", "p")
    result = CliRunner().invoke(app, ["dataset", "adult", "--backend", "hopsworks"])
    assert result.exit_code == 2
    assert "cannot reach Hopsworks at 127.0.0.1:1" in result.output
    assert "Traceback" not in result.output


def test_inside_a_job_the_cli_logs_in_without_hopsworks_host(monkeypatch):
    """A Hopsworks job has REST_ENDPOINT and the project id, no HOPSWORKS_HOST or API key: the
    login goes to the job's endpoint (here closed) instead of failing for lack of a host."""
    from typer.testing import CliRunner

    from fstrain.cli.app import app

    monkeypatch.setenv("REST_ENDPOINT", "https://127.0.0.1:1")
    monkeypatch.setenv("HOPSWORKS_PROJECT_ID", "119")
    monkeypatch.setenv("HOPSWORKS_PROJECT_NAME", "fraud")
    monkeypatch.setenv("HOPSWORKS_LOGIN_TIMEOUT", "2")
    result = CliRunner().invoke(app, ["features", "ccfraud", "--backend", "hopsworks"])
    assert "needs a host" not in result.output
    assert "cannot reach Hopsworks at 127.0.0.1:1" in result.output


@pytest.mark.parametrize(
    ("env", "kwargs", "message"),
    [
        ({"REST_ENDPOINT": "https://h:8181"}, {}, "HOPSWORKS_PROJECT_ID is not"),
        ({"REST_ENDPOINT": "https://h:8181", "HOPSWORKS_PROJECT_ID": "1",
          "HOPSWORKS_PROJECT_NAME": "fraud"}, {"project": "other"}, "runs in project 'fraud'"),
    ],
)
def test_job_environment_errors_are_config_errors(monkeypatch, env, kwargs, message):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match=message):
        feature_store.login(backend="hopsworks", **kwargs)


def test_import_feature_store_does_not_import_the_sdk():
    code = ("import sys, feature_store, feature_store.hopsworks.connection, "
            "model_registry.hopsworks.registry, fstrain.cli.jobs; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('hopsworks', 'hsfs', 'hsml', 'hopsworks_common')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_a_refused_login_leaves_no_sdk_connection_behind(monkeypatch, tmp_path):
    """The real ``hopsworks.login()`` registers its connection before it reaches the cluster;
    refused, that half-made connection (no backend version) stayed the SDK's current one and
    broke later SDK code in the process: a local view with a built-in transformation
    function could no longer be saved (``InvalidVersion: None``)."""
    import hopsworks

    monkeypatch.setattr(connection, "_probe", lambda *a: None)
    _login_error(host=f"{CLOSED[0]}:{CLOSED[1]}", project="p", api_key_value="key", timeout=2)
    assert hopsworks.client._get_connection() is None

    import pandas as pd

    project = feature_store.login(root=tmp_path / "store")
    fs = project.get_feature_store()
    fg = fs.create_feature_group("g", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2, 3], "x": [1.0, 2.0, 4.0]}))
    scaler = fs.get_transformation_function("standard_scaler")
    fv = fs.create_feature_view("v", version=1, query=fg.select_all(),
                                transformation_functions=[scaler("x")])
    assert fs.get_feature_view("v", version=1).name == fv.name
