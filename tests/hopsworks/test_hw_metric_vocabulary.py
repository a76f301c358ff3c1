"""The Hopsworks registry's get_best_model speaks fstrain's metric vocabulary."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_hw_adapter import FakeProject, _registry, _saved_model  # noqa: E402


def test_bare_and_trainer_names_ask_hsml_for_the_validation_metric(tmp_path):
    sdk_project = FakeProject()
    saved = _saved_model(tmp_path, sdk_project)
    asked: list[str] = []

    def get_best_model(name, metric, direction):
        asked.append(metric)
        return sdk_project.mr.store.get(saved.version) if metric == "validation_roc_auc" else None

    sdk_project.mr.get_best_model = get_best_model
    registry = _registry(sdk_project, tmp_path / "client")
    assert registry.get_best_model("m", "auc", "max").version == saved.version
    assert registry.get_best_model("m", "roc_auc").version == saved.version
    assert asked == ["validation_roc_auc", "validation_roc_auc"]
    assert registry.get_best_model("m", "custom_score") is None
    assert asked[-2:] == ["validation_custom_score", "custom_score"]  # then the name as given
