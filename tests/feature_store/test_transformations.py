"""Model-dependent transformations: Hopsworks names, train-only statistics, guards and errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.preprocessing import MinMaxScaler, RobustScaler, StandardScaler

from feature_store.core.transformations import (
    BUILTINS,
    TransformationFunction,
    apply_transformations,
    fit_transformations,
    get_transformation_function,
    label_encoder,
    min_max_scaler,
    one_hot_encoder,
    robust_scaler,
    standard_scaler,
    transformation_from_dict,
    validate_transformations,
)
from fstrain.kernel.errors import (
    ConfigError,
    InvalidArgumentError,
    NotFoundError,
    SchemaMismatchError,
)


@pytest.fixture
def train() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({
        "amount": rng.normal(50, 10, 200),
        "age": rng.integers(18, 90, 200).astype("float64"),
        "cat": rng.choice(["b", "a", "c"], 200),
        "id": np.arange(200),
    })


@pytest.mark.parametrize(
    ("factory", "sk"),
    [(min_max_scaler, MinMaxScaler), (standard_scaler, StandardScaler), (robust_scaler, RobustScaler)],
)
def test_scalers_match_sklearn_fit_on_train_only(train, factory, sk):
    test = pd.DataFrame({"amount": [-1000.0, 0.0, 50.0, 1000.0]})
    tf = factory("amount")
    stats = tf.fit(train["amount"])
    got = tf.transform(test["amount"], stats)
    ref = sk().fit(train[["amount"]].to_numpy()).transform(test[["amount"]].to_numpy())[:, 0]
    assert list(got.columns) == [f"{tf.name}_amount_"]
    np.testing.assert_allclose(got.iloc[:, 0].to_numpy(), ref, rtol=1e-12)


def test_min_max_hand_computed_and_test_values_outside_train_range():
    train = pd.Series([2.0, 4.0, 6.0])
    tf = min_max_scaler("x")
    stats = tf.fit(train)
    assert stats == {"min": 2.0, "max": 6.0}
    out = tf.transform(pd.Series([0.0, 2.0, 5.0, 10.0]), stats)["min_max_scaler_x_"]
    assert out.tolist() == [-0.5, 0.0, 0.75, 2.0]  # outside [0, 1]: train stats, not test's


def test_standard_and_robust_hand_computed():
    s = pd.Series([1.0, 2.0, 3.0, 4.0, 5.0])
    st = standard_scaler("x").fit(s)
    assert st["mean"] == 3.0 and st["std"] == pytest.approx(np.sqrt(2.0))  # population std
    rb = robust_scaler("x").fit(s)
    assert rb == {"p25": 2.0, "p50": 3.0, "p75": 4.0}
    out = robust_scaler("x").transform(pd.Series([3.0, 5.0]), rb)["robust_scaler_x_"]
    assert out.tolist() == [0.0, 1.0]


def test_statistics_come_from_the_fitted_frame_only(train):
    tfs = [standard_scaler("amount")]
    stats = fit_transformations(tfs, train.iloc[:100])
    assert stats["standard_scaler_amount"]["mean"] == pytest.approx(train["amount"].iloc[:100].mean())
    assert stats["standard_scaler_amount"]["mean"] != pytest.approx(train["amount"].mean())


@pytest.mark.parametrize("factory", [min_max_scaler, standard_scaler, robust_scaler])
def test_zero_spread_guard_outputs_zero_and_keeps_nulls(factory):
    tf = factory("x")
    stats = tf.fit(pd.Series([0.1] * 7 + [None]))
    out = tf.transform(pd.Series([0.1, 5.0, None]), stats).iloc[:, 0]
    assert out.iloc[0] == 0.0 and out.iloc[1] == 0.0
    assert np.isnan(out.iloc[2])


def test_scaler_nulls_stay_nan_and_are_excluded_from_stats():
    tf = min_max_scaler("x")
    stats = tf.fit(pd.Series([0.0, None, 10.0]))
    assert stats == {"min": 0.0, "max": 10.0}
    out = tf.transform(pd.Series([None, 5.0]), stats)["min_max_scaler_x_"]
    assert np.isnan(out.iloc[0]) and out.iloc[1] == 0.5


def test_label_encoder_sorted_codes_unseen_and_null_are_minus_one():
    tf = label_encoder("cat")
    stats = tf.fit(pd.Series(["b", "a", None, "c", "a"]))
    assert stats == {"values": ["a", "b", "c"]}
    out = tf.transform(pd.Series(["c", "a", "zzz", None, "b"]), stats)
    assert list(out.columns) == ["label_encoder_cat_"]
    assert out["label_encoder_cat_"].tolist() == [2, 0, -1, -1, 1]
    assert out["label_encoder_cat_"].dtype == np.int64


def test_label_encoder_integer_values_match_float_column_with_nulls():
    tf = label_encoder("k")
    stats = tf.fit(pd.Series([3, 1, 2]))
    json.dumps(stats)
    out = tf.transform(pd.Series([1.0, np.nan, 3.0, 7.0]), stats)["label_encoder_k_"]
    assert out.tolist() == [0, -1, 2, -1]


def test_one_hot_names_mapping_and_unseen_all_false():
    tf = one_hot_encoder("cat")
    stats = tf.fit(pd.Series(["b", "a", "c", "a"]))
    assert stats["values"] == ["a", "b", "c"]
    assert stats["columns"] == {"one_hot_encoder_cat_0": "a", "one_hot_encoder_cat_1": "b",
                                "one_hot_encoder_cat_2": "c"}
    assert tf.output_names(stats) == ["one_hot_encoder_cat_0", "one_hot_encoder_cat_1",
                                      "one_hot_encoder_cat_2"]
    out = tf.transform(pd.Series(["c", "unseen", None], index=[10, 11, 12]), stats)
    assert list(out.index) == [10, 11, 12]
    assert out.dtypes.eq(bool).all()
    assert out.loc[10].tolist() == [False, False, True]
    assert out.loc[11].tolist() == [False, False, False]
    assert out.loc[12].tolist() == [False, False, False]


def test_apply_drops_inputs_appends_outputs_in_order(train):
    tfs = [standard_scaler("amount"), one_hot_encoder("cat"), label_encoder("id")]
    stats = fit_transformations(tfs, train)
    assert set(stats) == {"standard_scaler_amount", "one_hot_encoder_cat", "label_encoder_id"}
    json.dumps(stats)  # JSON-able, stored with the training dataset
    test = train.iloc[:5].copy()
    out = apply_transformations(tfs, test, stats)
    assert list(out.columns) == ["age", "standard_scaler_amount_", "one_hot_encoder_cat_0",
                                 "one_hot_encoder_cat_1", "one_hot_encoder_cat_2",
                                 "label_encoder_id_"]
    assert out.index.equals(test.index)
    assert out["age"].equals(test["age"])


def test_apply_missing_input_column_names_feature(train):
    tfs = [standard_scaler("amount")]
    stats = fit_transformations(tfs, train)
    with pytest.raises(SchemaMismatchError, match=r"'amount'.*Did you mean 'amount_'"):
        apply_transformations(tfs, train.rename(columns={"amount": "amount_"}), stats)


def test_apply_without_stats_says_fit_first(train):
    with pytest.raises(NotFoundError, match=r"standard_scaler\('amount'\).*fit_transformations"):
        apply_transformations([standard_scaler("amount")], train, {})


def test_transform_with_wrong_stats_names_missing_keys():
    with pytest.raises(InvalidArgumentError, match=r"missing \['mean', 'std'\]"):
        standard_scaler("x").transform(pd.Series([1.0]), {"min": 0.0, "max": 1.0})


def test_dict_round_trip_and_get_builtin():
    for name, factory in BUILTINS.items():
        tf = factory("f")
        d = tf.to_dict()
        assert json.loads(json.dumps(d)) == {"name": name, "feature": "f", "params": {}}
        assert transformation_from_dict(d) == tf
        assert get_transformation_function(name)("f") == tf
    assert hash(standard_scaler("a")) == hash(standard_scaler("a"))


def test_unknown_builtin_did_you_mean():
    with pytest.raises(NotFoundError, match=r"'standard_scalar' does not exist.*Did you mean 'standard_scaler'"):
        get_transformation_function("standard_scalar")
    with pytest.raises(NotFoundError, match="Did you mean 'label_encoder'"):
        transformation_from_dict({"name": "label_encodr", "feature": "x"})


def test_from_dict_rejects_malformed():
    with pytest.raises(ConfigError, match=r"missing keys \['feature'\]"):
        transformation_from_dict({"name": "min_max_scaler"})
    with pytest.raises(ConfigError, match=r"unknown keys \['kind'\]"):
        transformation_from_dict({"name": "min_max_scaler", "feature": "x", "kind": 1})


def test_validate_feature_must_be_a_column_and_once():
    cols = ["amount", "cat"]
    with pytest.raises(SchemaMismatchError, match=r"'amout' is not a column.*Did you mean 'amount'"):
        validate_transformations([standard_scaler("amout")], cols)
    with pytest.raises(InvalidArgumentError, match=r"'amount' must be transformed at most once"):
        validate_transformations([standard_scaler("amount"), min_max_scaler("amount")], cols)
    with pytest.raises(InvalidArgumentError, match=r"Bind it to a feature: standard_scaler\('column'\)"):
        validate_transformations([standard_scaler], cols)
    assert validate_transformations(iter([label_encoder("cat")]), cols) == [label_encoder("cat")]


def test_scaler_refuses_strings_and_empty_train():
    with pytest.raises(InvalidArgumentError, match=r"'cat' must be numeric.*Got dtype object"):
        standard_scaler("cat").fit(pd.Series(["a", "b"], dtype=object))
    with pytest.raises(InvalidArgumentError, match="no non-null values"):
        min_max_scaler("x").fit(pd.Series([None, None], dtype="float64"))
    with pytest.raises(InvalidArgumentError, match="no non-null values"):
        one_hot_encoder("x").fit(pd.Series([None, None], dtype=object))
    with pytest.raises(InvalidArgumentError, match="must be finite"):
        min_max_scaler("x").fit(pd.Series([1.0, np.inf]))


def test_bad_construction():
    with pytest.raises(InvalidArgumentError, match="feature must be a non-empty column name"):
        standard_scaler("")
    with pytest.raises(NotFoundError, match="Did you mean 'min_max_scaler'"):
        TransformationFunction("minmax_scaler", "x")


def test_one_hot_output_names_need_stats():
    with pytest.raises(InvalidArgumentError, match="Pass the stats returned by fit"):
        one_hot_encoder("cat").output_names()
    assert standard_scaler("amount").output_names() == ["standard_scaler_amount_"]
