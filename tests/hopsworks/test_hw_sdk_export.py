"""``model.export("onnx")`` on a Hopsworks-backed model, through the real SDK code against the
fake server: the exporter reads the test split through the model's feature view (the registry
reaches its project's feature store), and the graph and its check are uploaded into the version,
hashed in its manifest, as on the local registry."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from feature_views import get_use_case
from fstrain.kernel.errors import IntegrityError
from pipelines.feature import FeaturePipelineConfig
from pipelines.feature import run as run_features
from pipelines.training import TrainingPipelineConfig
from pipelines.training import run as run_training
from pipelines.training_dataset import TrainingDatasetConfig
from pipelines.training_dataset import run as run_training_dataset

PROJECT = "fstrain_ci"


@pytest.mark.slow  # real training, and hsml polls while registering (~20 s)
def test_export_onnx_of_a_hopsworks_model_attaches_into_the_version(hops_cluster, tmp_path):
    cluster, project = hops_cluster
    run_features(project, FeaturePipelineConfig(use_case="adult", sample=400))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # stratified → seeded random (declared)
        td = run_training_dataset(project, TrainingDatasetConfig(use_case="adult", seed=1))
    ref = run_training(project, TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version,
        model={"model": "lightgbm", "params": {"n_estimators": 20}}))
    model = project.get_model_registry().get_model(ref.name, ref.version)

    with pytest.raises(IntegrityError, match="nothing was attached"):
        model.export("onnx", atol=0.0)
    assert not any(f["path"].startswith("onnx/") for f in model.manifest["files"])
    check = model.export("onnx")
    assert check["passed"] and check["split"] == "test" and check["kind"] == "lightgbm"
    fv = project.get_feature_store().get_feature_view(get_use_case("adult").feature_view_name)
    assert check["rows"] == len(fv.get_train_validation_test_split(td.version)[2])

    files = (cluster.server.state.hopsfs / "Projects" / PROJECT / "Models" / ref.name
             / str(ref.version) / "Files")
    assert json.loads((files / "onnx" / "check.json").read_text())["sha256"] == check["sha256"]
    fresh = project.get_model_registry().get_model(ref.name, ref.version)
    entries = {f["path"]: f for f in fresh.manifest["files"]}
    assert entries["onnx/model.onnx"]["sha256"] == check["sha256"]
    folder = Path(fresh.download(tmp_path / "dl"))  # verifies every file, the graph too
    assert (folder / "onnx" / "model.onnx").stat().st_size > 0
