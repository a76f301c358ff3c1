"""UCI Adult source: row count, missing values, labels, PII tags, sampling."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest

from feature_views.adult import source as adult


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return adult.load()


def test_load_follows_rules(frames: dict[str, pd.DataFrame], assert_follows_rules) -> None:
    assert_follows_rules(frames, adult.FEATURE_GROUPS)
    demo, emp = frames["adult_demographics"], frames["adult_employment"]
    assert len(demo) == len(emp) == adult.N_ROWS == 48_842
    assert demo["person_id"].tolist() == emp["person_id"].tolist() == list(range(48_842))
    assert emp["source_split"].value_counts().to_dict() == {"train": 32_561, "test": 16_281}


def test_question_marks_became_nulls_and_whitespace_is_stripped(frames: dict[str, pd.DataFrame]) -> None:
    for frame in frames.values():
        for column in frame.select_dtypes(include="object"):
            values = frame[column].dropna()
            assert not (values == "?").any(), column
            assert (values == values.str.strip()).all(), column
    emp = frames["adult_employment"]
    assert emp["workclass"].isna().sum() > 2_000
    assert emp["occupation"].isna().sum() > 2_000
    assert frames["adult_demographics"]["native_country"].isna().sum() > 500


def test_labels_from_both_files(frames: dict[str, pd.DataFrame]) -> None:
    emp = frames["adult_employment"]
    rates = emp.groupby("source_split")["income_over_50k"].mean()
    assert 0.2 < rates["train"] < 0.3 and 0.2 < rates["test"] < 0.3  # test labels ended in "."
    first_test = emp[emp["source_split"] == "test"].iloc[0]
    assert first_test["person_id"] == 32_561 and first_test["education"] == "11th"


def test_pii_tags() -> None:
    demo = adult.DEMOGRAPHICS
    assert demo.tags["pii"] is True
    assert {c for c, t in demo.feature_tags.items() if t.get("pii")} == {"sex", "race", "age", "native_country"}
    assert adult.EMPLOYMENT.feature_tags["income_over_50k"] == {"label": True}


def test_sample_keeps_the_same_people_and_window_is_ignored(assert_follows_rules) -> None:
    a = adult.load(sample=500, seed=3)
    b = adult.load(sample=500, seed=3)
    assert_follows_rules(a, adult.FEATURE_GROUPS)
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name])
    assert a["adult_demographics"]["person_id"].tolist() == a["adult_employment"]["person_id"].tolist()
    assert len(adult.load(start=datetime(2000, 1, 1))["adult_employment"]) == 48_842
