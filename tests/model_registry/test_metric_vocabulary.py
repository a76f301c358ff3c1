"""One metric vocabulary: `<split>_<metric>`, bare names meaning the validation value."""

from __future__ import annotations

import pytest

from model_registry.metric_names import metric_key, registry_metrics


@pytest.mark.parametrize("given,key", [
    ("auc", "validation_roc_auc"), ("roc_auc", "validation_roc_auc"),
    ("logloss", "validation_log_loss"), ("val_auc", "validation_roc_auc"),
    ("val_pr_auc", "validation_pr_auc"), ("test_roc_auc", "test_roc_auc"),
    ("validation_f1", "validation_f1"), ("rmse", "validation_rmse"),
])
def test_metric_keys(given, key):
    assert metric_key(given) == key


def test_trainer_metrics_are_registered_with_their_split():
    got = registry_metrics({"auc": 0.9, "logloss": 0.2, "n": 100.0, "pr_auc": 0.5})
    assert got == {"validation_roc_auc": 0.9, "validation_log_loss": 0.2, "validation_pr_auc": 0.5}


def test_get_best_model_understands_bare_and_trainer_names(tmp_path):
    from fstrain.project import Project

    mr = Project(tmp_path / "store").get_model_registry()
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.txt").write_text("x")
    for auc in (0.7, 0.9, 0.8):
        mr.python.create_model("m", metrics={"validation_roc_auc": auc,
                                             "validation_log_loss": 1 - auc}).save(tmp_path / "m")
    assert mr.get_best_model("m", "roc_auc").version == 2
    assert mr.get_best_model("m", "auc", "max").version == 2
    assert mr.get_best_model("m", "validation_roc_auc").version == 2
    assert mr.get_best_model("m", "logloss", "min").version == 2
    from model_registry.errors import UnknownMetricError

    with pytest.raises(UnknownMetricError, match="'test_roc_auc'.*validation_log_loss, "
                                                 "validation_roc_auc.*scorecards"):
        mr.get_best_model("m", "test_roc_auc")
