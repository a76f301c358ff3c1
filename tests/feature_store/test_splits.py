"""Split strategies: invariants per strategy, determinism, boundaries and every bad input."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feature_store.core.splits import (
    NO_SPLIT,
    SplitSpec,
    assign_split_codes,
    assign_splits,
    kfold_indices,
    make_split_spec,
    resolve_time_bounds,
)
from fstrain.kernel.errors import ConfigError, InvalidArgumentError, SchemaMismatchError

HYP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _frame(n: int, seed: int, n_groups: int = 20, n_classes: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "y": rng.integers(0, n_classes, n),
        "g": rng.integers(0, n_groups, n),
        "t": T0 + pd.to_timedelta(rng.integers(0, 10_000, n), unit="min"),
    })


def _counts(out: np.ndarray) -> dict[object, int]:
    return pd.Series(out, dtype=object).value_counts(dropna=False).to_dict()


sizes = st.tuples(st.floats(0.05, 0.4), st.floats(0.05, 0.4), st.booleans())


# --------------------------------------------------------------------------- random


@HYP
@given(n=st.integers(40, 600), seed=st.integers(0, 2**31), sz=sizes)
def test_random_sizes_and_full_coverage(n, seed, sz):
    test_size, val_size, three = sz
    spec = make_split_spec(seed=seed, test_size=test_size,
                           validation_size=val_size if three else None, three_way=three)
    out = assign_splits(_frame(n, seed), spec)
    counts = _counts(out)
    assert None not in counts and sum(counts.values()) == n
    assert counts["test"] == int(n * test_size)
    if three:
        assert counts["validation"] == int(n * val_size)
    assert counts["train"] == n - int(n * test_size) - (int(n * val_size) if three else 0)


def test_random_deterministic_per_seed_and_differs_across_seeds():
    df = _frame(500, 0)
    a = assign_splits(df, make_split_spec(seed=1, test_size=0.2))
    b = assign_splits(df, make_split_spec(seed=1, test_size=0.2))
    c = assign_splits(df, make_split_spec(seed=2, test_size=0.2))
    assert (a == b).all()
    assert not (a == c).all()


def test_no_global_rng_used():
    np.random.seed(0)
    before = np.random.random()
    np.random.seed(0)
    assign_splits(_frame(100, 0), make_split_spec(seed=3, test_size=0.3))
    assert np.random.random() == before


# --------------------------------------------------------------------------- stratified


def test_stratified_ratios_within_half_a_point_on_10k_rows():
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"y": rng.choice(["a", "b", "c", "d"], 10_000, p=[0.6, 0.25, 0.1, 0.05])})
    spec = make_split_spec("stratified", seed=5, test_size=0.2, validation_size=0.15, three_way=True)
    out = assign_splits(df, spec, label_column="y")
    overall = df["y"].value_counts(normalize=True)
    for split in spec.splits:
        share = df["y"][out == split].value_counts(normalize=True)
        assert (share - overall).abs().max() < 0.005, split
    counts = _counts(out)
    assert counts["test"] == 2000 and counts["validation"] == 1500 and counts["train"] == 6500


@HYP
@given(n=st.integers(60, 400), seed=st.integers(0, 2**31), sz=sizes)
def test_stratified_every_class_everywhere(n, seed, sz):
    test_size, val_size, three = sz
    df = _frame(n, seed, n_classes=3)
    spec = make_split_spec("stratified", seed=seed, test_size=test_size,
                           validation_size=val_size if three else None, three_way=three)
    counts = df["y"].value_counts()
    if counts.min() < len(spec.splits):
        return
    out = assign_splits(df, spec, label_column="y")
    assert sum(_counts(out).values()) == n and None not in _counts(out)
    for split in spec.splits:
        assert set(df["y"][out == split]) == set(counts.index)
        # every class is split in the same proportion: off by < 1 row from its exact share, or
        # the at-least-one-row floor; each class lifted to that floor takes one row the
        # largest-remainder rounding would have given another class
        if split != "train":
            size = test_size if split == "test" else val_size
            per_class = df["y"][out == split].value_counts()
            floored = sum(1 for c in counts if c * size < 1)
            for cls, c in counts.items():
                assert abs(per_class[cls] - c * size) < 1 + floored or per_class[cls] == 1


def test_stratified_uses_stratify_column_over_label():
    df = pd.DataFrame({"y": [0, 1] * 50, "s": ["x"] * 97 + ["z"] * 3})
    spec = make_split_spec(seed=0, test_size=0.3, stratify_column="s")
    assert spec.strategy == "stratified"
    out = assign_splits(df, spec, label_column="y")
    assert (df["s"][out == "test"] == "z").sum() >= 1


def test_stratified_small_class_named_with_count():
    df = pd.DataFrame({"y": ["a"] * 50 + ["rare"] * 2})
    spec = make_split_spec("stratified", seed=0, test_size=0.2, validation_size=0.2, three_way=True)
    with pytest.raises(InvalidArgumentError, match=r"class 'rare' has 2 row\(s\), fewer than the 3 splits"):
        assign_splits(df, spec, label_column="y")


def test_stratified_needs_a_column():
    spec = make_split_spec("stratified", seed=0, test_size=0.2)
    with pytest.raises(InvalidArgumentError, match="pass label_column or stratify_column"):
        assign_splits(_frame(50, 0), spec)
    with pytest.raises(SchemaMismatchError, match="'lable' is not in the frame.*Did you mean 'label'"):
        assign_splits(pd.DataFrame({"label": [0, 1] * 10}), spec, label_column="lable")


# --------------------------------------------------------------------------- group


@HYP
@given(n=st.integers(50, 500), seed=st.integers(0, 2**31), n_groups=st.integers(12, 60), sz=sizes)
def test_group_disjoint_and_sized(n, seed, n_groups, sz):
    test_size, val_size, three = sz
    df = _frame(n, seed, n_groups=n_groups)
    spec = make_split_spec(group_column="g", seed=seed, test_size=test_size,
                           validation_size=val_size if three else None, three_way=three)
    try:
        out = assign_splits(df, spec)
    except InvalidArgumentError as exc:  # every group taken before train got one
        assert "is empty" in str(exc)
        return
    per_group = pd.DataFrame({"g": df["g"], "s": out}).groupby("g")["s"].nunique()
    assert (per_group == 1).all()
    counts = _counts(out)
    assert sum(counts.values()) == n and None not in counts
    biggest = df["g"].value_counts().max()
    assert int(n * test_size) <= counts["test"] < int(n * test_size) + biggest


def test_group_null_refused_and_deterministic():
    df = pd.DataFrame({"g": ["a", "b", None, "c"] * 10})
    spec = make_split_spec(group_column="g", seed=0, test_size=0.3)
    with pytest.raises(InvalidArgumentError, match=r"'g'.*Got 10 null row\(s\)"):
        assign_splits(df, spec)
    df = _frame(300, 1, n_groups=40)
    spec = make_split_spec(group_column="g", seed=4, test_size=0.25)
    assert (assign_splits(df, spec) == assign_splits(df, spec)).all()
    other = assign_splits(df, make_split_spec(group_column="g", seed=5, test_size=0.25))
    assert not (assign_splits(df, spec) == other).all()


# --------------------------------------------------------------------------- time


@HYP
@given(n=st.integers(50, 400), seed=st.integers(0, 2**31), sz=sizes,
       gap_min=st.sampled_from([0, 30, 120]))
def test_time_by_size_is_in_time_order_and_gap_dropped(n, seed, sz, gap_min):
    test_size, val_size, three = sz
    df = _frame(n, seed)
    spec = make_split_spec("time", seed=seed, test_size=test_size,
                           validation_size=val_size if three else None, three_way=three,
                           gap=pd.Timedelta(minutes=gap_min) if gap_min else None)
    try:
        out = assign_splits(df, spec, event_time_column="t")
    except InvalidArgumentError as exc:
        assert "is empty" in str(exc)
        return
    t = df["t"]
    order = list(spec.splits)
    for early, late in zip(order, order[1:]):
        assert t[out == early].max() < t[out == late].min()
    resolved = resolve_time_bounds(df, spec, event_time_column="t")
    edges = [resolved.train_end] + ([resolved.validation_end] if three else [])
    gap = pd.Timedelta(minutes=gap_min)
    in_gap = np.zeros(n, bool)
    for e in edges:
        in_gap |= ((t >= e) & (t < e + gap)).to_numpy()
    assert (pd.isna(pd.Series(out, dtype=object)).to_numpy() == in_gap).all()
    # the cut is at the int(m*test_size)-th latest row: ties go to the later split
    assert (t >= resolved.test_start).sum() >= int(n * test_size)


def test_time_windows_are_half_open_exact_at_boundaries():
    t = pd.Series(pd.date_range("2024-01-01", periods=10, freq="D", tz="UTC"))
    df = pd.DataFrame({"t": t})
    spec = make_split_spec(seed=0, train_start="2024-01-02", train_end="2024-01-05",
                           validation_start="2024-01-05", validation_end="2024-01-08",
                           test_start="2024-01-08", test_end="2024-01-10", three_way=True)
    assert spec.strategy == "time" and spec.splits == ("train", "validation", "test")
    out = assign_splits(df, spec, event_time_column="t")
    assert out.tolist() == [None, "train", "train", "train", "validation", "validation",
                            "validation", "test", "test", None]


def test_time_gap_drops_rows_after_each_cut():
    df = pd.DataFrame({"t": pd.date_range("2024-01-01", periods=12, freq="h")})  # naive = UTC
    spec = make_split_spec(seed=0, train_end="2024-01-01T04:00", validation_end="2024-01-01T08:00",
                           gap="2h", three_way=True)
    out = assign_splits(df, spec, event_time_column="t")
    assert out.tolist() == ["train"] * 4 + [None, None, "validation", "validation"] + \
        [None, None, "test", "test"]


def test_time_naive_and_aware_bounds_are_the_same_instant():
    a = make_split_spec(seed=0, train_end="2024-03-01 12:00", test_start=dt.datetime(2024, 3, 2))
    b = make_split_spec(seed=0, train_end=pd.Timestamp("2024-03-01 13:00", tz="Europe/Berlin"),
                        test_start=pd.Timestamp("2024-03-02", tz="UTC"))
    assert a == b
    assert str(a.train_end.tz) == "UTC"


def test_time_test_start_alone_fills_train_end_and_priority_over_sizes():
    with pytest.warns(UserWarning, match="Time bounds take priority over sizes"):
        spec = make_split_spec(seed=0, test_size=0.5, test_start="2024-01-05")
    assert spec.strategy == "time" and spec.test_size is None
    assert spec.train_end == spec.test_start == pd.Timestamp("2024-01-05", tz="UTC")


def test_time_missing_and_bad_event_time_column():
    spec = make_split_spec(seed=0, train_end="2024-01-05")
    with pytest.raises(InvalidArgumentError, match="needs an event time, and the data has none"):
        assign_splits(_frame(20, 0), spec)
    with pytest.raises(SchemaMismatchError, match="'ts' is not in the frame"):
        assign_splits(_frame(20, 0), spec, event_time_column="ts")


def test_time_rows_with_null_event_time_get_none():
    df = pd.DataFrame({"t": [T0, None, T0 + pd.Timedelta("2D")]})
    out = assign_splits(df, make_split_spec(seed=0, test_start=T0 + pd.Timedelta("1D")),
                        event_time_column="t")
    assert out.tolist() == ["train", None, "test"]


# --------------------------------------------------------------------------- empty splits & spec


def test_empty_split_names_split_and_spec():
    df = pd.DataFrame({"t": pd.date_range("2024-01-01", periods=5, freq="D", tz="UTC")})
    spec = make_split_spec(seed=0, test_start="2030-01-01")
    with pytest.raises(InvalidArgumentError, match=r"Split 'test' is empty for 5 row\(s\): test_start=2030-01-01 00:00:00\+00:00, test_end=unbounded gives it none"):
        assign_splits(df, spec, event_time_column="t")
    with pytest.raises(InvalidArgumentError, match="Split 'test' is empty"):
        assign_splits(pd.DataFrame({"a": range(3)}), make_split_spec(seed=0, test_size=0.1))


def test_spec_round_trip_json():
    specs = [
        make_split_spec(seed=3, test_size=0.2, validation_size=0.1, three_way=True),
        make_split_spec(group_column="g", seed=1, test_size=0.3),
        make_split_spec(seed=0, train_start="2024-01-01", train_end="2024-02-01",
                        test_start="2024-02-01", test_end="2024-03-01", gap="6h"),
        make_split_spec("time", seed=0, test_size=0.2, validation_size=0.2, three_way=True, gap="1D"),
    ]
    for spec in specs:
        d = json.loads(json.dumps(spec.to_dict()))
        assert SplitSpec.from_dict(d) == spec
    assert specs[0].splits == ("train", "validation", "test")
    assert specs[1].splits == ("train", "test")
    with pytest.raises(ConfigError, match=r"unknown keys \['color'\]"):
        SplitSpec.from_dict({**specs[0].to_dict(), "color": 1})
    with pytest.raises(ConfigError, match="Stored split spec is invalid"):
        SplitSpec.from_dict({**specs[0].to_dict(), "test_size": 2.0})


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"test_size": 0.0}, r"test_size must be a float in the open interval \(0, 1\). Got 0.0"),
        ({"test_size": 1.0}, r"test_size must be .* Got 1.0 instead"),
        ({"test_size": True}, r"test_size must be .* Got True instead"),
        ({"test_size": 0.6, "validation_size": 0.4, "three_way": True},
         r"must be below 1 .* Got 0.6 \+ 0.4 = 1.0"),
        ({"test_size": 0.2, "three_way": True}, "needs validation_size"),
        ({"test_size": 0.2, "validation_size": 0.2}, "validation_size is only for train/validation/test"),
        ({}, "A random split needs test_size"),
        ({"strategy": "time"}, r"needs test_size or time bounds"),
        ({"strategy": "randm", "test_size": 0.2}, r"strategy must be one of .* Did you mean 'random'"),
        ({"strategy": "group", "test_size": 0.2}, "strategy='group' needs group_column"),
        ({"strategy": "random", "test_size": 0.2, "group_column": "g"},
         "group_column='g' only applies to strategy='group'"),
        ({"strategy": "random", "train_end": "2024-01-01"}, r"Time bounds \['train_end'\] only apply"),
        ({"test_size": 0.2, "gap": "1D"}, "gap only applies to strategy='time'"),
        ({"train_end": "2024-01-01", "gap": "-1h"}, "gap must be a non-negative duration"),
        ({"train_end": "2024-01-01", "gap": 5}, "gap must be a pandas.Timedelta"),
        ({"train_end": "2024-01-01", "test_start": "2024-01-02", "test_end": "2024-01-02"},
         r"test window \[2024-01-02T00:00:00\+00:00, 2024-01-02T00:00:00\+00:00\) is empty or reversed"),
        ({"train_start": "2024-02-01", "train_end": "2024-01-01"}, "train window .* is empty or reversed"),
        ({"train_end": "2024-02-01", "test_start": "2024-01-15"},
         r"train window .* overlaps the test window .* Got test_start=2024-01-15"),
        ({"train_end": "2024-01-10", "validation_end": "2024-01-05", "test_start": "2024-01-20",
          "three_way": True}, "validation window .* is empty or reversed"),
        ({"train_end": "2024-01-10", "three_way": True}, r"could not derive \['validation_end', 'test_start'\]"),
        ({"train_start": "2024-01-01"}, r"could not derive \['train_end', 'test_start'\]"),
        ({"train_end": "2024-01-10", "validation_start": "2024-01-10"},
         "validation_start/validation_end are only for train/validation/test"),
        ({"train_end": "not a date"}, "train_end must be an ISO-8601 string"),
        ({"seed": -1, "test_size": 0.2}, "seed must be a non-negative integer. Got -1"),
        ({"seed": None, "test_size": 0.2}, "seed must be a non-negative integer. Got None"),
    ],
)
def test_bad_split_arguments(kwargs, pattern):
    kwargs = {"seed": 0, **kwargs}
    with pytest.raises(InvalidArgumentError, match=pattern):
        make_split_spec(**kwargs)


def test_assign_splits_rejects_non_spec():
    with pytest.raises(InvalidArgumentError, match="spec must be a SplitSpec"):
        assign_splits(_frame(10, 0), {"strategy": "random"})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- k-fold


@HYP
@given(n=st.integers(10, 300), k=st.integers(2, 10), seed=st.integers(0, 2**31), strat=st.booleans())
def test_kfold_partitions_rows(n, k, seed, strat):
    labels = np.random.default_rng(seed).integers(0, 2, n) if strat else None
    if labels is not None and np.bincount(labels, minlength=2).min() < k:
        return
    folds = kfold_indices(n, k, seed, stratify=labels)
    assert len(folds) == k
    val = np.concatenate([v for _, v in folds])
    assert sorted(val.tolist()) == list(range(n))
    sizes_ = [len(v) for _, v in folds]
    assert max(sizes_) - min(sizes_) <= 1
    for tr, va in folds:
        assert len(np.intersect1d(tr, va)) == 0 and len(tr) + len(va) == n
        if labels is not None:
            for c in (0, 1):
                assert abs((labels[va] == c).sum() - (labels == c).sum() / k) < 1 + 1e-9


def test_kfold_deterministic_and_errors():
    a = kfold_indices(50, 5, 1)
    b = kfold_indices(50, 5, 1)
    c = kfold_indices(50, 5, 2)
    assert all((x[1] == y[1]).all() for x, y in zip(a, b))
    assert not all((x[1] == y[1]).all() for x, y in zip(a, c))
    with pytest.raises(InvalidArgumentError, match="k must be an integer of at least 2. Got 1"):
        kfold_indices(10, 1, 0)
    with pytest.raises(InvalidArgumentError, match=r"k must be at most the number of rows \(3\)"):
        kfold_indices(3, 4, 0)
    with pytest.raises(InvalidArgumentError, match=r"class 'b' has 2 row\(s\), fewer than k=3"):
        kfold_indices(10, 3, 0, stratify=["a"] * 8 + ["b"] * 2)
    with pytest.raises(InvalidArgumentError, match=r"one value per row \(10\). Got 9"):
        kfold_indices(10, 3, 0, stratify=[0] * 9)


def test_epoch_ms_event_times_with_nulls_are_still_milliseconds():
    """A bigint event time holding a null reaches pandas as floats: still epoch milliseconds
    (read as nanoseconds, every row fell before 1970-01-02 and the windows split wrongly)."""
    days = [pd.Timestamp(f"2024-01-0{d}", tz="UTC").value // 10**6 for d in range(1, 9)]
    whole = pd.DataFrame({"t": np.array(days, dtype=np.int64)})
    holed = pd.DataFrame({"t": np.array(days[:-1] + [np.nan])})
    spec = make_split_spec("time", seed=1, train_end="2024-01-05", test_start="2024-01-05")
    assert assign_split_codes(whole, spec, event_time_column="t").tolist() == [0] * 4 + [1] * 4
    codes = assign_split_codes(holed, spec, event_time_column="t")
    assert codes[:7].tolist() == [0] * 4 + [1] * 3 and codes[7] == NO_SPLIT
    sized = resolve_time_bounds(holed, make_split_spec("time", seed=1, test_size=0.25),
                                event_time_column="t")
    assert sized.test_start.year == 2024
