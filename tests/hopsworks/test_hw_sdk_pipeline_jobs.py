"""The jobs' own arguments, run through the real SDK against the fake server: features, dataset,
then the train job (training on ``latest``, then validation chained on the version it
registered), the way ``fstrain_job.py`` runs them on a cluster."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sdk_server import serve

import feature_store
from fstrain.cli import jobs
from fstrain.cli.app import app

PROJECT = "fstrain_ci"


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv("REST_ENDPOINT", raising=False)
    with serve(tmp_path / "cluster") as fake:
        kwargs = fake.login_kwargs
        monkeypatch.setenv("HOPSWORKS_HOST", kwargs["host"])
        monkeypatch.setenv("HOPSWORKS_PORT", str(kwargs["port"]))
        monkeypatch.setenv("HOPSWORKS_API_KEY", kwargs["api_key_value"])
        monkeypatch.setenv("HOPSWORKS_PROJECT", PROJECT)
        monkeypatch.setenv("FSTRAIN_HOME", str(tmp_path / "client"))
        yield fake


@pytest.mark.slow  # about a minute: hsml polls while registering
def test_the_train_job_validates_the_model_it_registered(cluster, tmp_path):
    config = tmp_path / "jobs.yaml"
    config.write_text(yaml.safe_dump({
        "use_case": "adult", "project": PROJECT, "install": "none",
        "environment": "python-feature-pipeline",
        "stages": {"features": {"args": {"sample": 1500}}, "dataset": {"args": {"seed": 1}},
                   "train": {"args": {"training_dataset_version": "latest",
                                      "param": ["n_estimators=20"]}},
                   "validate": {"schedule": None}}}))
    args = {d["stage"]: shlex.split(d["config"]["defaultArgs"])
            for d in jobs.job_definitions(jobs.load_config(config))}
    assert jobs.job_main(args["features"], app) == 0
    assert jobs.job_main(args["dataset"], app) == 0
    code = jobs.job_main(args["train"], app)
    assert code in (0, 3)  # 3: the gates failed, which fails the job run, as it should
    registry = feature_store.login(backend="hopsworks").get_model_registry()
    (model,) = registry.get_models("adult_income")
    assert model.version == 1 and model.training_dataset_version == 1
    assert model.validation_status == ("passed" if code == 0 else "failed")
    tags = cluster.server.state.models["adult_income_1"]["tags"]
    assert tags["validation_status"] == model.validation_status
    # the validate job itself refuses to run on "whatever is latest"
    assert jobs.job_main(args["validate"], app) == 2
    assert not cluster.server.unrouted
