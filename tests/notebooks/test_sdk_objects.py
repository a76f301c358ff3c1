"""The embedded store accepts what Hopsworks notebooks pass it: the SDK's own objects.

Transformation functions from ``hopsworks.hsfs.builtin_transformations`` and ``@udf``, the SDK's
``hsfs`` expectation suites, epoch-millisecond event times, joined event times, lineage from
``create_model(feature_view=fv)``, and stable row order (issue 22).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hopsworks.hsfs.builtin_transformations import (
    label_encoder,
    log_transform,
    one_hot_encoder,
    standard_scaler,
)
from hsfs.hopsworks_udf import udf
from hsfs.transformation_statistics import TransformationStatistics

from fstrain.kernel.errors import (
    InvalidArgumentError,
    NotFoundError,
    SchemaMismatchError,
)

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _ms(hours: float) -> int:
    return int(T0.value // 1_000_000 + hours * 3_600_000)


@udf(float, drop=["amount"])
def centered(amount: pd.Series,
             statistics=TransformationStatistics("amount")) -> pd.Series:  # noqa: B008
    # the SDK reads the statistics argument's default to know which features need statistics
    return amount - statistics.amount.mean


@udf([float, float], mode="pandas")
def sum_and_diff(a, b):
    return pd.DataFrame({"s": a + b, "d": a - b})


@udf(float, mode="python")
def doubled(x):
    return x * 2.0


@pytest.fixture
def tx(fs):
    rng = np.random.default_rng(3)
    n = 60
    fg = fs.get_or_create_feature_group("tx", version=1, primary_key=["tid"], event_time="ts")
    fg.insert(pd.DataFrame({
        "tid": np.arange(n), "cat": rng.choice(["a", "b", "c"], n),
        "amount": rng.gamma(2.0, 10.0, n), "fee": rng.random(n),
        "ts": T0 + pd.to_timedelta(np.arange(n), unit="h"), "y": rng.integers(0, 2, n),
    }))
    return fg


# -- transformation functions -----------------------------------------------------------------


def test_sdk_builtins_map_onto_ours_with_the_sdks_output_names(fs, tx):
    fv = fs.create_feature_view("v", query=tx.select_all(), labels=["y"],
                                transformation_functions=[label_encoder("cat"),
                                                          standard_scaler("amount"),
                                                          standard_scaler("fee")])
    X_train, _, _, _ = fv.train_test_split(test_size=0.25, seed=1)
    assert list(X_train.columns) == ["label_encoder_cat_", "standard_scaler_amount_",
                                     "standard_scaler_fee_"]
    keys = fv.get_train_test_split(1, primary_key=True)[0]["tid"]
    train = tx.read().set_index("tid").loc[keys]
    mean, std = train["amount"].mean(), train["amount"].std(ddof=0)
    np.testing.assert_allclose(X_train["standard_scaler_amount_"],
                               ((train["amount"] - mean) / std).to_numpy())
    assert set(X_train["label_encoder_cat_"]) <= {0, 1, 2}
    # persisted: a fresh handle rebuilds the same transformations
    again = fs.get_feature_view("v", 1)
    assert [t.key for t in again.transformation_functions] == [t.key for t in fv.transformation_functions]


def test_one_hot_encoder_from_the_sdk_names_columns_by_sorted_value(fs, tx):
    fv = fs.create_feature_view("oh", query=tx.select(["tid", "cat", "y"]), labels=["y"],
                                transformation_functions=[one_hot_encoder("cat")])
    X, _ = fv.training_data()
    assert list(X.columns) == [f"one_hot_encoder_cat_{i}" for i in range(3)]
    assert X.sum(axis=1).eq(1).all()


def test_other_sdk_builtins_run_the_sdks_own_code(fs, tx):
    fv = fs.create_feature_view("lg", query=tx.select(["tid", "amount", "y"]), labels=["y"],
                                transformation_functions=[log_transform("amount")])
    X, _ = fv.training_data()
    raw = tx.read().sort_values("tid")
    assert list(X.columns) == ["log_transform_amount_"]
    np.testing.assert_allclose(X["log_transform_amount_"], np.log(raw["amount"]))


def test_udf_with_statistics_is_fitted_on_the_train_split(fs, tx):
    fv = fs.create_feature_view("u", query=tx.select(["tid", "amount", "fee", "y"]), labels=["y"],
                                transformation_functions=[centered("amount"),
                                                          sum_and_diff("amount", "fee"),
                                                          doubled("fee")])
    X_train, X_test, _, _ = fv.train_test_split(test_size=0.5, seed=4, primary_key=True)
    raw = tx.read().set_index("tid")
    train_mean = raw.loc[X_train["tid"], "amount"].mean()
    assert abs(train_mean - raw["amount"].mean()) > 1e-9  # a split-dependent statistic
    np.testing.assert_allclose(X_test["centered_amount_"],
                               raw.loc[X_test["tid"], "amount"].to_numpy() - train_mean)
    # sum_and_diff drops nothing; its two outputs follow the SDK's names
    np.testing.assert_allclose(X_test["sum_and_diff_amount_fee_0"] - X_test["fee"],
                               raw.loc[X_test["tid"], "amount"].to_numpy())
    # a python-mode UDF runs row by row, fee kept (no drop=)
    np.testing.assert_allclose(X_test["doubled_fee_"], 2 * X_test["fee"])
    batch = fs.get_feature_view("u", 1).get_batch_data(primary_key=True)
    np.testing.assert_allclose(batch["centered_amount_"],
                               raw.loc[batch["tid"], "amount"].to_numpy() - train_mean)


def test_transformation_functions_are_listed_as_sdk_objects(fs, tx):
    names = [tf.hopsworks_udf.function_name for tf in fs.get_transformation_functions()]
    assert {"label_encoder", "standard_scaler", "min_max_scaler", "log_transform"} <= set(names)
    scaler = fs.get_transformation_function("min_max_scaler")
    assert type(scaler).__module__ == "hsfs.transformation_function"
    fv = fs.create_feature_view("g", query=tx.select(["tid", "fee", "y"]), labels=["y"],
                                transformation_functions=[scaler("fee")])
    X, _ = fv.training_data()
    assert X["min_max_scaler_fee_"].min() == 0.0 and X["min_max_scaler_fee_"].max() == 1.0
    with pytest.raises(NotFoundError, match="min_max_scaler"):
        fs.get_transformation_function("min_max_scalar")
    with pytest.raises(NotFoundError, match="version 2"):
        fs.get_transformation_function("min_max_scaler", version=2)


def test_udf_on_a_missing_column_is_refused(fs, tx):
    with pytest.raises(SchemaMismatchError, match="'amont'"):
        fs.create_feature_view("bad", query=tx.select_all(), labels=["y"],
                               transformation_functions=[label_encoder("amont")])


def _with_infinities(fs, tx):
    """``tx`` with ±inf in ``amount`` (Hopsworks stores them; the local store refused them)."""
    rows = tx.read()
    rows.loc[rows["tid"] % 5 == 0, "amount"] = np.inf
    rows.loc[rows["tid"] % 7 == 0, "amount"] = -np.inf
    tx.insert(rows)
    return tx


@pytest.mark.parametrize("make", [lambda: standard_scaler("amount"), lambda: centered("amount")],
                         ids=["sdk_standard_scaler", "udf_with_statistics"])
def test_fitting_over_infinities_is_refused_by_name(fs, tx, make):
    """The SDK's scaler (mapped onto fstrain's) and a ``@udf`` declaring statistics would be
    fitted on infinite values (a mean of inf, a deviation of NaN): refused, naming the view,
    the function, the column and the value, and no version is created."""
    _with_infinities(fs, tx)
    fv = fs.create_feature_view("inf_v", query=tx.select(["tid", "amount", "y"]), labels=["y"],
                                transformation_functions=[make()])
    with pytest.raises(InvalidArgumentError,
                       match=r"feature view 'inf_v' v1: Transformation (standard_scaler|centered)"
                             r"\('?amount'?\): feature 'amount' must be finite .*Got -?inf instead"):
        fv.train_test_split(test_size=0.5, seed=1)
    assert fv.get_training_datasets() == []


def test_a_hudi_notebook_with_infinities_runs_on_the_login_swap(fs):
    """Cells as a Hopsworks notebook writes them (a Hudi group, data holding ±inf, an SDK
    encoder): they stopped at the group's creation, then at the insert; they now run."""
    with pytest.warns(UserWarning, match="stored as a Delta table"):
        fg = fs.get_or_create_feature_group("readings", version=1, primary_key=["id"],
                                            event_time="ts", time_travel_format="HUDI")
    fg.insert(pd.DataFrame({"id": [1, 2, 3], "ts": [_ms(1), _ms(2), _ms(3)],
                            "ratio": [0.5, np.inf, -np.inf], "kind": ["a", "b", "a"]}))
    ratio = next(f for f in fg.get_statistics()["features"] if f["feature"] == "ratio")
    assert (ratio["posinf_count"], ratio["neginf_count"], ratio["mean"]) == (1, 1, 0.5)
    fv = fs.create_feature_view("readings_fv", query=fg.select_all(), labels=["kind"],
                                transformation_functions=[label_encoder("ratio")])
    X, _ = fv.training_data()
    assert sorted(X["label_encoder_ratio_"]) == [0, 1, 2]  # -inf, 0.5, inf
    assert fg.time_travel_format == "DELTA"


