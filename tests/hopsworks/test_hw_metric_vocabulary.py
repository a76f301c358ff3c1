"""The Hopsworks registry's get_best_model speaks fstrain's metric vocabulary and answers as the
local registry does: None for a model without versions, UnknownMetricError for a metric no
version records."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_hw_adapter import FakeProject, _registry, _saved_model  # noqa: E402

from model_registry.errors import UnknownMetricError  # noqa: E402


def test_bare_and_trainer_names_ask_hsml_for_the_recorded_key(tmp_path):
    sdk_project = FakeProject()
    saved = _saved_model(tmp_path, sdk_project)
    sdk_model = sdk_project.mr.store[saved.version]
    sdk_model.training_metrics = {"validation_roc_auc": 0.9, "custom_score": 3.0}
    asked: list[str] = []

    def get_best_model(name, metric, direction):
        asked.append(metric)
        return sdk_model

    sdk_project.mr.get_best_model = get_best_model
    sdk_project.mr.get_models = lambda name: [sdk_model] if name == "m" else []
    registry = _registry(sdk_project, tmp_path / "client")
    assert registry.get_best_model("m", "auc", "max").version == saved.version
    assert registry.get_best_model("m", "roc_auc").version == saved.version
    assert registry.get_best_model("m", "custom_score").version == saved.version
    assert asked == ["validation_roc_auc", "validation_roc_auc", "custom_score"]
    with pytest.raises(UnknownMetricError, match="'f1'.*custom_score, validation_roc_auc"):
        registry.get_best_model("m", "f1")
    with pytest.warns(UserWarning, match="'other' has no version"):
        assert registry.get_best_model("other", "auc") is None
    assert len(asked) == 3  # neither the unknown metric nor the unknown model asked for a best
