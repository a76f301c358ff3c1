"""get_best_model names what exists when the model or the metric is unknown (and still returns
None for them, as hsml does)."""

from __future__ import annotations

import warnings

import pytest


@pytest.fixture
def registry(project, tmp_path):
    mr = project.get_model_registry()
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "w.txt").write_text("x")
    for auc in (0.7, 0.9):
        mr.python.create_model("fraud", metrics={"validation_roc_auc": auc}).save(folder)
    return mr


@pytest.mark.parametrize("name", ["fraudd", "other"])
def test_unknown_model_warns_with_the_models(registry, name):
    with pytest.warns(UserWarning, match=rf"model '{name}' does not exist.*models: fraud"):
        assert registry.get_best_model(name, "roc_auc") is None


@pytest.mark.parametrize("metric", ["accuracy", "roc_aucc", "validation_f1"])
def test_unknown_metric_warns_with_the_recorded_metrics(registry, metric):
    with pytest.warns(UserWarning, match=rf"'{metric}'.*recorded metrics: validation_roc_auc"):
        assert registry.get_best_model("fraud", metric) is None


def test_known_metric_is_silent(registry):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert registry.get_best_model("fraud", "test_roc_auc") is None
        assert registry.get_best_model("fraud", "roc_auc").version == 2
