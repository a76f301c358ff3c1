"""Options the local backend cannot honour are refused by name, never accepted and ignored."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from deltalake import DeltaTable

from feature_store.feature import Feature
from fstrain.kernel.errors import AlreadyExistsError, InvalidArgumentError

GROUP_OPTIONS = [
    ("features", [Feature("id", "bigint")]),
    ("features", []),
    ("embedding_index", object()),
    ("stream", True),
    ("hudi_precombine_key", "ts"),
    ("time_travel_format", "ICEBERG"),
    ("time_travel_format", "PARQUET"),
]


@pytest.mark.parametrize("call", ["create_feature_group", "get_or_create_feature_group"])
@pytest.mark.parametrize(("option", "value"), GROUP_OPTIONS)
def test_group_options_that_would_be_ignored_are_refused(fs, call, option, value):
    with pytest.raises(InvalidArgumentError, match=rf"'g'.*{option}="):
        getattr(fs, call)("g", version=1, primary_key=["id"], **{option: value})
    assert fs.catalog.query("SELECT * FROM feature_groups") == []


@pytest.mark.parametrize("fmt", [None, "DELTA", "delta"])
def test_delta_time_travel_format_is_accepted(fs, fmt):
    fg = fs.create_feature_group("g", version=1, primary_key=["id"], time_travel_format=fmt)
    fg.insert(pd.DataFrame({"id": [1]}))
    assert fg.id is not None


def _hudi_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "time_travel_format='HUDI'" in str(w.message)]


@pytest.mark.parametrize("call", ["create_feature_group", "get_or_create_feature_group"])
@pytest.mark.parametrize("fmt", ["HUDI", "hudi"])
def test_hudi_is_stored_as_delta_with_one_warning_per_creation(fs, call, fmt):
    with pytest.warns(UserWarning) as record:
        fg = getattr(fs, call)("g", version=1, primary_key=["id"], time_travel_format=fmt)
    assert _hudi_warnings(record) == [
        f"{call}('g', version=1): time_travel_format='HUDI' is stored as a Delta table on the "
        "local backend (upserts, commits and time travel as on a cluster's Delta groups); the "
        "group reports time_travel_format='DELTA'."
    ]
    assert record[0].filename == __file__  # points at the caller's line
    fg.insert(pd.DataFrame({"id": [1, 2], "x": [1.0, 2.0]}))
    fg.insert(pd.DataFrame({"id": [2], "x": [3.0]}))  # upserts as a Delta group does
    assert fg.time_travel_format == "DELTA"
    assert sorted(fg.read()["x"]) == [1.0, 3.0]
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        got = fs.get_feature_group("g", version=1)
        same = fs.get_or_create_feature_group("g", version=1, primary_key=["id"],
                                              time_travel_format="HUDI")
    assert _hudi_warnings(again) == []  # getting an existing group does not warn again
    assert got.time_travel_format == same.time_travel_format == "DELTA"
    assert DeltaTable(got.location).version() >= 1  # the files are a Delta table


def test_delta_and_no_format_do_not_warn(fs):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fs.create_feature_group("d", version=1, primary_key=["id"], time_travel_format="DELTA")
        fs.create_feature_group("n", version=1, primary_key=["id"])
    assert _hudi_warnings(record) == []


def test_refused_hudi_creation_does_not_warn(fs):
    fs.create_feature_group("g", version=1, primary_key=["id"]).insert(pd.DataFrame({"id": [1]}))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(AlreadyExistsError):
            fs.create_feature_group("g", version=1, primary_key=["id"], time_travel_format="HUDI")
    assert _hudi_warnings(record) == []


@pytest.fixture
def view(fs):
    fg = fs.create_feature_group("people", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": list(range(10)), "x": [float(i) for i in range(10)],
                            "city": ["a", "b"] * 5, "y": [0, 1] * 5}))
    return fs.create_feature_view("people_fv", version=1, query=fg.select_all(), labels=["y"])


def _td_count(fs):
    return len(fs.catalog.query("SELECT * FROM training_datasets"))


@pytest.mark.parametrize("call", ["create_training_data", "create_train_test_split",
                                  "create_train_validation_test_split"])
@pytest.mark.parametrize(("option", "value"), [("storage_connector", object()),
                                               ("location", "/tmp/elsewhere")])
def test_split_destinations_are_refused(fs, view, call, option, value):
    with pytest.raises(InvalidArgumentError, match=rf"{call}\(\): {option}="):
        getattr(view, call)(**{option: value})
    assert _td_count(fs) == 0


@pytest.mark.parametrize("scaler", ["standard_scaler", "min_max_scaler", "robust_scaler"])
def test_scaler_on_a_string_column_is_refused_at_view_creation(fs, scaler):
    fg = fs.create_feature_group("s", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2], "city": ["a", "b"]}))
    tf = fs.get_transformation_function(scaler)("city")
    with pytest.raises(InvalidArgumentError, match=rf"{scaler}\('city'\).*numeric.*string"):
        fs.create_feature_view("s_fv", version=1, query=fg.select_all(), transformation_functions=[tf])
    assert fs.catalog.query("SELECT * FROM feature_views") == []


def test_scaler_on_a_numeric_column_is_fine(fs):
    fg = fs.create_feature_group("n", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2], "x": [1, 2]}))
    tf = fs.get_transformation_function("standard_scaler")("x")
    fs.create_feature_view("n_fv", version=1, query=fg.select_all(), transformation_functions=[tf])


@pytest.fixture
def pair(fs):
    a = fs.create_feature_group("a", version=1, primary_key=["id"])
    a.insert(pd.DataFrame({"id": [1, 2], "k": ["1", "2"], "v": [1.0, 2.0]}))
    b = fs.create_feature_group("b", version=1, primary_key=["k"])
    b.insert(pd.DataFrame({"k": [1, 2], "w": [3.0, 4.0]}))
    return a, b


@pytest.mark.parametrize("prefix", ["", "Card_", "1x_", "a b", "a-b_", 7, "x" * 60, "é_"])
def test_invalid_join_prefix_is_refused(pair, prefix):
    a, b = pair
    with pytest.raises(InvalidArgumentError, match=r"join of 'b': prefix"):
        a.select_all().join(b.select_all(), left_on=["id"], right_on=["k"], prefix=prefix)


def test_valid_join_prefix_names_the_columns(pair):
    a, b = pair
    out = a.select(["id", "v"]).join(b.select_all(), left_on=["id"], right_on=["k"], prefix="b_").read()
    assert "b_w" in out.columns


def test_int_key_joined_to_a_string_key_is_refused(pair):
    a, b = pair
    with pytest.raises(InvalidArgumentError, match=r"key 'k' is string.*'b\.k' is int64"):
        a.select_all().join(b.select_all(), on=["k"])
