"""flights, mnist, ccfraud and airquality end to end through the real SDK, the way the deployed jobs run.

The jobs' own arguments (``jobs.job_definitions`` of a YAML config) run through
``jobs.job_main``: the feature stage, the training dataset (a relative time window anchored at
a date, or a seeded random split), then the train job, which trains on ``latest``, registers
the model through ``hsml`` and validates, in the same run, the version it registered
(``--then validate {model}``). Afterwards the registry round trip is checked from a fresh
login: the version's files download and verify against its manifest, the scorecard is among
them, and the model was trained on the view's features (no row id or timestamp).
adult runs the same chain in ``test_hw_sdk_pipeline_jobs.py``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sdk_server import serve

import feature_store
from feature_views import get_use_case
from fstrain.cli import jobs
from fstrain.cli.app import app

PROJECT = "fstrain_ci"

FEATURE_ARGS = {"flights": {"sample": 1500}, "mnist": {"sample": 300},
                "ccfraud": {"n_transactions": 10000},  # fewer leave a window without a fraud
                "airquality": {}, "instructions": {"sample": 60}}
DATASET_ARGS = {"flights": {"seed": 1, "anchor": "2014-01-01"}, "mnist": {"seed": 1},
                "ccfraud": {"seed": 1, "anchor": "2024-07-01"},
                "airquality": {"seed": 1, "anchor": "1973-10-01"},
                # the SDK reads back parquet, csv and tsv only (jsonl is refused on Hopsworks)
                "instructions": {"seed": 1, "data_format": "parquet"}}  # the data ends 1973-09-30


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


def _train_args(use_case: str, tmp_path: Path) -> dict[str, Any]:
    args: dict[str, Any] = {"training_dataset_version": "latest"}
    model = get_use_case(use_case).model.get("model")
    if model == "lora":
        args["param"] = ["epochs=1", "max_length=64"]
    elif model == "cnn":
        cfg = tmp_path / "torch.yaml"
        cfg.write_text(yaml.safe_dump({"torch": {"epochs": 1, "batch_size": 64}}))
        args["config"] = str(cfg)
    else:
        args["param"] = ["n_estimators=20"]
    return args


def _job_args(use_case: str, tmp_path: Path) -> dict[str, list[str]]:
    config = tmp_path / "jobs.yaml"
    config.write_text(yaml.safe_dump({
        "use_case": use_case, "project": PROJECT, "install": "none",
        "environment": "python-feature-pipeline",
        "stages": {"features": {"args": FEATURE_ARGS[use_case]},
                   "dataset": {"args": DATASET_ARGS[use_case]},
                   "train": {"args": _train_args(use_case, tmp_path)},
                   "validate": {"schedule": None}}}))
    return {d["stage"]: shlex.split(d["config"]["defaultArgs"])
            for d in jobs.job_definitions(jobs.load_config(config))}


@pytest.mark.slow  # 30-60 s each: real training, and hsml polls while registering
@pytest.mark.parametrize("use_case", ["flights", "mnist", "ccfraud", "airquality",
                                      "instructions"])
def test_use_case_runs_as_chained_jobs_through_the_sdk(cluster, tmp_path, use_case):
    args = _job_args(use_case, tmp_path)
    assert jobs.job_main(args["features"], app) == 0
    assert jobs.job_main(args["dataset"], app) == 0
    code = jobs.job_main(args["train"], app)
    assert code in (0, 3)  # 3: a gate failed, which fails the job run, as it should

    spec = get_use_case(use_case)
    project = feature_store.login(backend="hopsworks")
    registry = project.get_model_registry()
    (model,) = registry.get_models(spec.registry_model_name)
    assert model.version == 1 and model.training_dataset_version == 1
    assert model.feature_view_name == spec.feature_view_name
    assert model.validation_status == ("passed" if code == 0 else "failed")
    server_model = cluster.server.state.models[f"{spec.registry_model_name}_1"]
    assert server_model["tags"]["validation_status"] == model.validation_status

    # round trip: a fresh download verifies every file against the manifest (IntegrityError
    # otherwise) and holds what validation attached
    folder = Path(registry.get_model(spec.registry_model_name, 1).download(tmp_path / "dl"))
    manifest = json.loads((folder / "manifest.json").read_text())
    paths = {e["path"] for e in manifest["files"]}
    assert {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} == (
        paths | {"manifest.json"})
    assert "history/0001/scorecard.json" in paths and "predictor.json" in paths

    # trained on the view's features, never on the root's row id or event time (the SDK
    # returns selected keys in X; the adapter drops them, as the local store does)
    fv = project.get_feature_store().get_feature_view(spec.feature_view_name,
                                                      spec.feature_view_version)
    names = json.loads((folder / "predictor.json").read_text()).get("features", {}).get("names", [])
    assert fv.root_key_columns and not set(fv.root_key_columns) & set(names), names
    assert not cluster.server.unrouted
