"""Great Expectations suites on feature groups: ALWAYS writes and reports, STRICT refuses."""

from __future__ import annotations

import pandas as pd
import pytest

from fstrain.kernel.errors import (
    AlreadyExistsError,
    DataValidationError,
    InvalidArgumentError,
)

SUITE = [
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "amount"}},
    {"type": "ExpectColumnValuesToBeBetween", "kwargs": {"column": "amount", "min_value": 0, "max_value": 100}},
]


def _rows(amounts, start=0):
    return pd.DataFrame({"id": list(range(start, start + len(amounts))), "amount": amounts})


def test_always_policy_writes_and_returns_failed_report(fs):
    fg = fs.get_or_create_feature_group("tx_always", version=1, primary_key=["id"],
                                        expectation_suite=SUITE)
    _, report = fg.insert(_rows([1.0, 500.0]))
    assert report is not None and not report.success
    assert report.ingestion_result == "INGESTED"
    failed = report.failed()
    assert [r.expectation_type for r in failed] == ["expect_column_values_to_be_between"]
    assert failed[0].observed["unexpected_count"] == 1
    assert len(fg.read()) == 2
    assert fg.get_latest_validation_report().success is False


def test_strict_policy_raises_and_writes_nothing(fs):
    import great_expectations as gx

    suite = gx.ExpectationSuite(
        name="strict_suite",
        expectations=[gx.expectations.ExpectColumnValuesToBeBetween(column="amount", min_value=0, max_value=100)],
    )
    fg = fs.get_or_create_feature_group("tx_strict", version=1, primary_key=["id"])
    fg.insert(_rows([1.0]))
    fg.save_expectation_suite(suite, validation_ingestion_policy="strict")
    with pytest.raises(DataValidationError, match=r"(?s)STRICT.*expect_column_values_to_be_between\(column='amount'\)") as err:
        fg.insert(_rows([5.0, 700.0], start=10))
    assert err.value.report.ingestion_result == "REJECTED"
    assert len(fg.read()) == 1 and len(fg.commit_details()) == 1
    assert [r.ingestion_result for r in fg.get_validation_reports()] == ["REJECTED"]
    _, ok = fg.insert(_rows([5.0], start=20))
    assert ok.success and len(fg.read()) == 2
    assert len(fg.get_validation_reports(ingestion_result="INGESTED")) == 1


def test_strict_failure_on_first_insert_creates_nothing(fs):
    fg = fs.get_or_create_feature_group("tx_first", version=1, primary_key=["id"],
                                        expectation_suite=SUITE, validation_ingestion_policy="strict")
    with pytest.raises(DataValidationError):
        fg.insert(_rows([-1.0]))
    assert fg.id is None
    assert [g.name for g in fs.get_feature_groups()] == []


def test_validation_can_be_skipped_per_insert(fs):
    fg = fs.get_or_create_feature_group("tx_skip", version=1, primary_key=["id"], expectation_suite=SUITE,
                                        validation_ingestion_policy="strict")
    _, report = fg.insert(_rows([1000.0]), validation_options={"run_validation": False})
    assert report is None and len(fg.read()) == 1


def test_suite_errors(fs):
    fg = fs.get_or_create_feature_group("tx_err", version=1, primary_key=["id"])
    fg.insert(_rows([1.0]))
    with pytest.raises(InvalidArgumentError, match="refers to column 'amont'.*Did you mean 'amount'"):
        fg.save_expectation_suite([{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "amont"}}])
    with pytest.raises(InvalidArgumentError, match="must be 'always' or 'strict'"):
        fg.save_expectation_suite(SUITE, validation_ingestion_policy="sometimes")
    fg.save_expectation_suite(SUITE)
    with pytest.raises(AlreadyExistsError, match="overwrite=True"):
        fg.save_expectation_suite(SUITE)
    fg.save_expectation_suite(SUITE[:1], overwrite=True)
    assert len(fs.get_feature_group("tx_err", 1).get_expectation_suite()["expectations"]) == 1


def test_categorical_fast_path_keeps_verdicts(fs):
    """String columns checked only by set/null expectations are validated as categoricals."""
    import pyarrow as pa

    from feature_store.core.expectations import categorical_safe_columns, suite_to_dict

    suite = [
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "city", "value_set": ["a", "b"]}},
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "city"}},
        {"type": "expect_column_max_to_be_between", "kwargs": {"column": "code", "min_value": "a", "max_value": "z"}},
    ]
    table = pa.table({"id": [1], "city": ["a"], "code": ["b"]})
    assert categorical_safe_columns(suite_to_dict(suite, "s"), table) == ["city"]
    fg = fs.get_or_create_feature_group("cities", version=1, primary_key=["id"], expectation_suite=suite[:2])
    _, report = fg.insert(pd.DataFrame({"id": [1, 2, 3], "city": ["a", "c", None]}))
    observed = {r.expectation_type: r.observed.get("unexpected_count") for r in report.results}
    assert observed == {"expect_column_values_to_be_in_set": 1, "expect_column_values_to_not_be_null": 1}
