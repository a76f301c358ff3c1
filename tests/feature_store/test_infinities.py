"""±inf in double columns (issue 33 item 5): stored as Hopsworks stores them, counted apart in the
statistics, written as ``"inf"``/``"-inf"`` in canonical JSON, refused by name where a scaler
would be fitted on them, refusable by an expectation suite, and hashed apart from any finite
value. NaN is handled as before."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from feature_store import transformations
from fstrain.kernel import canonical_json as cj
from fstrain.kernel.errors import DataValidationError, InvalidArgumentError

N = 60
POS, NEG = tuple(range(3, N, 7)), tuple(range(6, N, 14))  # 9 rows of +inf, 4 of -inf


def _rows(x_at: float = math.inf) -> pd.DataFrame:
    x = np.arange(N, dtype=float)
    x[list(POS)] = x_at
    x[list(NEG)] = -x_at
    return pd.DataFrame({"id": np.arange(N), "x": x, "y": np.arange(N) % 2,
                         "up": np.where(np.isin(np.arange(N), POS), math.inf, np.arange(N))})


def _finite() -> np.ndarray:
    return np.delete(np.arange(N, dtype=float), [*POS, *NEG])


@pytest.fixture
def grp(fs):
    fg = fs.create_feature_group("m", version=1, primary_key=["id"])
    fg.insert(_rows())
    return fg


def _entry(stats: dict, name: str) -> dict:
    return next(f for f in stats["features"] if f["feature"] == name)


# -- canonical JSON ----------------------------------------------------------------------------


def test_canonical_json_writes_infinities_as_strings_and_reads_them_back():
    value = {"a": math.inf, "b": [-math.inf, 1.5], "c": math.nan, "d": np.float32("-inf")}
    assert cj.to_jsonable(value, what="v") == {"a": "inf", "b": ["-inf", 1.5], "c": None,
                                               "d": "-inf"}
    assert json.loads(cj.dumps({"a": math.inf, "b": [-math.inf]})) == {"a": "inf", "b": ["-inf"]}
    assert cj.canonical_bytes({"z": -math.inf, "a": 1.0}) == b'{"a":1.0,"z":"-inf"}'
    assert [cj.float_from_json(v) for v in ("inf", "-inf", 2, 1.5, None)] == [
        math.inf, -math.inf, 2.0, 1.5, None]
    with pytest.raises(InvalidArgumentError, match="'Infinity'"):
        cj.float_from_json("Infinity")
    with pytest.raises(ValueError):  # NaN as before: to_jsonable makes it null, dumps refuses it
        cj.dumps({"a": math.nan})


# -- statistics --------------------------------------------------------------------------------


def test_group_statistics_count_infinities_apart(grp):
    x = _entry(grp.get_statistics(), "x")
    finite = _finite()
    assert (x["count"], x["posinf_count"], x["neginf_count"]) == (N, len(POS), len(NEG))
    assert (x["min"], x["max"]) == (finite.min(), finite.max())
    assert x["mean"] == pytest.approx(finite.mean(), rel=1e-12)  # one inf no longer poisons it
    assert x["std"] == pytest.approx(finite.std(ddof=1), rel=1e-12)
    assert "posinf_count" not in _entry(grp.get_statistics(), "id")  # integers hold no inf


@pytest.mark.parametrize("materialized", [False, True])
def test_split_statistics_count_infinities_apart(fs, grp, materialized):
    fv = fs.create_feature_view("v", version=1, query=grp.select(["id", "x", "y"]), labels=["y"])
    if materialized:  # the streamed writer's statistics
        version, _ = fv.create_training_data()
    else:
        fv.training_data()
        version = 1
    td = fv.get_training_dataset(version)
    x = _entry(next(iter(td.splits.values()))["statistics"], "x")
    assert (x["posinf_count"], x["neginf_count"]) == (len(POS), len(NEG))
    assert x["mean"] == pytest.approx(_finite().mean(), rel=1e-12)


# -- transformations ---------------------------------------------------------------------------


@pytest.mark.parametrize("scaler", ["standard_scaler", "min_max_scaler", "robust_scaler"])
@pytest.mark.parametrize("materialized", [False, True])
def test_a_scaler_over_infinities_is_refused_by_name(fs, grp, scaler, materialized):
    tf = getattr(transformations, scaler)("x")  # fstrain's own (the SDK's: test_sdk_objects)
    fv = fs.create_feature_view("vs", version=1, query=grp.select(["id", "x", "y"]),
                                labels=["y"], transformation_functions=[tf])
    with pytest.raises(InvalidArgumentError,
                       match=rf"feature view 'vs' v1: .*{scaler}\('x'\): feature 'x' must be "
                             r"finite .* Got (-)?inf instead.*No training dataset was created"):
        if materialized:
            fv.create_train_test_split(test_size=0.5, seed=1)
        else:
            fv.train_test_split(test_size=0.5, seed=1)
    assert fv.get_training_datasets() == []
    assert not any((fs.root / "training_datasets").rglob("*.parquet"))


def test_a_label_encoder_keeps_infinite_categories_across_reads(fs, grp):
    """Its values hold ``inf``; stored as ``"inf"``, they are read back as the float, so a fresh
    handle encodes the rows as the version did."""
    tf = transformations.label_encoder("x")
    fv = fs.create_feature_view("ve", version=1, query=grp.select(["id", "x", "y"]),
                                labels=["y"], transformation_functions=[tf])
    version, _ = fv.create_training_data(seed=1)
    values = fv.get_training_dataset(version).transformation_statistics["label_encoder_x"]["values"]
    assert values[0] == "-inf" and values[-1] == "inf"  # sorted, as stored
    X, _ = fs.get_feature_view("ve", 1).get_training_data(version, primary_key=True)
    codes = X.set_index("id")["label_encoder_x_"]
    assert codes[POS[0]] == len(values) - 1 and codes[NEG[0]] == 0
    batch = fs.get_feature_view("ve", 1).get_batch_data(primary_key=True).set_index("id")
    assert batch["label_encoder_x_"].reindex(codes.index).tolist() == codes.tolist()


def test_a_label_over_infinities_is_recorded(fs, grp):
    """More than 50 distinct values: the label's distribution as pandas gives it (mean inf, std
    NaN), stored as "inf" and null (the catalog refused to store it)."""
    fv = fs.create_feature_view("vl", version=1, query=grp.select(["id", "up"]), labels=["up"])
    version, _ = fv.create_training_data()
    found = fv.get_training_dataset(version).splits
    distribution = next(iter(found.values()))["label_distribution"]["up"]
    assert distribution == {"mean": "inf", "std": None}
    assert cj.float_from_json(distribution["mean"]) == _rows()["up"].mean() == math.inf


# -- expectation suites ------------------------------------------------------------------------


def test_an_expectation_suite_can_refuse_infinities(fs):
    import great_expectations as gx

    suite = gx.ExpectationSuite(name="finite_x", expectations=[
        gx.expectations.ExpectColumnValuesToBeBetween(column="x", min_value=-1e300,
                                                      max_value=1e300)])
    fg = fs.create_feature_group("e", version=1, primary_key=["id"], expectation_suite=suite,
                                 validation_ingestion_policy="strict")
    fg.insert(_rows().iloc[:3])  # finite rows pass
    with pytest.raises(DataValidationError,
                       match=r"(?s)STRICT.*expect_column_values_to_be_between\(column='x'\)") as err:
        fg.insert(_rows().iloc[3:6])  # one +inf
    assert err.value.report.failed()[0].observed["unexpected_count"] == 1
    assert len(fg.read()) == 3 and len(fg.commit_details()) == 1  # nothing written


# -- content hashes ----------------------------------------------------------------------------


def test_split_hashes_of_infinities_are_stable_and_apart_from_finite_values(fs, grp):
    other = fs.create_feature_group("m_finite", version=1, primary_key=["id"])
    other.insert(_rows(x_at=1e308))  # the same rows, the largest finite doubles for ±inf
    hashes = []
    for fg in (grp, other):
        fv = fs.create_feature_view(f"h_{fg.name}", version=1,
                                    query=fg.select(["id", "x", "y"]), labels=["y"])
        version, _ = fv.create_train_test_split(test_size=0.5, seed=3)
        first = fv.get_train_test_split(version)
        again = fs.get_feature_view(f"h_{fg.name}", 1).get_train_test_split(version)  # verified
        pd.testing.assert_frame_equal(first[0], again[0])
        hashes.append({n: s["sha256"] for n, s in fv.get_training_dataset(version).splits.items()})
    assert hashes[0]["train"] != hashes[1]["train"] and hashes[0]["test"] != hashes[1]["test"]
    fv = fs.get_feature_view("h_m", 1)
    version, _ = fv.create_train_test_split(test_size=0.5, seed=3)  # same rows, same digests
    assert {n: s["sha256"] for n, s in fv.get_training_dataset(version).splits.items()} == hashes[0]
