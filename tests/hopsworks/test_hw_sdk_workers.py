"""``fstrain train --workers 2`` of an ``mlp`` on a Hopsworks-backed project, through the real
SDK code against the fake server: a Hopsworks version hands out no split files to stream
(``fv.streams_split_files(v)`` is False), so the run trains from the frames on Ray Train workers
and registers through ``hsml``; ``torch.streaming: true`` is refused with the streaming option's
``ConfigError`` before any training."""

from __future__ import annotations

import warnings

import pytest

from feature_views import get_use_case
from fstrain.kernel.errors import ConfigError
from pipelines.feature import FeaturePipelineConfig
from pipelines.feature import run as run_features
from pipelines.training import TrainingPipelineConfig
from pipelines.training import run as run_training
from pipelines.training_dataset import TrainingDatasetConfig
from pipelines.training_dataset import run as run_training_dataset

MLP = {"model": "mlp", "params": {}, "torch": {"epochs": 2, "batch_size": 64}}


@pytest.mark.slow  # Ray Train with 2 workers, and hsml polls while registering
def test_workers_train_an_mlp_from_frames_on_hopsworks(hops_cluster):
    """Regression: the run asked the view for streamed reads, which Hopsworks refuses
    (InvalidArgumentError), instead of falling back to frames."""
    _, project = hops_cluster
    run_features(project, FeaturePipelineConfig(use_case="adult", sample=400))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # stratified → seeded random (declared)
        td = run_training_dataset(project, TrainingDatasetConfig(use_case="adult", seed=1))
    spec = get_use_case("adult")
    fv = project.get_feature_store().get_feature_view(spec.feature_view_name,
                                                      spec.feature_view_version)
    assert fv.streams_split_files(td.version) is False

    streaming = {**MLP, "torch": {**MLP["torch"], "streaming": True}}
    with pytest.raises(ConfigError, match="hands out no split files.*torch.streaming: false"):
        run_training(project, TrainingPipelineConfig(
            use_case="adult", training_dataset_version=td.version, model=streaming))

    ref = run_training(project, TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version, workers=2, model=MLP))
    model = project.get_model_registry().get_model(ref.name, ref.version)
    assert model.framework == "torch"
    notes = model.training_config["nondeterminism"]
    assert any("DDP over 2 Ray Train workers" in note for note in notes), notes
    assert model.training_metrics["validation_roc_auc"] > 0.5, model.training_metrics