# -- lineage --------------------------------------------------------------------------------


def test_model_records_the_last_accessed_training_dataset(project, fs, tx, tmp_path):
    fv = fs.create_feature_view("lin", query=tx.select(["tid", "amount", "y"]), labels=["y"],
                                transformation_functions=[standard_scaler("amount")])
    fv.train_test_split(test_size=0.5, seed=1)           # version 1 (trained on)
    mr = project.get_model_registry()
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.txt").write_text("m")
    model = mr.python.create_model("lin_model", feature_view=fv)
    model.save(str(tmp_path / "m"))
    assert model.training_dataset_version == 1
    # a later dataset with other statistics must not change the model's scaling
    tx.insert(pd.DataFrame({"tid": [1000], "cat": ["a"], "amount": [5000.0], "fee": [0.1],
                            "ts": [T0], "y": [1]}))
    fv.training_data()                                     # version 2
    served = mr.get_model("lin_model", 1).get_feature_view()
    stats = fs.get_feature_view("lin", 1).get_training_dataset(1).transformation_statistics
    batch = served.get_batch_data(primary_key=True)
    raw = tx.read().set_index("tid").loc[batch["tid"], "amount"].to_numpy()
    s = stats["standard_scaler_amount"]
    np.testing.assert_allclose(batch["standard_scaler_amount_"], (raw - s["mean"]) / s["std"])


