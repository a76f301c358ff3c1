"""Every use case end to end through the real SDK: feature stage, view, default split, read.

``pipelines/feature.py`` then ``pipelines/training_dataset.py`` run against the fake cluster
(the real ``hsfs`` code builds every request); the split is read back with the SDK's own
reader (dataset API downloads of the parquet files the server-side job wrote).
"""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from feature_views import get_use_case
from pipelines.feature import FeaturePipelineConfig
from pipelines.feature import run as run_features
from pipelines.training_dataset import TrainingDatasetConfig
from pipelines.training_dataset import run as run_training_dataset

SMALL = {"adult": {"sample": 300}, "flights": {"sample": 600},
         "mnist": {"sample": 60}, "ccfraud": {"n_transactions": 3000}, "airquality": {}}
#: relative time windows need an anchor on Hopsworks (the data's end cannot be read there)
ANCHOR = {"flights": "2014-01-01", "ccfraud": "2024-07-01", "airquality": "1973-10-01"}


@pytest.mark.parametrize("use_case", sorted(SMALL))
def test_use_case_view_default_split_and_read_back(hops_cluster, use_case):
    cluster, project = hops_cluster
    run_features(project, FeaturePipelineConfig(use_case=use_case, **SMALL[use_case]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # stratified → seeded random (declared)
        ref = run_training_dataset(project, TrainingDatasetConfig(
            use_case=use_case, anchor=ANCHOR.get(use_case)))

    spec = get_use_case(use_case)
    fv = project.get_feature_store().get_feature_view(spec.feature_view_name,
                                                      spec.feature_view_version)
    x_train, x_val, x_test, y_train, y_val, y_test = fv.get_train_validation_test_split(
        ref.version)
    sizes = [len(x_train), len(x_val), len(x_test)]
    assert all(n > 0 for n in sizes), sizes
    assert [len(y_train), len(y_val), len(y_test)] == sizes
    assert list(y_train.columns) == fv.labels
    assert not y_train.isna().any().any()  # ccfraud: missing labels filled client-side with 0
    assert not set(fv.labels) & set(x_train.columns)
    # the root group's selected key and event time are no features (the SDK keeps them in X;
    # the local store, and so fstrain on both backends, returns them only when asked)
    assert fv.root_key_columns and not set(fv.root_key_columns) & set(x_train.columns)
    assert list(x_train.columns) == fv.feature_names
    with_keys = fv.get_train_validation_test_split(ref.version, primary_key=True,
                                                   event_time=True)[0]
    # (a root key the view does not select comes back too, under the SDK's fully qualified
    # name <project>_<group>_<version>_<key>, e.g. airquality's city)
    assert list(with_keys.columns)[:len(fv.root_key_columns)] == fv.root_key_columns
    assert set(fv.feature_names) < set(with_keys.columns)
    # a label filled after the LEFT join is an integer again, as on the local store
    assert all(y_train[c].dtype.kind in "iub" for c in fv.label_fill_values), y_train.dtypes

    view = cluster.server.state.view(spec.feature_view_name, spec.feature_view_version)
    td = view.training_datasets[ref.version].body
    assert td["rows"] == dict(zip(["train", "validation", "test"], sizes, strict=True))
    if spec.split["split"] == "time":  # bounds reached the server as epoch milliseconds
        test = next(s for s in td["splits"] if s["name"] == "test")
        assert test["endTime"] == int(pd.Timestamp(ANCHOR[use_case], tz="UTC").timestamp() * 1000)
    # the adapter's lineage tag reached the server through the SDK, with the seed it drew
    record = view.training_datasets[ref.version].tags["fstrain_training_dataset"]
    assert record["seed"] == td["seed"]
