"""Real CLI runs on a tiny adult sample: `train --track mlflow` read back with MlflowClient,
`doctor` on the registered model; and the tracker's logging to a SQLite store (fast)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app

# Asked of the installed packages, not imported at collection (mlflow takes seconds to import).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                                reason="the 'tracking' extra (mlflow-skinny) is not installed")


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


def _curves():
    return {"schema_version": 1, "unit": "round", "loss": "logloss", "metric": "auc",
            "mode": "max", "steps": [0, 1, 2], "train_loss": [0.6, 0.5, 0.4],
            "val_loss": [0.62, 0.55, None], "train_metric": [0.7, 0.8, 0.85],
            "val_metric": [0.68, 0.75, 0.77], "best_step": 2, "extra": {}, "notes": [],
            "non_finite": {}}


def test_a_run_is_logged_with_params_curves_artifacts_and_registry_ref(tmp_path):
    from mlflow.tracking import MlflowClient

    from pipelines.training.tracking import log_training_run

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = log_training_run(tracking_uri=uri, artifact_root=tmp_path / "artifacts", model_ref="m:2",
                           model_path="/store/m/2", params={"max_depth": 4, "eval": ["a", "b"]},
                           metrics={"validation_roc_auc": 0.8, "bad": float("nan")},
                           curves=_curves(), training_config={"trainer": {"model": "xgboost"}},
                           tags={"fstrain.training_dataset_version": "3"})
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(out["run_id"])
    assert run.info.run_name == "m:2" and run.info.status == "FINISHED"
    assert run.data.tags["fstrain.model"] == "m:2"
    assert run.data.tags["fstrain.training_dataset_version"] == "3"
    assert run.data.params["max_depth"] == "4" and run.data.params["eval"] == '["a", "b"]'
    assert run.data.metrics["validation_roc_auc"] == 0.8 and "bad" not in run.data.metrics
    history = client.get_metric_history(out["run_id"], "val_loss")
    assert [(m.step, m.value) for m in history] == [(0, 0.62), (1, 0.55)]  # null skipped
    assert [m.value for m in client.get_metric_history(out["run_id"], "train_auc")] == [0.7, 0.8, 0.85]
    assert {a.path for a in client.list_artifacts(out["run_id"])} == {
        "learning_curves.json", "training_config.json"}
    assert client.get_experiment(out["experiment_id"]).name == "m"


def test_tracking_options_are_refused_when_they_would_be_ignored(tmp_path):
    out = _cli(tmp_path, "train", "adult", "-t", "1", "--tracking-uri", "sqlite:///x.db")
    assert out.exit_code == 2 and "only used with track='mlflow'" in out.output
    out = _cli(tmp_path, "train", "adult", "-t", "1", "--track", "wandb")
    assert out.exit_code == 2 and "'mlflow'" in out.output
    out = _cli(tmp_path, "train", "adult", "-t", "1", "--smoke", "--track", "mlflow")
    assert out.exit_code == 2 and "--track would be ignored" in out.output


@pytest.mark.slow
def test_adult_cli_run_tracked_in_sqlite_and_doctored(tmp_path):
    from mlflow.tracking import MlflowClient

    root = tmp_path / "store"
    assert _cli(root, "features", "adult", "--sample", "1500").exit_code == 0
    assert _cli(root, "dataset", "adult").exit_code == 0
    out = _cli(root, "train", "adult", "-t", "1", "--param", "n_estimators=25",
               "--track", "mlflow", "--json")
    assert out.exit_code == 0, out.output
    ref = json.loads(out.output[out.output.index("{"):])
    assert ref["tracking_uri"] == f"sqlite:///{root.resolve()}/mlflow.db"
    client = MlflowClient(tracking_uri=ref["tracking_uri"])
    experiment = client.get_experiment_by_name("adult_income")
    (run,) = client.search_runs([experiment.experiment_id])
    model_ref = f"adult_income:{ref['version']}"
    assert run.data.tags["fstrain.model"] == model_ref
    assert run.data.params["fstrain.model"] == "xgboost"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")]
    assert steps == list(range(len(steps))) and len(steps) >= 10  # one point per round
    assert "validation_roc_auc" in run.data.metrics
    curves = json.loads((root / "model_registry" / "adult_income" / str(ref["version"])
                         / "learning_curves.json").read_text())
    assert len(curves["steps"]) == len(steps)

    doctor = _cli(root, "doctor", model_ref, "--json")
    report = json.loads(doctor.output)
    assert doctor.exit_code == (3 if report["severe"] else 0)
    found = {f["check"]: f["severity"] for f in report["findings"]}
    assert found["reproducibility"] == "ok" and found["leakage"] == "ok"
    assert found["nan_loss"] == "ok" and found["input_pipeline"] in ("ok", "warning")
