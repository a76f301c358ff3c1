"""Seeded synthetic credit-card fraud data, modelled on the credit-card example of the training
pipelines chapter: a ``transactions`` root group, a ``cc_fraud`` label group holding only the
fraudulent transactions (build labels with LEFT JOIN on ``t_id`` + ``fillna(0)``), and the
``card_details`` → ``account_details``/``bank_details`` and ``merchant_details`` groups.

Everything is generated with vectorised numpy from ``numpy.random.default_rng(seed)``: the same
``(n_transactions, seed)`` gives identical frames, and 10M transactions fit in a few GiB.

Join graph (foreign keys use the primary-key column name of the group they point to)::

    transactions.t_id        → cc_fraud.t_id (label; rows only for frauds)
    transactions.cc_num      → card_details.cc_num
    transactions.merchant_id → merchant_details.merchant_id
    card_details.account_id  → account_details.account_id
    card_details.bank_id     → bank_details.bank_id

Patterns a model can learn (about 0.5% of transactions are fraud)
-----------------------------------------------------------------
* Frauds come in bursts on a compromised card: 1-8 transactions a few seconds to minutes apart.
* A burst often starts with a tiny "card test" amount (0.50-5.00), then amounts spike (median
  about 270 vs about 40 for ordinary purchases).
* 85% of bursts happen in a country other than the card's home country (the country of its bank,
  ``bank_details.country``); ordinary purchases are abroad about 3% of the time.
* Fraud favours high-risk merchant categories (electronics, jewelry, online_gaming, travel), the
  ``online`` channel, and any hour of the day (ordinary purchases follow a daytime curve).
* Cards of older cardholders (``cardholder_age_group == "65+"``) are compromised more often: a
  deliberate skew for bias tests on the helper columns ``cardholder_gender``/``cardholder_age_group``.

Transactions span ``PERIOD_START`` (2024-01-01 UTC) to ``PERIOD_END`` (2024-07-01 UTC).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd

from feature_views.ccfraud.features import engineer as derive
from feature_views.source_common import (
    check_positive_int,
    check_seed,
    check_window,
    in_window,
)
from feature_views.source_spec import Expectation, FeatureGroupSpec

__all__ = [
    "CATEGORIES",
    "COUNTRIES",
    "FEATURE_GROUPS",
    "FRAUD_RATE",
    "HIGH_RISK_CATEGORIES",
    "MIN_TRANSACTIONS",
    "PERIOD_END",
    "PERIOD_START",
    "load",
]

PERIOD_START = pd.Timestamp("2024-01-01T00:00:00Z").as_unit("ns")
PERIOD_DAYS = 182
PERIOD_END = PERIOD_START + pd.Timedelta(days=PERIOD_DAYS)
FRAUD_RATE = 0.005
MIN_TRANSACTIONS = 100
_DAY_S = 86_400

# country code, share of cardholders/banks/merchants, centroid latitude, longitude, UTC offset (h)
_COUNTRY_TABLE = [
    ("US", 0.34, 39.8, -98.6, -6),
    ("GB", 0.12, 54.0, -2.0, 0),
    ("DE", 0.10, 51.2, 10.4, 1),
    ("FR", 0.08, 46.6, 2.4, 1),
    ("ES", 0.05, 40.4, -3.7, 1),
    ("IT", 0.05, 42.8, 12.6, 1),
    ("NL", 0.04, 52.1, 5.3, 1),
    ("SE", 0.04, 62.0, 15.0, 1),
    ("CA", 0.05, 56.1, -106.3, -6),
    ("MX", 0.03, 23.6, -102.6, -6),
    ("BR", 0.03, -14.2, -51.9, -3),
    ("IN", 0.03, 21.0, 78.0, 5),
    ("JP", 0.03, 36.2, 138.3, 9),
    ("AU", 0.01, -25.3, 133.8, 10),
]
COUNTRIES: tuple[str, ...] = tuple(row[0] for row in _COUNTRY_TABLE)
_COUNTRY_P = np.array([row[1] for row in _COUNTRY_TABLE]) / sum(row[1] for row in _COUNTRY_TABLE)
_COUNTRY_LAT = np.array([row[2] for row in _COUNTRY_TABLE])
_COUNTRY_LON = np.array([row[3] for row in _COUNTRY_TABLE])
_COUNTRY_UTC_OFFSET_S = np.array([row[4] for row in _COUNTRY_TABLE], dtype=np.int64) * 3600

# category, share of merchants, log-mean amount of ordinary purchases, high risk
_CATEGORY_TABLE = [
    ("grocery", 0.22, 3.5, False),
    ("restaurant", 0.18, 3.3, False),
    ("gas_station", 0.10, 3.7, False),
    ("pharmacy", 0.07, 3.2, False),
    ("clothing", 0.12, 4.0, False),
    ("entertainment", 0.09, 3.4, False),
    ("travel", 0.06, 5.3, True),
    ("electronics", 0.07, 4.8, True),
    ("jewelry", 0.03, 5.0, True),
    ("online_gaming", 0.06, 3.0, True),
]
CATEGORIES: tuple[str, ...] = tuple(row[0] for row in _CATEGORY_TABLE)
HIGH_RISK_CATEGORIES: tuple[str, ...] = tuple(row[0] for row in _CATEGORY_TABLE if row[3])
_CATEGORY_P = np.array([row[1] for row in _CATEGORY_TABLE]) / sum(row[1] for row in _CATEGORY_TABLE)
_CATEGORY_LOG_MEAN = np.array([row[2] for row in _CATEGORY_TABLE])
_CATEGORY_HIGH_RISK = np.array([row[3] for row in _CATEGORY_TABLE])

CHANNELS: tuple[str, ...] = ("pos", "online")
CARD_TYPES: tuple[str, ...] = ("debit", "credit", "prepaid")
GENDERS: tuple[str, ...] = ("F", "M")
AGE_GROUPS: tuple[str, ...] = ("18-25", "26-35", "36-50", "51-65", "65+")
CREDIT_RATINGS: tuple[str, ...] = ("AAA", "AA", "A", "BBB", "BB", "B")
_AGE_GROUP_P = np.array([0.14, 0.22, 0.30, 0.22, 0.12])
_AGE_GROUP_FRAUD_RISK = np.array([1.0, 1.0, 1.0, 1.2, 2.0])
_CREDIT_LIMITS: tuple[float, ...] = (1000.0, 2500.0, 5000.0, 10000.0, 20000.0)


def _e(type_: str, **kwargs: object) -> Expectation:
    return Expectation(type_, dict(kwargs))


_TAGS: dict[str, object] = {"source": "synthetic-ccfraud"}

TRANSACTIONS = FeatureGroupSpec(
    name="transactions",
    version=1,
    primary_key=("t_id",),
    event_time="event_time",
    description="Credit-card transactions (root feature group); labels are in cc_fraud.",
    feature_descriptions={
        "t_id": "Transaction id, increasing with event time.",
        "event_time": "Time of the transaction, UTC (event time).",
        "cc_num": "Card number; foreign key to card_details.cc_num.",
        "merchant_id": "Merchant; foreign key to merchant_details.merchant_id.",
        "amount": "Amount in USD.",
        "channel": "pos (card present) or online.",
        "country": "Country of the terminal (pos) or of the geolocated IP address (online), ISO 3166 alpha-2.",
        "latitude": "Latitude of the terminal / geolocated IP address.",
        "longitude": "Longitude of the terminal / geolocated IP address.",
    },
    tags={**_TAGS, "pii": False},
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="t_id"),
        _e("ExpectColumnValuesToBeUnique", column="t_id"),
        _e("ExpectColumnValuesToNotBeNull", column="event_time"),
        _e("ExpectColumnValuesToNotBeNull", column="cc_num"),
        _e("ExpectColumnValuesToNotBeNull", column="merchant_id"),
        _e("ExpectColumnValuesToBeBetween", column="amount", min_value=0.01, max_value=100_000),
        _e("ExpectColumnValuesToBeInSet", column="channel", value_set=list(CHANNELS)),
        _e("ExpectColumnValuesToBeInSet", column="country", value_set=list(COUNTRIES)),
        _e("ExpectColumnValuesToBeBetween", column="latitude", min_value=-90, max_value=90),
        _e("ExpectColumnValuesToBeBetween", column="longitude", min_value=-180, max_value=180),
    ),
)

CC_FRAUD = FeatureGroupSpec(
    name="cc_fraud",
    version=1,
    primary_key=("t_id",),
    event_time="event_time",
    description=(
        "Label group: one row per transaction confirmed as fraud (is_fraud = 1); transactions "
        "without a row are legitimate: LEFT JOIN on t_id and fillna(0)."
    ),
    feature_descriptions={
        "t_id": "Transaction id; same as transactions.t_id.",
        "event_time": "Time of the transaction, UTC (event time; same as transactions.event_time).",
        "is_fraud": "Label: 1 for every row (only frauds are stored).",
        "known_at": "When the row became known (ingestion time), UTC: the transaction's time "
                    "(the generator fixes each label with its transaction; see LABEL_KNOWN_AT).",
    },
    tags={**_TAGS, "label_group": True},
    feature_tags={"is_fraud": {"label": True}},
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="t_id"),
        _e("ExpectColumnValuesToBeUnique", column="t_id"),
        _e("ExpectColumnValuesToNotBeNull", column="event_time"),
        _e("ExpectColumnValuesToBeInSet", column="is_fraud", value_set=[1]),
    ),
    ingestion_time="known_at",
)

#: What ``cc_fraud.known_at`` means. The generator decides a transaction's label when it
#: generates the transaction (a burst on a compromised card) and models no confirmation delay
#: (a chargeback weeks later), so each label row is known at its transaction's event time. The
#: group holds the view's **label**, LEFT-joined point-in-time on ``t_id`` at that same time: a
#: confirmation delay declared here would count every fraud as late data and make an as-known
#: view fill every label with 0, though a label is the training target, never an input a model
#: serving then reads. Deterministic (the event time itself), so versions re-read identically;
#: without it the history, generated and loaded in one commit today, made every label "late".
LABEL_KNOWN_AT = "event_time"

CARD_DETAILS = FeatureGroupSpec(
    name="card_details",
    version=1,
    primary_key=("cc_num",),
    event_time=None,
    description="Payment cards: account, issuing bank, type, expiry and cardholder helper columns.",
    feature_descriptions={
        "cc_num": "16-digit card number (Luhn-valid, synthetic). PII.",
        "account_id": "Account; foreign key to account_details.account_id.",
        "bank_id": "Issuing bank; foreign key to bank_details.bank_id.",
        "card_type": "debit, credit or prepaid.",
        "expiry_date": "First day of the month the card expires, UTC.",
        "cardholder_gender": "Cardholder gender (F/M). PII; helper column for bias tests only.",
        "cardholder_age_group": "Cardholder age group. PII; helper column for bias tests only.",
    },
    tags={**_TAGS, "pii": True},
    feature_tags={
        "cc_num": {"pii": True},
        "cardholder_gender": {"pii": True, "helper": True},
        "cardholder_age_group": {"pii": True, "helper": True},
    },
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="cc_num"),
        _e("ExpectColumnValuesToBeUnique", column="cc_num"),
        _e(
            "ExpectColumnValuesToBeBetween",
            column="cc_num",
            min_value=4_000_000_000_000_000,
            max_value=4_999_999_999_999_999,
        ),
        _e("ExpectColumnValuesToNotBeNull", column="account_id"),
        _e("ExpectColumnValuesToNotBeNull", column="bank_id"),
        _e("ExpectColumnValuesToBeInSet", column="card_type", value_set=list(CARD_TYPES)),
        _e("ExpectColumnValuesToNotBeNull", column="expiry_date"),
        _e("ExpectColumnValuesToBeInSet", column="cardholder_gender", value_set=list(GENDERS)),
        _e("ExpectColumnValuesToBeInSet", column="cardholder_age_group", value_set=list(AGE_GROUPS)),
    ),
)

ACCOUNT_DETAILS = FeatureGroupSpec(
    name="account_details",
    version=1,
    primary_key=("account_id",),
    event_time=None,
    description="Card accounts: creation date, credit limit and debt at the end of the previous month.",
    feature_descriptions={
        "account_id": "Account id.",
        "creation_date": "Date the account was opened, UTC.",
        "credit_limit": "Credit limit, USD.",
        "debt_end_prev_month": "Outstanding debt at the end of the previous month, USD.",
    },
    tags=dict(_TAGS),
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="account_id"),
        _e("ExpectColumnValuesToBeUnique", column="account_id"),
        _e("ExpectColumnValuesToNotBeNull", column="creation_date"),
        _e("ExpectColumnValuesToBeInSet", column="credit_limit", value_set=list(_CREDIT_LIMITS)),
        _e("ExpectColumnValuesToBeBetween", column="debt_end_prev_month", min_value=0, max_value=20_000),
    ),
)

BANK_DETAILS = FeatureGroupSpec(
    name="bank_details",
    version=1,
    primary_key=("bank_id",),
    event_time=None,
    description="Issuing banks: credit rating and country (the home country of their cards).",
    feature_descriptions={
        "bank_id": "Bank id.",
        "credit_rating": "Credit rating of the bank (AAA ... B).",
        "country": "Country of the bank, ISO 3166 alpha-2; the home country of its cards.",
    },
    tags=dict(_TAGS),
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="bank_id"),
        _e("ExpectColumnValuesToBeUnique", column="bank_id"),
        _e("ExpectColumnValuesToBeInSet", column="credit_rating", value_set=list(CREDIT_RATINGS)),
        _e("ExpectColumnValuesToBeInSet", column="country", value_set=list(COUNTRIES)),
    ),
)

MERCHANT_DETAILS = FeatureGroupSpec(
    name="merchant_details",
    version=1,
    primary_key=("merchant_id",),
    event_time=None,
    description="Merchants: category and country.",
    feature_descriptions={
        "merchant_id": "Merchant id.",
        "category": "Merchant category.",
        "country": "Country of the merchant, ISO 3166 alpha-2.",
    },
    tags=dict(_TAGS),
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="merchant_id"),
        _e("ExpectColumnValuesToBeUnique", column="merchant_id"),
        _e("ExpectColumnValuesToBeInSet", column="category", value_set=list(CATEGORIES)),
        _e("ExpectColumnValuesToBeInSet", column="country", value_set=list(COUNTRIES)),
    ),
)

FEATURE_GROUPS: tuple[FeatureGroupSpec, ...] = (
    TRANSACTIONS,
    CC_FRAUD,
    CARD_DETAILS,
    ACCOUNT_DETAILS,
    BANK_DETAILS,
    MERCHANT_DETAILS,
)


# --------------------------------------------------------------------------------- entities


@dataclass(frozen=True)
class _Sizes:
    banks: int
    accounts: int
    cards: int
    merchants: int
    frauds: int


def _sizes(n_transactions: int) -> _Sizes:
    """Entity counts for ``n_transactions`` (about 40 transactions per card, 200 per merchant)."""
    cards = int(np.clip(n_transactions // 40, 100, 5_000_000))
    return _Sizes(
        banks=40,
        accounts=max(80, int(cards * 0.85)),
        cards=cards,
        merchants=int(np.clip(n_transactions // 200, 300, 500_000)),
        frauds=max(1, round(n_transactions * FRAUD_RATE)),
    )


def _labels(values: tuple[str, ...], codes: np.ndarray) -> np.ndarray:
    """Object array of strings for integer codes (rows share the same str objects: 8 B/row)."""
    return np.asarray(values, dtype=object)[codes]


def _utc(ns: np.ndarray) -> pd.Series:
    """int64 nanoseconds since the epoch → datetime64[ns, UTC] Series."""
    return pd.Series(ns.astype("datetime64[ns]")).dt.tz_localize("UTC")


def _covering_codes(rng: np.random.Generator, n: int, p: np.ndarray) -> np.ndarray:
    """Draw ``n`` codes with probabilities ``p``, every code appearing at least once (n >= len(p))."""
    codes = rng.choice(len(p), size=n, p=p)
    codes[: len(p)] = rng.permutation(len(p))
    return codes


def _card_numbers(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` distinct Luhn-valid 16-digit numbers starting with 4 (a bijection of 0..n-1, no loops)."""
    modulus = 10**14
    # odd and not a multiple of 5, so coprime with 10**14; n * multiplier < 2**63 for n <= 5M cards
    multiplier = 1_618_033_988_751
    offset = int(rng.integers(0, modulus))
    body = 4 * modulus + ((np.arange(n, dtype=np.int64) * multiplier) % modulus + offset) % modulus
    total = np.zeros(n, dtype=np.int64)
    for position in range(15):  # digits of the 15-digit body, rightmost first; 15 array ops, not rows
        digit = (body // 10**position) % 10
        if position % 2 == 0:
            digit = digit * 2
            digit = np.where(digit > 9, digit - 9, digit)
        total += digit
    return body * 10 + (10 - total % 10) % 10


def _banks(rng: np.random.Generator, sizes: _Sizes) -> tuple[pd.DataFrame, np.ndarray]:
    """bank_details and each bank's country code."""
    country = _covering_codes(rng, sizes.banks, _COUNTRY_P)
    rating = rng.choice(len(CREDIT_RATINGS), size=sizes.banks, p=[0.1, 0.2, 0.3, 0.25, 0.1, 0.05])
    frame = pd.DataFrame(
        {
            "bank_id": np.arange(1, sizes.banks + 1, dtype=np.int64),
            "credit_rating": _labels(CREDIT_RATINGS, rating),
            "country": _labels(COUNTRIES, country),
        }
    )
    return frame, country


def _accounts(rng: np.random.Generator, sizes: _Sizes) -> tuple[pd.DataFrame, np.ndarray]:
    """account_details and each account's bank index (0-based)."""
    n = sizes.accounts
    bank = rng.integers(0, sizes.banks, size=n)
    age_days = rng.integers(30, 15 * 365, size=n)
    created_ns = PERIOD_START.value - age_days.astype(np.int64) * _DAY_S * 10**9
    limit = rng.choice(np.array(_CREDIT_LIMITS), size=n, p=[0.15, 0.25, 0.3, 0.2, 0.1])
    utilisation = np.where(rng.random(n) < 0.3, 0.0, rng.beta(2.0, 5.0, size=n))
    frame = pd.DataFrame(
        {
            "account_id": np.arange(1, n + 1, dtype=np.int64),
            "creation_date": _utc(created_ns),
            "credit_limit": limit,
            "debt_end_prev_month": np.round(limit * utilisation, 2),
        }
    )
    return frame, bank


@dataclass(frozen=True)
class _Cards:
    frame: pd.DataFrame
    home: np.ndarray  # country code of each card (its bank's country)
    activity: np.ndarray  # probability of each card for ordinary purchases
    fraud_risk: np.ndarray  # probability of each card being compromised


def _cards(
    rng: np.random.Generator, sizes: _Sizes, account_bank: np.ndarray, bank_country: np.ndarray
) -> _Cards:
    """card_details plus the per-card arrays the transaction generator needs."""
    n = sizes.cards
    account = np.concatenate(
        [rng.permutation(sizes.accounts), rng.integers(0, sizes.accounts, size=n - sizes.accounts)]
    )
    bank = account_bank[account]
    card_type = rng.choice(len(CARD_TYPES), size=n, p=[0.55, 0.40, 0.05])
    gender = rng.integers(0, len(GENDERS), size=n)
    age_group = rng.choice(len(AGE_GROUPS), size=n, p=_AGE_GROUP_P)
    expiry_months = rng.integers(1, 60, size=n)
    start_month = PERIOD_START.tz_localize(None).to_datetime64().astype("datetime64[M]")
    expiry = (start_month + expiry_months).astype("datetime64[ns]")
    frame = pd.DataFrame(
        {
            "cc_num": _card_numbers(rng, n),
            "account_id": account.astype(np.int64) + 1,
            "bank_id": bank.astype(np.int64) + 1,
            "card_type": _labels(CARD_TYPES, card_type),
            "expiry_date": pd.Series(expiry).dt.tz_localize("UTC"),
            "cardholder_gender": _labels(GENDERS, gender),
            "cardholder_age_group": _labels(AGE_GROUPS, age_group),
        }
    )
    activity = rng.gamma(2.0, 1.0, size=n)
    risk = _AGE_GROUP_FRAUD_RISK[age_group] * np.where(card_type == 1, 1.3, 1.0)
    return _Cards(frame, bank_country[bank], activity / activity.sum(), risk / risk.sum())


@dataclass(frozen=True)
class _Merchants:
    frame: pd.DataFrame
    order: np.ndarray  # merchant indices sorted by country
    block: np.ndarray  # block[c]:block[c+1] = positions in `order` of country c
    cum_normal: np.ndarray  # cumulative popularity along `order`, starting at 0
    cum_fraud: np.ndarray  # cumulative popularity × high-risk boost along `order`
    category: np.ndarray
    country: np.ndarray


def _merchants(rng: np.random.Generator, sizes: _Sizes) -> _Merchants:
    """merchant_details plus per-country cumulative weights for vectorised weighted picks."""
    n = sizes.merchants
    country = _covering_codes(rng, n, _COUNTRY_P)
    category = _covering_codes(rng, n, _CATEGORY_P)
    popularity = rng.pareto(1.5, size=n) + 1.0
    order = np.argsort(country, kind="stable")
    block = np.searchsorted(country[order], np.arange(len(COUNTRIES) + 1))
    fraud_weight = popularity * np.where(_CATEGORY_HIGH_RISK[category], 8.0, 1.0)
    frame = pd.DataFrame(
        {
            "merchant_id": np.arange(1, n + 1, dtype=np.int64),
            "category": _labels(CATEGORIES, category),
            "country": _labels(COUNTRIES, country),
        }
    )
    return _Merchants(
        frame=frame,
        order=order,
        block=block,
        cum_normal=np.concatenate([[0.0], np.cumsum(popularity[order])]),
        cum_fraud=np.concatenate([[0.0], np.cumsum(fraud_weight[order])]),
        category=category,
        country=country,
    )


def _pick_merchants(
    rng: np.random.Generator, merchants: _Merchants, cum: np.ndarray, country: np.ndarray | None, n: int
) -> np.ndarray:
    """Weighted merchant pick per row, within the row's country block (or globally if None)."""
    if country is None:
        lo = np.zeros(n, dtype=np.int64)
        hi = np.full(n, len(merchants.order), dtype=np.int64)
    else:
        lo, hi = merchants.block[country], merchants.block[country + 1]
    target = cum[lo] + rng.random(n) * (cum[hi] - cum[lo])
    position = np.clip(np.searchsorted(cum, target, side="right") - 1, lo, hi - 1)
    return merchants.order[position]


def _pick_by_channel(
    rng: np.random.Generator,
    merchants: _Merchants,
    cum: np.ndarray,
    channel: np.ndarray,
    country: np.ndarray,
) -> np.ndarray:
    """Merchants for rows: pos rows (channel 0) in the row's country, online rows anywhere."""
    merchant = np.empty(len(channel), dtype=np.int64)
    pos = channel == 0
    merchant[pos] = _pick_merchants(rng, merchants, cum, country[pos], int(pos.sum()))
    merchant[~pos] = _pick_merchants(rng, merchants, cum, None, int((~pos).sum()))
    return merchant


# ------------------------------------------------------------------------------ transactions


@dataclass
class _Block:
    """Columns of generated transactions, as numpy arrays (before sorting by time)."""

    seconds: np.ndarray
    card: np.ndarray
    merchant: np.ndarray
    amount: np.ndarray
    channel: np.ndarray
    country: np.ndarray


def _ordinary(rng: np.random.Generator, n: int, cards: _Cards, merchants: _Merchants) -> _Block:
    """Legitimate purchases: daytime, mostly at home, amounts by merchant category."""
    card = rng.choice(len(cards.activity), size=n, p=cards.activity)
    home = cards.home[card]
    channel = (rng.random(n) < 0.35).astype(np.int64)  # 1 = online
    abroad = (channel == 0) & (rng.random(n) < 0.03)
    country = np.where(abroad, (home + rng.integers(1, len(COUNTRIES), size=n)) % len(COUNTRIES), home)
    merchant = _pick_by_channel(rng, merchants, merchants.cum_normal, channel, country)
    log_mean = _CATEGORY_LOG_MEAN[merchants.category[merchant]]
    amount = np.maximum(np.round(np.exp(rng.normal(log_mean, 0.7)), 2), 0.5)
    local_second = np.mod(rng.normal(14.0 * 3600, 3.5 * 3600, size=n), _DAY_S).astype(np.int64)
    day = rng.integers(0, PERIOD_DAYS, size=n)
    seconds = np.mod(day * _DAY_S + local_second - _COUNTRY_UTC_OFFSET_S[country], PERIOD_DAYS * _DAY_S)
    return _Block(seconds, card, merchant, amount, channel, country)


def _burst_sizes(rng: np.random.Generator, n_frauds: int) -> np.ndarray:
    """Burst lengths (1-8) summing to exactly ``n_frauds``."""
    sizes = rng.integers(1, 9, size=n_frauds)  # n_frauds bursts always suffice
    ends = np.cumsum(sizes)
    count = int(np.searchsorted(ends, n_frauds)) + 1
    sizes = sizes[:count].copy()
    sizes[-1] -= ends[count - 1] - n_frauds
    return sizes


def _frauds(rng: np.random.Generator, n: int, cards: _Cards, merchants: _Merchants) -> _Block:
    """Fraud bursts on compromised cards: card test, then spikes, abroad, high-risk, any hour."""
    sizes = _burst_sizes(rng, n)
    bursts = len(sizes)
    burst = np.repeat(np.arange(bursts), sizes)
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    is_first = np.zeros(n, dtype=bool)
    is_first[first] = True

    burst_card = rng.choice(len(cards.fraud_risk), size=bursts, p=cards.fraud_risk)
    home = cards.home[burst_card]
    abroad = rng.random(bursts) < 0.85
    foreign = (home + rng.integers(1, len(COUNTRIES), size=bursts)) % len(COUNTRIES)
    burst_country = np.where(abroad, foreign, home)
    burst_channel = (rng.random(bursts) < 0.75).astype(np.int64)
    burst_start = rng.integers(0, PERIOD_DAYS * _DAY_S - _DAY_S, size=bursts)
    card_test = rng.random(bursts) < 0.6

    gaps = np.where(is_first, 0, np.round(rng.exponential(90.0, size=n) + 5.0)).astype(np.int64)
    cumulative = np.cumsum(gaps)
    seconds = burst_start[burst] + cumulative - cumulative[first][burst]

    country = burst_country[burst]
    channel = burst_channel[burst]
    merchant = _pick_by_channel(rng, merchants, merchants.cum_fraud, channel, country)
    spike = np.round(np.exp(rng.normal(5.6, 0.8, size=n)), 2)
    tiny = np.round(rng.uniform(0.5, 5.0, size=n), 2)
    amount = np.maximum(np.where(is_first & card_test[burst], tiny, spike), 0.5)
    return _Block(seconds, burst_card[burst], merchant, amount, channel, country)


def _transactions(
    rng: np.random.Generator, sizes: _Sizes, n_transactions: int, cards: _Cards, merchants: _Merchants
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """transactions and cc_fraud frames, ordered by event time; t_id is the 0-based rank."""
    normal = _ordinary(rng, n_transactions - sizes.frauds, cards, merchants)
    fraud = _frauds(rng, sizes.frauds, cards, merchants)
    seconds = np.concatenate([normal.seconds, fraud.seconds])
    # order by time, ties broken at random: seconds (< 2**25) in the high bits, random low bits
    tie_break = rng.integers(0, 2**32, size=len(seconds), dtype=np.int64)
    order = np.argsort((seconds << 32) | tie_break)
    is_fraud = np.zeros(len(seconds), dtype=bool)
    is_fraud[len(normal.seconds) :] = True
    is_fraud = is_fraud[order]

    def column(name: str) -> np.ndarray:
        return np.concatenate([getattr(normal, name), getattr(fraud, name)])[order]

    country = column("country")
    event_time = _utc(PERIOD_START.value + seconds[order] * 10**9)
    n = len(seconds)
    transactions = pd.DataFrame(
        {
            "t_id": np.arange(n, dtype=np.int64),
            "event_time": event_time,
            "cc_num": cards.frame["cc_num"].to_numpy()[column("card")],
            "merchant_id": merchants.frame["merchant_id"].to_numpy()[column("merchant")],
            "amount": column("amount").astype(np.float64),
            "channel": _labels(CHANNELS, column("channel")),
            "country": _labels(COUNTRIES, country),
            "latitude": np.round(np.clip(_COUNTRY_LAT[country] + rng.normal(0.0, 2.0, size=n), -90, 90), 4),
            "longitude": np.round(np.clip(_COUNTRY_LON[country] + rng.normal(0.0, 3.0, size=n), -180, 180), 4),
        }
    )
    fraud_rows = np.flatnonzero(is_fraud)
    cc_fraud = pd.DataFrame(
        {
            "t_id": fraud_rows.astype(np.int64),
            "event_time": event_time.iloc[fraud_rows].reset_index(drop=True),
            "is_fraud": np.ones(len(fraud_rows), dtype=np.int64),
        }
    )
    cc_fraud["known_at"] = cc_fraud[LABEL_KNOWN_AT]
    return transactions, cc_fraud


#: Groups cut to the run window after engineering, by their event-time column (the features
#: need each card's whole past, so a windowed run loads everything before its window).
WINDOWED = {"transactions": "event_time", "cc_fraud": "event_time"}
#: What the feature pipeline passes to :func:`load` from its configuration.
LOAD_OPTIONS = ("n_transactions", "seed")


def engineer(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The transactions' past-only engineered features (:mod:`feature_views.ccfraud.features`)."""
    return derive(frames)


def load(
    n_transactions: int = 100_000,
    seed: int = 42,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[str, pd.DataFrame]:
    """Generate the six credit-card groups: ``transactions``, ``cc_fraud``, ``card_details``,
    ``account_details``, ``bank_details``, ``merchant_details``.

    ``n_transactions`` (>= 100) transactions are generated over 2024-01-01..2024-07-01 UTC, about
    ``FRAUD_RATE`` (0.5%) of them fraud; entity counts grow with it. The same ``(n_transactions,
    seed)`` gives identical frames. ``start``/``end`` then select the half-open window
    ``[start, end)`` on ``event_time`` of transactions and cc_fraud (the data generated does not
    depend on the window); the detail groups are returned whole.
    """
    check_positive_int(n_transactions, "n_transactions", minimum=MIN_TRANSACTIONS, allow_none=False)
    check_seed(seed)
    lo, hi = check_window(start, end)
    n_transactions = int(n_transactions)
    rng = np.random.default_rng(seed)
    sizes = _sizes(n_transactions)
    banks, bank_country = _banks(rng, sizes)
    accounts, account_bank = _accounts(rng, sizes)
    cards = _cards(rng, sizes, account_bank, bank_country)
    merchants = _merchants(rng, sizes)
    transactions, cc_fraud = _transactions(rng, sizes, n_transactions, cards, merchants)
    return {
        "transactions": in_window(transactions, "event_time", lo, hi),
        "cc_fraud": in_window(cc_fraud, "event_time", lo, hi),
        "card_details": cards.frame,
        "account_details": accounts,
        "bank_details": banks,
        "merchant_details": merchants.frame,
    }
