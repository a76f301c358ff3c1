"""The Hopsworks backend refuses ``spine=`` by name, before any SDK call: the SDK's Python
engine cannot read training or batch data from a spine (it documents spines as Spark-only)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from feature_store.hopsworks.feature_view import HopsworksFeatureView
from fstrain.kernel.errors import InvalidArgumentError

CALLS = {
    "create_training_data": {},
    "create_train_test_split": {"test_size": 0.2},
    "create_train_validation_test_split": {"validation_size": 0.2, "test_size": 0.2},
    "train_validation_test_split": {"train_end": "2024-01-01"},
    "get_batch_data": {},
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_spine_is_refused_by_name_before_the_sdk_is_called(call):
    sdk_view = SimpleNamespace(name="fraud", version=1)  # any SDK call would fail differently
    fv = HopsworksFeatureView(sdk_view, store=None)
    spine = pd.DataFrame({"cc_num": [1], "ts": pd.to_datetime(["2024-01-01"], utc=True)})
    with pytest.raises(InvalidArgumentError,
                       match=rf"feature view 'fraud' v1: {call}\(spine=\.\.\.\).*Python engine"):
        getattr(fv, call)(spine=spine, **CALLS[call])
