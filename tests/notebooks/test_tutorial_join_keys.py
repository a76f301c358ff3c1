"""Joins written as the tutorials write them (no on=) follow the SDK's key rule (issue 22).

credit_scores joins groups whose composite primary keys share one column
(bureaus [sk_id_curr, sk_id_bureau] with previous_applications [sk_id_prev, sk_id_curr]): the
keys are the primary-key names both groups share.
"""

from __future__ import annotations

import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError

T0 = pd.Timestamp("2024-01-01", tz="UTC")


@pytest.fixture
def groups(fs):
    bureaus = fs.get_or_create_feature_group("bureaus", version=1,
                                             primary_key=["sk_id_curr", "sk_id_bureau"],
                                             event_time="datetime")
    bureaus.insert(pd.DataFrame({"sk_id_curr": [1, 1, 2], "sk_id_bureau": [10, 11, 12],
                                 "credit_active": ["a", "b", "a"], "target": [0, 1, 0],
                                 "datetime": [T0 + pd.Timedelta(days=d) for d in (5, 6, 7)]}))
    previous = fs.get_or_create_feature_group("previous_applications", version=1,
                                              primary_key=["sk_id_prev", "sk_id_curr"],
                                              event_time="datetime")
    previous.insert(pd.DataFrame({"sk_id_prev": [100, 101], "sk_id_curr": [1, 2],
                                  "amt_annuity": [5.0, 7.0],
                                  "datetime": [T0, T0 + pd.Timedelta(days=1)]}))
    other = fs.get_or_create_feature_group("unrelated", version=1, primary_key=["zzz"])
    other.insert(pd.DataFrame({"zzz": [1], "v": [1.0]}))
    return bureaus, previous, other


def test_composite_keys_join_on_the_primary_key_names_both_share(groups):
    bureaus, previous, _ = groups
    query = bureaus.select_except(["sk_id_bureau"]).join(
        previous.select_except(["sk_id_prev", "sk_id_curr", "datetime"]))
    assert [(j.left_on, j.right_on) for j in query.joins] == [(["sk_id_curr"], ["sk_id_curr"])]
    out = query.read().sort_values("datetime")
    assert out["amt_annuity"].tolist() == [5.0, 5.0, 7.0]


def test_groups_sharing_no_primary_key_name_are_refused_clearly(groups):
    bureaus, _, other = groups
    with pytest.raises(InvalidArgumentError, match="on="):
        bureaus.select_all().join(other.select_all())