# -- epoch milliseconds ---------------------------------------------------------------------


@pytest.fixture
def ms_groups(fs):
    tx = fs.get_or_create_feature_group("tx_ms", version=1, primary_key=["tid"],
                                        event_time="datetime")
    tx.insert(pd.DataFrame({"tid": [1, 2, 3, 4], "cc": [1, 1, 2, 2], "amount": [1.0, 2.0, 3.0, 4.0],
                            "y": [0, 1, 0, 1],
                            "datetime": [_ms(1), _ms(5), _ms(2), _ms(30)]}))
    agg = fs.get_or_create_feature_group("agg_ms", version=1, primary_key=["cc"],
                                         event_time="datetime")
    agg.insert(pd.DataFrame({"cc": [1, 1, 2], "f": [10.0, 20.0, 30.0],
                             "datetime": [_ms(0), _ms(4), _ms(1)]}))
    return tx, agg


def test_epoch_millisecond_event_time_joins_point_in_time(ms_groups):
    tx, agg = ms_groups
    out = tx.select_all().join(agg.select(["f"]), on=["cc"]).read().set_index("tid")
    assert out["f"].to_dict() == {1: 10.0, 2: 20.0, 3: 30.0, 4: 30.0}
    out = tx.select_all().join(agg.select(["f"]), on=["cc"], lookback="12h").read().set_index("tid")
    assert np.isnan(out.loc[4, "f"]) and out.loc[3, "f"] == 30.0  # 29 h old: outside the window


