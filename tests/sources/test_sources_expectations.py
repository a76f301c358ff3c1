"""Every spec's Great Expectations 1.x suite passes on the real data (and catches bad data)."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest

from feature_views.adult import source as adult
from feature_views.ccfraud import source as ccfraud
from feature_views.flights import source as flights
from feature_views.mnist import source as mnist
from feature_views.source_spec import FeatureGroupSpec

gx = pytest.importorskip("great_expectations")


@pytest.fixture(scope="module")
def validate():
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    source = context.data_sources.add_pandas("fstrain_sources")
    counter = iter(range(10**6))

    def run(spec: FeatureGroupSpec, frame: pd.DataFrame):
        name = f"{spec.name}_{next(counter)}"
        asset = source.add_dataframe_asset(name=name)
        definition = asset.add_batch_definition_whole_dataframe(name)
        batch = definition.get_batch(batch_parameters={"dataframe": frame})
        suite = gx.ExpectationSuite(name=name)
        for expectation in spec.expectations:
            suite.add_expectation(expectation.to_gx())
        return batch.validate(suite, result_format="BASIC")

    return run


def test_all_expectation_suites_pass(validate, tmp_path: Path) -> None:
    loaded = [
        (flights.FEATURE_GROUPS, flights.load(sample=20_000)),
        (adult.FEATURE_GROUPS, adult.load()),
        (mnist.FEATURE_GROUPS, mnist.load(tmp_path, sample=100)),
        (ccfraud.FEATURE_GROUPS, ccfraud.load(n_transactions=20_000)),
    ]
    failures = []
    for specs, frames in loaded:
        for spec in specs:
            assert spec.expectations, f"{spec.name} has no expectations"
            result = validate(spec, frames[spec.name])
            assert len(result.results) == len(spec.expectations)
            failures += [
                (spec.name, r.expectation_config.type, r.expectation_config.kwargs)
                for r in result.results
                if not r.success
            ]
    assert failures == []


def test_suite_catches_bad_rows(validate) -> None:
    frames = ccfraud.load(n_transactions=1_000)
    bad = frames["transactions"].copy()
    bad.loc[0, "channel"] = "fax"
    bad.loc[1, "amount"] = -5.0
    result = validate(ccfraud.TRANSACTIONS, bad)
    failed = {
        (r.expectation_config.type, r.expectation_config.kwargs["column"]) for r in result.results if not r.success
    }
    assert failed == {
        ("expect_column_values_to_be_in_set", "channel"),
        ("expect_column_values_to_be_between", "amount"),
    }
