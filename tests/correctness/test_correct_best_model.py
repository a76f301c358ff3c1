"""get_best_model: a model without versions is None (as hsml), with a warning naming the models
that exist; a metric no version records is a typo or a metric the registry does not keep, so it
raises an UnknownMetricError naming the recorded metrics (a demanding user must not mistake it
for "no version qualifies")."""

from __future__ import annotations

import warnings

import pytest

from fstrain.kernel.errors import FeatureStoreError, NotFoundError
from model_registry.errors import UnknownMetricError


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
def test_unknown_model_warns_with_the_models_and_returns_none(registry, name):
    with pytest.warns(UserWarning, match=rf"model '{name}' does not exist.*models: fraud"):
        assert registry.get_best_model(name, "roc_auc") is None


@pytest.mark.parametrize("metric", ["accuracy", "roc_aucc", "validation_f1", "test_roc_auc",
                                    "val_auc_typo"])
def test_a_metric_no_version_records_raises_naming_the_recorded_ones(registry, metric):
    with pytest.raises(UnknownMetricError, match=rf"'{metric}'.*recorded metrics: "
                                                 r"validation_roc_auc") as caught:
        registry.get_best_model("fraud", metric)
    assert isinstance(caught.value, NotFoundError) and isinstance(caught.value, FeatureStoreError)
    assert "model 'fraud'" in str(caught.value)


def test_a_close_typo_gets_a_suggestion(registry):
    with pytest.raises(UnknownMetricError, match="Did you mean 'validation_roc_auc'"):
        registry.get_best_model("fraud", "validation_roc_aucc")


def test_known_metric_is_silent_and_filters_still_give_none(registry):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert registry.get_best_model("fraud", "roc_auc").version == 2
        assert registry.get_best_model("fraud", "auc", "min").version == 1
        assert registry.get_best_model("fraud", "roc_auc", validated_only=True) is None