def test_epoch_millisecond_windows_and_time_splits(fs, ms_groups):
    tx, _ = ms_groups
    window = tx.read(start_time=T0 + pd.Timedelta(hours=1.5), end_time=T0 + pd.Timedelta(hours=10))
    assert sorted(window["tid"]) == [2, 3]
    fv = fs.create_feature_view("msv", query=tx.select(["tid", "amount", "y", "datetime"]),
                                labels=["y"])
    X_train, X_test, _, _ = fv.train_test_split(
        train_start=T0, train_end=T0 + pd.Timedelta(hours=3),
        test_start=T0 + pd.Timedelta(hours=3), test_end=T0 + pd.Timedelta(days=2),
        primary_key=True)
    assert sorted(X_train["tid"]) == [1, 3] and sorted(X_test["tid"]) == [2, 4]


def test_float_event_time_is_still_refused(fs):
    fg = fs.get_or_create_feature_group("bad_et", version=1, primary_key=["id"], event_time="t")
    with pytest.raises(SchemaMismatchError, match="epoch milliseconds"):
        fg.insert(pd.DataFrame({"id": [1], "t": [1.5]}))


# -- joined event time, batch event time, order ---------------------------------------------


def test_joined_groups_selected_event_time_is_kept(fs, ms_groups):
    tx, agg = ms_groups
    query = tx.select(["amount", "y"]).join(agg.select_all(include_primary_key=False), on=["cc"])
    fv = fs.create_feature_view("je", query=query, labels=["y"])
    X, _ = fv.training_data()
    assert list(X.columns) == ["amount", "f", "datetime"]
    assert X.sort_values("datetime")["datetime"].is_monotonic_increasing
    # the root's event time wins a clash; the joined one is dropped without a prefix
    both = tx.select_all().join(agg.select_all(), on=["cc"])
    assert [f.name for f in both.features].count("datetime") == 1


def test_batch_data_returns_the_root_event_time_even_when_not_selected(fs, ms_groups):
    tx, agg = ms_groups
    query = tx.select(["amount", "y"]).join(agg.select(["f"]), on=["cc"])
    fv = fs.create_feature_view("be", query=query, labels=["y"])
    X, _ = fv.training_data(event_time=True, primary_key=True)
    batch = fv.get_batch_data(event_time=True, primary_key=True)
    assert list(batch.columns) == list(X.columns) == ["tid", "datetime", "amount", "f"]
    assert batch["datetime"].tolist() == [_ms(1), _ms(5), _ms(2), _ms(30)]


def test_identical_reads_return_rows_in_root_key_order(fs, tx):
    query = tx.select_all()
    first, second = query.read(), tx.select_all().read()
    assert first["tid"].tolist() == sorted(first["tid"]) == second["tid"].tolist()
    fv = fs.create_feature_view("order", query=tx.select_all(), labels=["y"])
    a = fv.get_batch_data(primary_key=True)
    b = fv.get_batch_data(primary_key=True)
    assert a["tid"].is_monotonic_increasing and a.equals(b)


# -- small API gaps -------------------------------------------------------------------------


def test_select_except_takes_one_name(tx):
    assert "fee" not in [f.name for f in tx.select_except("fee").features]
    assert [f.name for f in tx.select_except("fee").features] == \
        [f.name for f in tx.select_except(["fee"]).features]


def test_update_statistics_config_persists(fs, tx):
    tx.statistics_config = {"enabled": True, "histograms": True, "correlations": True}
    tx.update_statistics_config()
    again = fs.get_feature_group("tx", 1)
    assert again.statistics_config["histograms"] is True
    tx.statistics_config = {"enabled": True, "bogus": 1}
    with pytest.raises(InvalidArgumentError, match="bogus"):
        tx.update_statistics_config()
    assert fs.get_feature_group("tx", 1).statistics_config["histograms"] is True


# -- expectation suites in the SDK's shapes -------------------------------------------------


def _sdk_suite():
    from hsfs.expectation_suite import ExpectationSuite
    from hsfs.ge_expectation import GeExpectation

    return ExpectationSuite(
        expectation_suite_name="transactions_suite", meta={},
        expectations=[GeExpectation(expectation_type="expect_column_values_to_be_between",
                                    kwargs={"column": "amount", "min_value": 0.0}, meta={})])


