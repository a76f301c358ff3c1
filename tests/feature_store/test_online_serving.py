"""Feature vectors on the embedded store (issue 33 item 5): online-enabled groups, the latest
committed row per primary key, the view's transformations, and the SDK's answers for keys with
no row and for wrong keys."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError, NotFoundError

T0 = pd.Timestamp("2024-01-01", tz="UTC")


@pytest.fixture
def online(fs):
    """An online-enabled transactions group joined to an online-enabled profile group, and a
    view over them with a label and a label encoder; training dataset version 1 exists."""
    tx = fs.create_feature_group("tx", version=1, primary_key=["cc_num"], event_time="ts",
                                 online_enabled=True)
    tx.insert(pd.DataFrame({
        "cc_num": [1, 1, 2, 3], "amount": [10.0, 20.0, 30.0, 40.0],
        "cat": ["a", "b", "a", "c"],
        "ts": T0 + pd.to_timedelta([0, 5, 1, 2], unit="h"), "fraud": [0, 1, 0, 1],
    }))
    profile = fs.create_feature_group("profile", version=1, primary_key=["cc_num"],
                                      online_enabled=True)
    profile.insert(pd.DataFrame({"cc_num": [1, 2], "gender": ["F", "M"]}))
    from feature_store.transformations import label_encoder

    fv = fs.create_feature_view(
        "fraud", query=tx.select_all().join(profile.select(["gender"])), labels=["fraud"],
        transformation_functions=[label_encoder("cat")])
    fv.create_training_data(seed=1)
    return fs, tx, profile, fv


def test_online_enabled_is_kept_with_the_group(online):
    fs, *_ = online
    assert fs.get_feature_group("tx", 1).online_enabled is True
    fs.create_feature_group("off", version=1, primary_key=["k"]).insert(pd.DataFrame({"k": [1]}))
    assert fs.get_feature_group("off", 1).online_enabled is False
    with pytest.raises(InvalidArgumentError, match="online_enabled must be True or False"):
        fs.create_feature_group("bad", version=1, primary_key=["k"], online_enabled="yes")


def test_vector_is_the_latest_row_per_key_untransformed_in_view_order(online):
    *_, fv = online
    fv.init_serving(training_dataset_version=1)
    vector = fv.get_feature_vector({"cc_num": 1}, transform=False)
    # the row with the latest event time (20.0 at +5h), the label left out, keys kept
    assert vector == [1, 20.0, "b", (T0 + pd.Timedelta(hours=5)).to_pydatetime(), "F"]


def test_a_newer_row_is_served_at_the_next_call(online):
    _, tx, _, fv = online
    fv.init_serving(1)
    assert fv.get_feature_vector({"cc_num": 2}, transform=False)[1] == 30.0
    tx.insert(pd.DataFrame({"cc_num": [2], "amount": [99.0], "cat": ["c"],
                            "ts": [T0 + pd.Timedelta(hours=9)], "fraud": [0]}))
    assert fv.get_feature_vector({"cc_num": 2}, transform=False)[1] == 99.0


def test_transformations_use_the_init_serving_versions_statistics(online):
    *_, fv = online
    fv.init_serving(training_dataset_version=1)
    vector = fv.get_feature_vector({"cc_num": 1}, return_type="pandas")
    assert list(vector.columns) == ["cc_num", "amount", "ts", "gender", "label_encoder_cat_"]
    X, _ = fv.get_training_data(1, primary_key=True)
    codes = dict(zip(fv.get_batch_data(transformed=False)["cat"],
                     fv.get_batch_data()["label_encoder_cat_"], strict=True))
    assert vector["label_encoder_cat_"].iloc[0] == codes["b"]
    assert "label_encoder_cat_" in X.columns
    # transform() turns an untransformed vector into the same transformed one
    raw = fv.get_feature_vector({"cc_num": 1}, transform=False)
    assert fv.transform(raw) == fv.get_feature_vector({"cc_num": 1})


def test_serving_without_init_defaults_to_version_1_with_the_sdks_warning(online):
    *_, fv = online
    with pytest.warns(UserWarning, match="Defaulting to version 1"):
        assert fv.get_feature_vector({"cc_num": 2}) is not None


def test_a_key_with_no_row_gives_none_and_no_vector_in_a_batch(online):
    *_, fv = online
    fv.init_serving(1)
    assert fv.get_feature_vector({"cc_num": 42}) is None
    frame = fv.get_feature_vector({"cc_num": 42}, return_type="pandas")
    assert frame.shape == (1, 5) and frame.isna().all(axis=None)
    vectors = fv.get_feature_vectors([{"cc_num": 42}, {"cc_num": 2}, {"cc_num": 1}],
                                     transform=False)
    assert [v[0] for v in vectors] == [2, 1]
    missing = fv.get_feature_vector({"cc_num": 42}, allow_missing=True, transform=False)
    assert missing == [42, None, None, None, None]  # the key fills its own slot, as the SDK


def test_a_key_missing_from_a_joined_group_is_an_error_unless_allowed(online):
    *_, fv = online
    fv.init_serving(1)
    with pytest.raises(NotFoundError, match=r"feature view 'fraud' v1.*\['gender'\]"):
        fv.get_feature_vector({"cc_num": 3})
    assert fv.get_feature_vector({"cc_num": 3}, allow_missing=True, transform=False)[-1] is None
    passed = fv.get_feature_vector({"cc_num": 3}, passed_features={"gender": "X"},
                                   transform=False)
    assert passed[-1] == "X"


def test_wrong_key_names_and_values_are_clear_errors(online):
    *_, fv = online
    fv.init_serving(1)
    with pytest.raises(InvalidArgumentError,
                       match=r"feature view 'fraud' v1: 'cc_nm' \(value 1\) is not a serving "
                             r"key.*Did you mean 'cc_num'"):
        fv.get_feature_vector({"cc_nm": 1})
    with pytest.raises(InvalidArgumentError, match=r"serving key 'cc_num' holds int64.*'abc'"):
        fv.get_feature_vector({"cc_num": "abc"})
    with pytest.raises(InvalidArgumentError, match="passed_features"):
        fv.get_feature_vector({"cc_num": 1}, passed_features={"nope": 1})


def test_return_types_follow_the_sdk(online):
    *_, fv = online
    fv.init_serving(1)
    keys = [{"cc_num": 1}, {"cc_num": 2}]
    assert isinstance(fv.get_feature_vectors(keys), list)
    array = fv.get_feature_vectors(keys, return_type="numpy", transform=False)
    assert isinstance(array, np.ndarray) and array.shape == (2, 5)
    frame = fv.get_feature_vectors(keys, return_type="pandas")
    assert frame["cc_num"].tolist() == [1, 2]
    with pytest.raises(InvalidArgumentError, match="return_type must be one of"):
        fv.get_feature_vector({"cc_num": 1}, return_type="dict")


def test_entry_is_the_sdks_deprecated_alias(online):
    *_, fv = online
    fv.init_serving(1)
    with pytest.warns(DeprecationWarning, match="entry"):
        assert fv.get_feature_vector(entry={"cc_num": 1}) == fv.get_feature_vector({"cc_num": 1})
    with pytest.raises(InvalidArgumentError, match="both serving_keys and entry"):
        fv.get_feature_vectors([{"cc_num": 1}], entry=[{"cc_num": 1}])


def test_cluster_only_options_are_refused_by_name(online):
    *_, fv = online
    for call, kwargs in ((fv.init_serving, {"external": True}),
                         (fv.init_serving, {"init_rest_client": True}),
                         (fv.get_feature_vector, {"force_rest_client": True}),
                         (fv.get_feature_vector, {"timeout": 1.0}),
                         (fv.get_feature_vectors, {"logging_data": True})):
        name = next(iter(kwargs))
        with pytest.raises(InvalidArgumentError, match=rf"{name}=.*Drop {name}="):
            if call is fv.init_serving:
                call(1, **kwargs)
            else:
                call([{"cc_num": 1}] if call is fv.get_feature_vectors else {"cc_num": 1}, **kwargs)


def test_a_view_over_an_offline_group_is_refused_naming_it(fs):
    off = fs.create_feature_group("off", version=1, primary_key=["k"])
    off.insert(pd.DataFrame({"k": [1], "x": [1.0]}))
    fv = fs.create_feature_view("offv", query=off.select_all())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InvalidArgumentError, match=r"'off' v1 is not.*online_enabled=True"):
            fv.get_feature_vector({"k": 1})


def test_vectors_logged_as_lists_are_named_like_the_served_vectors(online):
    *_, fv = online
    fv.init_serving(1)
    raw = fv.get_feature_vector({"cc_num": 1}, transform=False)
    fv.log(untransformed_features=[raw], transformed_features=[fv.transform(raw)],
           predictions=[[1]])
    assert fv.read_log()[["cc_num", "amount", "gender"]].values.tolist() == [[1, 20.0, "F"]]
    assert "label_encoder_cat_" in fv.read_log(transformed=True).columns


def test_inference_helpers_are_served_per_key_in_the_sdks_shapes(fs):
    tx = fs.create_feature_group("tx", version=1, primary_key=["cc_num"], event_time="ts",
                                 online_enabled=True)
    tx.insert(pd.DataFrame({"cc_num": [1, 1, 2], "amount": [10.0, 20.0, 30.0],
                            "city": ["Oslo", "Bergen", "Rome"],
                            "ts": T0 + pd.to_timedelta([0, 5, 1], unit="h"), "fraud": [0, 1, 0]}))
    fv = fs.create_feature_view("helped", query=tx.select_all(), labels=["fraud"],
                                inference_helper_columns=["city"])
    fv.create_training_data(seed=1)
    fv.init_serving(1)
    assert "city" not in fv.get_feature_vector({"cc_num": 1}, return_type="pandas").columns
    one = fv.get_inference_helper({"cc_num": 1})  # the latest row's, as vectors
    assert list(one.columns) == ["city"] and one["city"].tolist() == ["Bergen"]
    assert fv.get_inference_helper({"cc_num": 2}, return_type="dict") == {"city": "Rome"}
    batch = fv.get_inference_helpers([{"cc_num": 2}, {"cc_num": 9}, {"cc_num": 1}])
    assert batch["city"].tolist() == ["Rome", "Bergen"]  # no row for key 9: left out
    assert fv.get_inference_helpers([{"cc_num": 1}], return_type="dict") == [{"city": "Bergen"}]
    with pytest.raises(NotFoundError, match="serving keys {'cc_num': 9}"):
        fv.get_inference_helper({"cc_num": 9})
    for call, match in ((lambda: fv.get_inference_helper({"cc_num": 1}, return_type="list"),
                         "return_type must be one of"),
                        (lambda: fv.get_inference_helper({"card": 1}), "'card'.*not a serving key"),
                        (lambda: fv.get_inference_helpers({"cc_num": 1}), "takes a list"),
                        (lambda: fv.get_inference_helper({"cc_num": 1}, external=True),
                         "external=True")):
        with pytest.raises(InvalidArgumentError, match=match):
            call()
    plain = fs.create_feature_view("plain", query=tx.select_all(), labels=["fraud"])
    with pytest.raises(InvalidArgumentError, match="no inference_helper_columns"):
        plain.get_inference_helpers([{"cc_num": 1}])
