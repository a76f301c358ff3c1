"""Login inside a Hopsworks job, through the real SDK's in-cluster client and the fake server.

A job has no HOPSWORKS_HOST or API key. The cluster sets ``REST_ENDPOINT``,
``HOPSWORKS_PROJECT_ID``/``HOPSWORKS_PROJECT_NAME``, ``HOPSWORKS_PUBLIC_HOST`` and
``SECRETS_DIR`` (holding the job's ``token.jwt``), and puts the project's key material in the
working directory (``material_passwd``, ``k_certificate``, ``t_certificate``: JKS stores). The
SDK's ``hopsworks_common.client.hopsworks.Client`` reads exactly these; it also writes
``/tmp/ca_chain.pem`` (unless present), ``/tmp/client_cert.pem`` and ``/tmp/client_key.pem``,
paths it hard-codes, so this test writes there too.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from sdk_server import serve
from typer.testing import CliRunner

import feature_store
from fstrain.cli.app import app

PASSWORD = "job-material-password"


def _empty_jks(password: str) -> bytes:
    """A JKS store with no entries (magic, version 2, count 0, then the keyed SHA-1 digest)."""
    body = b"\xfe\xed\xfe\xed" + struct.pack(">II", 2, 0)
    digest = hashlib.sha1(password.encode("utf-16-be") + b"Mighty Aphrodite" + body).digest()
    return body + digest


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The fake cluster, and this process set up as one of its jobs (no HOPSWORKS_HOST)."""
    for var in ("HOPSWORKS_HOST", "HOPSWORKS_PORT", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY",
                "HOPSWORKS_API_KEY_FILE", "HOPSWORKS_ENGINE"):
        monkeypatch.delenv(var, raising=False)
    work = tmp_path / "job"
    work.mkdir()
    (work / "material_passwd").write_text(PASSWORD)
    (work / "k_certificate").write_bytes(_empty_jks(PASSWORD))
    (work / "t_certificate").write_bytes(_empty_jks(PASSWORD))
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "token.jwt").write_text("the-job-jwt")
    monkeypatch.chdir(work)
    with serve(tmp_path / "cluster") as cluster:
        monkeypatch.setenv("REST_ENDPOINT", f"https://127.0.0.1:{cluster.server.port}")
        monkeypatch.setenv("HOPSWORKS_PROJECT_ID", str(cluster.server.state.projects["fstrain_ci"].id))
        monkeypatch.setenv("HOPSWORKS_PROJECT_NAME", "fstrain_ci")
        monkeypatch.setenv("HOPSWORKS_PUBLIC_HOST", "hopsworks.fake")
        monkeypatch.setenv("SECRETS_DIR", str(secrets))
        yield cluster


def test_login_inside_a_job_uses_the_jobs_credentials(job, tmp_path):
    project = feature_store.login(backend="hopsworks", root=tmp_path / "client")
    assert project.name == "fstrain_ci"
    project.get_feature_store()
    server = job.server
    assert server.requests_to("GET", "/project/119/credentials")  # the in-cluster client's call
    assert not [r for r in server.log if r.path.endswith("/api/project")]  # no key listing
    assert not server.unrouted


def test_feature_stage_inside_a_job_runs_without_hopsworks_host(job, tmp_path):
    result = CliRunner().invoke(app, ["features", "ccfraud", "--n-transactions", "800",
                                      "--backend", "hopsworks", "--json",
                                      "--root", str(tmp_path / "client")])
    assert result.exit_code == 0, result.output
    written = json.loads(result.stdout[result.stdout.index("{"):])
    assert {g["name"] for g in written["feature_groups"]} >= {"transactions", "card_details"}
    assert all(g["rows_inserted"] > 0 for g in written["feature_groups"])


def test_a_job_cannot_switch_project(job, tmp_path):
    from fstrain.kernel.errors import ConfigError

    with pytest.raises(ConfigError, match="runs in project 'fstrain_ci'"):
        feature_store.login(backend="hopsworks", project="other", root=tmp_path / "client")
    assert not job.server.log  # refused before anything was sent