def test_save_expectation_suite_accepts_the_sdks_suite(tx):
    saved = tx.save_expectation_suite(_sdk_suite(), validation_ingestion_policy="strict")
    assert saved["name"] == "transactions_suite"
    assert saved["expectations"] == [{"type": "expect_column_values_to_be_between",
                                      "kwargs": {"column": "amount", "min_value": 0.0}}]
    from fstrain.kernel.errors import DataValidationError

    with pytest.raises(DataValidationError):
        tx.insert(pd.DataFrame({"tid": [999], "cat": ["a"], "amount": [-1.0], "fee": [0.0],
                                "ts": [T0], "y": [0]}))


def test_save_expectation_suite_accepts_the_sdks_serialised_dicts(tx):
    import json

    suite = _sdk_suite()
    for shape in (suite.to_json_dict(), json.loads(suite.json())):
        saved = tx.save_expectation_suite(shape, overwrite=True)
        assert saved["name"] == "transactions_suite"
        assert saved["expectations"][0]["kwargs"] == {"column": "amount", "min_value": 0.0}
    gx0 = {"expectation_suite_name": "old", "expectations": [
        {"expectation_type": "expect_column_values_to_not_be_null", "kwargs": {"column": "cat"}}]}
    assert tx.save_expectation_suite(gx0, overwrite=True)["expectations"][0]["type"] == \
        "expect_column_values_to_not_be_null"
    with pytest.raises(InvalidArgumentError, match="must have a 'type'"):
        tx.save_expectation_suite({"expectations": [{"kwargs": {}}]}, overwrite=True)


# -- feature logging ------------------------------------------------------------------------


def test_feature_logging_round_trip(fs, tx):
    fv = fs.create_feature_view("logged", query=tx.select(["tid", "amount", "y"]), labels=["y"],
                                transformation_functions=[standard_scaler("amount")],
                                logging_enabled=True)
    assert fs.get_feature_view("logged", 1).logging_enabled is True
    fv.train_test_split(test_size=0.5, seed=1)
    raw = fv.get_batch_data(transformed=False)
    transformed = fv.get_batch_data()
    predictions = np.arange(len(raw)) % 2
    fv.log(raw.head(10), predictions[:10], training_dataset_version=1)  # the SDK 4 order
    first = fv.read_log()
    assert len(first) == 10 and first["predicted_y"].tolist() == predictions[:10].tolist()
    assert first["amount"].tolist() == raw["amount"].head(10).tolist()
    assert set(first["td_version"]) == {1}
    fv.pause_logging()
    fv.log(transformed_features=transformed.head(5), predictions=predictions[:5])
    assert fs.get_feature_view("logged", 1).read_log(transformed=True).empty  # buffered
    assert fv.materialize_log(wait=True) == 5
    logged = fv.read_log(transformed=True)
    assert logged["standard_scaler_amount_"].tolist() == \
        transformed["standard_scaler_amount_"].head(5).tolist()
    assert len(fv.read_log(training_dataset_version=1)) == 10
    fv.resume_logging()
    fv.log(raw.head(3), predictions=predictions[:3])
    assert len(fv.read_log()) == 13  # materialized at once again
    with pytest.raises(InvalidArgumentError, match="one row per logged row"):
        fv.log(raw.head(3), predictions=predictions[:4])
    fv.delete_log()
    assert fv.read_log().empty and fv.logging_enabled is False


def test_serving_a_view_over_offline_groups_is_refused_as_the_sdk_does(fs, tx):
    # the SDK refuses init_serving unless every parent group is online-enabled; the tutorials
    # create theirs with online_enabled=True (tests/feature_store/test_online_serving.py)
    fv = fs.create_feature_view("online", query=tx.select_all(), labels=["y"])
    for call in (lambda: fv.init_serving(1), lambda: fv.get_feature_vectors([{"tid": 1}])):
        with pytest.raises(InvalidArgumentError, match="'tx' v1 is not.*online_enabled=True"):
            call()


