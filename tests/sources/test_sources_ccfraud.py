"""Synthetic credit-card fraud source: schema, labels, joins, determinism, windows, scale."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError
from feature_views.ccfraud import source as ccfraud


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return ccfraud.load(n_transactions=50_000, seed=42)


def _labelled(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The feature view's label join: LEFT JOIN cc_fraud on t_id, fillna(0)."""
    labels = frames["cc_fraud"][["t_id", "is_fraud"]]
    df = frames["transactions"].merge(labels, on="t_id", how="left")
    df["is_fraud"] = df["is_fraud"].fillna(0).astype("int64")
    return df


def test_load_follows_rules(frames: dict[str, pd.DataFrame], assert_follows_rules) -> None:
    assert_follows_rules(frames, ccfraud.FEATURE_GROUPS)
    assert len(frames["transactions"]) == 50_000
    assert frames["transactions"]["event_time"].is_monotonic_increasing
    assert frames["transactions"]["event_time"].min() >= ccfraud.PERIOD_START
    assert frames["transactions"]["event_time"].max() < ccfraud.PERIOD_END


def test_label_group_holds_only_frauds(frames: dict[str, pd.DataFrame]) -> None:
    tx, fraud = frames["transactions"], frames["cc_fraud"]
    assert 0.001 <= len(fraud) / len(tx) <= 0.01
    assert (fraud["is_fraud"] == 1).all()
    assert fraud["t_id"].isin(tx["t_id"]).all()
    joined = fraud.merge(tx[["t_id", "event_time"]], on="t_id", suffixes=("", "_tx"))
    assert (joined["event_time"] == joined["event_time_tx"]).all()
    labelled = _labelled(frames)
    assert len(labelled) == len(tx) and labelled["is_fraud"].sum() == len(fraud)


def test_labels_are_declared_known_at_their_transaction_time(frames: dict[str, pd.DataFrame]) -> None:
    fraud = frames["cc_fraud"]
    assert ccfraud.CC_FRAUD.ingestion_time == "known_at"
    assert (fraud["known_at"] == fraud["event_time"]).all() and len(fraud) > 0


def test_foreign_keys_resolve(frames: dict[str, pd.DataFrame]) -> None:
    tx, cards = frames["transactions"], frames["card_details"]
    assert tx["cc_num"].isin(cards["cc_num"]).all()
    assert tx["merchant_id"].isin(frames["merchant_details"]["merchant_id"]).all()
    assert cards["account_id"].isin(frames["account_details"]["account_id"]).all()
    assert cards["bank_id"].isin(frames["bank_details"]["bank_id"]).all()
    digits = cards["cc_num"].astype(str)
    assert (digits.str.len() == 16).all() and digits.str.startswith("4").all()
    for number in digits.head(50):  # Luhn check digit
        doubled = [int(d) * (2 if i % 2 else 1) for i, d in enumerate(reversed(number))]
        assert sum(d - 9 if d > 9 else d for d in doubled) % 10 == 0, number


def test_fraud_patterns_are_learnable(frames: dict[str, pd.DataFrame]) -> None:
    df = _labelled(frames)
    df = df.merge(frames["card_details"][["cc_num", "bank_id"]], on="cc_num")
    df = df.merge(frames["bank_details"].rename(columns={"country": "home_country"}), on="bank_id")
    df = df.merge(frames["merchant_details"][["merchant_id", "category"]], on="merchant_id")
    abroad = df["country"] != df["home_country"]
    assert df.loc[abroad, "is_fraud"].mean() > 20 * df.loc[~abroad, "is_fraud"].mean()
    amount = df.groupby("is_fraud")["amount"].median()
    assert amount[1] > 3 * amount[0]
    risky = df["category"].isin(ccfraud.HIGH_RISK_CATEGORIES)
    assert df.loc[risky, "is_fraud"].mean() > 3 * df.loc[~risky, "is_fraud"].mean()


def test_same_seed_gives_identical_frames(frames: dict[str, pd.DataFrame]) -> None:
    again = ccfraud.load(n_transactions=50_000, seed=42)
    for name, frame in frames.items():
        pd.testing.assert_frame_equal(frame, again[name])
    other = ccfraud.load(n_transactions=50_000, seed=43)
    assert not other["transactions"]["amount"].equals(frames["transactions"]["amount"])


def test_window_is_half_open(frames: dict[str, pd.DataFrame], assert_follows_rules) -> None:
    t = frames["transactions"]["event_time"].iloc[20_000].to_pydatetime()
    before = ccfraud.load(n_transactions=50_000, seed=42, end=t)
    after = ccfraud.load(n_transactions=50_000, seed=42, start=t)
    assert_follows_rules(after, ccfraud.FEATURE_GROUPS)
    assert (before["transactions"]["event_time"] < t).all()
    assert (after["transactions"]["event_time"] >= t).all()
    assert (after["transactions"]["event_time"] == t).any()
    assert len(before["transactions"]) + len(after["transactions"]) == 50_000
    assert len(before["cc_fraud"]) + len(after["cc_fraud"]) == len(frames["cc_fraud"])
    assert len(after["card_details"]) == len(frames["card_details"])
    tail = frames["transactions"].iloc[len(before["transactions"]) :].reset_index(drop=True)
    pd.testing.assert_frame_equal(after["transactions"], tail)
    march = ccfraud.load(
        10_000, start=datetime(2024, 3, 1, tzinfo=timezone.utc), end=datetime(2024, 4, 1, tzinfo=timezone.utc)
    )
    assert march["transactions"]["event_time"].dt.month.unique().tolist() == [3]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_transactions": 10}, "n_transactions"),
        ({"seed": -1}, "seed"),
        ({"n_transactions": 1.5e6}, "n_transactions"),
    ],
)
def test_bad_parameters_are_rejected(kwargs: dict, name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"'{name}'"):
        ccfraud.load(**kwargs)


def test_small_and_one_million_rows() -> None:
    small = ccfraud.load(n_transactions=100, seed=0)
    assert len(small["transactions"]) == 100 and len(small["cc_fraud"]) >= 1
    started = time.perf_counter()
    big = ccfraud.load(n_transactions=1_000_000, seed=1)
    elapsed = time.perf_counter() - started
    assert len(big["transactions"]) == 1_000_000
    assert 0.004 <= len(big["cc_fraud"]) / 1_000_000 <= 0.006
    assert big["transactions"]["t_id"].is_unique
    assert elapsed < 30, f"1M transactions took {elapsed:.1f}s"
