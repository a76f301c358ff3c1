"""``fstrain jobs deploy/list/run`` through the real SDK against the fake server.

The server refuses a job whose app file is not in HopsFS or whose environment does not exist,
a schedule that is not Quartz cron, and an install into a built-in environment; so a deploy
that passes here uploaded the entry script and the wheel, created the environment, installed
fstrain into it and created the jobs in that order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sdk_server import serve
from typer.testing import CliRunner

from fstrain.cli.jobs import jobs_app

PROJECT = "fstrain_ci"


@pytest.fixture
def wheel(fstrain_wheel: Path) -> Path:
    return fstrain_wheel


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for var in ("REST_ENDPOINT", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY_FILE"):
        monkeypatch.delenv(var, raising=False)
    with serve(tmp_path / "cluster", projects=(PROJECT, "other")) as fake:
        kwargs = fake.login_kwargs
        monkeypatch.setenv("HOPSWORKS_HOST", kwargs["host"])
        monkeypatch.setenv("HOPSWORKS_PORT", str(kwargs["port"]))
        monkeypatch.setenv("HOPSWORKS_API_KEY", kwargs["api_key_value"])
        monkeypatch.setenv("FSTRAIN_HOME", str(tmp_path / "client"))
        yield fake


def _config(tmp_path: Path, **overrides: Any) -> Path:
    data = {"use_case": "ccfraud", "project": PROJECT, "schedule": "@daily",
            "stages": {"features": {"schedule": "0 0 * ? * * *"}, "dataset": {},
                       "train": {"args": {"training_dataset_version": "latest"}},
                       "validate": {"schedule": None, "args": {"gate": "roc_auc >= 0.8"}}}}
    data.update(overrides)
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(jobs_app, list(args))


def test_deploy_installs_fstrain_then_creates_the_jobs(cluster, tmp_path, wheel):
    result = _invoke("deploy", str(_config(tmp_path)), "--wheel", str(wheel))
    assert result.exit_code == 0, result.output
    out = json.loads(result.output[result.output.index("{\n"):])
    state = cluster.server.state
    jobs_dir = state.hopsfs / "Projects" / PROJECT / "Resources" / "jobs"
    assert (jobs_dir / "fstrain_job.py").read_text().count("job_main") == 2
    assert (jobs_dir / wheel.name).read_bytes() == wheel.read_bytes()
    env = state.environments["fstrain-pipeline"]
    assert env["base"] == "python-feature-pipeline" and not env["built_in"]
    (spec,) = env["libraries"].values()
    assert spec["packageSource"] == "WHEEL"
    assert spec["dependencyUrl"].endswith(f"/Projects/{PROJECT}/Resources/jobs/{wheel.name}")
    assert out["environment"]["created"] is True
    assert sorted(state.jobs) == [f"fstrain_ccfraud_{s}" for s in
                                  ("dataset", "features", "train", "validate")]
    train = state.jobs["fstrain_ccfraud_train"]["config"]
    assert train["environmentName"] == "fstrain-pipeline"
    assert train["defaultArgs"].endswith(
        "--then validate '{model}' --gate 'roc_auc >= 0.8' --backend hopsworks --json")
    assert state.jobs["fstrain_ccfraud_features"]["jobSchedule"]["cronExpression"] == "0 0 * ? * * *"
    assert state.jobs["fstrain_ccfraud_dataset"]["jobSchedule"]["cronExpression"] == "0 0 0 ? * * *"
    assert state.jobs["fstrain_ccfraud_validate"]["jobSchedule"] is None
    # a second deploy updates in place: same ids, the environment is reused
    ids = {name: job["id"] for name, job in state.jobs.items()}
    again = _invoke("deploy", str(_config(tmp_path)), "--wheel", str(wheel))
    assert again.exit_code == 0, again.output
    assert {name: job["id"] for name, job in state.jobs.items()} == ids
    assert json.loads(again.output[again.output.index("{\n"):])["environment"]["created"] is False
    assert not cluster.server.unrouted


def test_list_and_run_honour_the_project_and_pass_window_and_args(cluster, tmp_path, wheel):
    config = _config(tmp_path, install="none", environment="python-feature-pipeline")
    assert _invoke("deploy", str(config)).exit_code == 0
    listed = _invoke("list", str(config))
    assert listed.exit_code == 0, listed.output
    rows = {r["name"]: r for r in json.loads(listed.output[listed.output.index("["):])}
    assert rows["fstrain_ccfraud_features"]["schedule"] == "0 0 * ? * * *"
    assert rows["fstrain_ccfraud_validate"]["schedule"] is None
    ran = _invoke("run", "fstrain_ccfraud_features", "--start", "2024-01-01",
                  "--end", "2024-01-02", "--project", PROJECT)
    assert ran.exit_code == 0, ran.output
    (execution,) = cluster.server.state.executions["fstrain_ccfraud_features"]
    assert execution["envVars"]["HOPS_START_TIME"].startswith("2024-01-01T00:00:00")
    assert execution["envVars"]["HOPS_END_TIME"].startswith("2024-01-02T00:00:00")
    again = _invoke("run", "fstrain_ccfraud_validate", "--project", PROJECT,
                    "--args", "validate ccfraud_xgb:3 --backend hopsworks --json")
    assert again.exit_code == 0, again.output
    assert cluster.server.state.executions["fstrain_ccfraud_validate"][0]["args"] == (
        "validate ccfraud_xgb:3 --backend hopsworks --json")
    # the other project has none of these jobs
    elsewhere = _invoke("run", "fstrain_ccfraud_features", "--project", "other")
    assert elsewhere.exit_code == 2 and "does not exist" in elsewhere.output
    other = _invoke("list", "--project", "other").output
    assert json.loads(other[other.index("["):]) == []


def test_installing_into_a_built_in_environment_is_refused_clearly(cluster, tmp_path, wheel):
    config = _config(tmp_path, environment="python-feature-pipeline")
    result = _invoke("deploy", str(config), "--wheel", str(wheel))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "'python-feature-pipeline' is a built-in Hopsworks environment" in result.output
    assert not cluster.server.log  # refused before connecting
    # the server refuses it too (a base environment cannot be modified)
    import feature_store

    project = feature_store.login(backend="hopsworks", **cluster.login_kwargs)
    from fstrain.kernel.errors import FeatureStoreError

    with pytest.raises(FeatureStoreError, match="python-feature-pipeline"):
        project.get_jobs().install(wheel, kind="wheel", environment="python-feature-pipeline",
                                   base_environment="python-feature-pipeline",
                                   folder=f"/Projects/{PROJECT}/Resources/jobs")
    assert not cluster.server.state.jobs


def test_deploy_into_an_unknown_project_fails_before_writing(cluster, tmp_path, wheel):
    result = _invoke("deploy", str(_config(tmp_path)), "--wheel", str(wheel), "--project", "nope")
    assert result.exit_code == 2 and "nope" in result.output
    assert not cluster.server.state.jobs