def test_batch_scoring_server_exposes_the_sdks_transformation_objects(fs, tx):
    # the churn tutorial inverts its transformations through this (private) SDK attribute
    fv = fs.create_feature_view("inv", query=tx.select(["tid", "cat", "fee", "amount", "y"]),
                                labels=["y"],
                                transformation_functions=[label_encoder("cat"),
                                                          standard_scaler("fee"),
                                                          centered("amount")])
    fv.training_data(seed=1)
    fv.init_batch_scoring(1)
    stats = fv.get_training_dataset(1).transformation_statistics
    functions = fv._batch_scoring_server.model_dependent_transformation_functions
    by_name = {f.hopsworks_udf.function_name: f.hopsworks_udf for f in functions}
    assert by_name["label_encoder"].output_column_names == ["label_encoder_cat_"]
    assert list(by_name["label_encoder"].transformation_statistics.feature.unique_values) == \
        stats["label_encoder_cat"]["values"]
    assert by_name["standard_scaler"].transformation_statistics.feature.std_dev == \
        stats["standard_scaler_fee"]["std"]
    assert by_name["centered"].transformation_statistics.amount.mean == \
        stats["centered_amount"]["amount"]["mean"]


def test_saved_udfs_are_listed_fetched_and_bound(fs, tx):
    from fstrain.kernel.errors import AlreadyExistsError

    meta = fs.create_transformation_function(centered, version=1)
    meta.save()
    fs.create_transformation_function(centered).save()  # next version: 2
    assert [(t.name, t.version) for t in fs.get_transformation_functions()
            if getattr(t, "name", None) == "centered"] == [("centered", 1), ("centered", 2)]
    fetched = fs.get_transformation_function("centered")  # version 1, as the SDK
    assert fetched.version == 1
    fv = fs.create_feature_view("saved", query=tx.select(["tid", "amount", "y"]), labels=["y"],
                                transformation_functions=[fetched("amount")])
    X, _ = fv.training_data()
    assert list(X.columns) == ["centered_amount_"]
    assert abs(X["centered_amount_"].mean()) < 1e-9  # centred on the train mean
    with pytest.raises(AlreadyExistsError, match="version 1 already exists"):
        fs.create_transformation_function(centered, version=1).save()
    with pytest.raises(AlreadyExistsError, match="built-in"):
        fs.create_transformation_function(standard_scaler).save()
    fetched.delete()
    with pytest.raises(NotFoundError, match=r"saved versions: \[2\]"):
        fs.get_transformation_function("centered", version=1)
    assert fs.get_feature_view("saved", 1).training_data()[0].columns.tolist() == \
        ["centered_amount_"]  # the view keeps its own copy


@udf(float)
def broken(fee):
    return fee / undefined_name  # noqa: F821 - fails when run


def test_udf_context_is_passed_and_a_failing_udf_is_named(fs, tx):
    from hopsworks.hsfs.builtin_transformations import impute_constant

    fill = impute_constant("fee")
    fill.transformation_context = {"value": -1.0}
    tx.insert(pd.DataFrame({"tid": [500], "cat": ["a"], "amount": [1.0], "fee": [np.nan],
                            "ts": [T0], "y": [0]}))
    fv = fs.create_feature_view("ctx", query=tx.select(["tid", "fee", "y"]), labels=["y"],
                                transformation_functions=[fill])
    X, _ = fv.training_data(primary_key=True)
    assert X.set_index("tid").loc[500, "impute_constant_fee_"] == -1.0
    bad = fs.create_feature_view("bad_udf", query=tx.select(["tid", "fee", "y"]), labels=["y"],
                                 transformation_functions=[broken("fee")])
    with pytest.raises(InvalidArgumentError, match=r"broken\(fee\) failed: NameError"):
        bad.training_data()
    assert bad.get_training_datasets() == []  # nothing registered


def test_update_statistics_config_takes_the_sdks_statistics_config(fs, tx):
    from hsfs.statistics_config import StatisticsConfig

    tx.statistics_config = StatisticsConfig(enabled=True, correlations=True, histograms=False)
    tx.update_statistics_config()
    stored = fs.get_feature_group("tx", 1).statistics_config
    assert stored["correlations"] is True and stored["histograms"] is False
