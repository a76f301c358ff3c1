"""Credit-card fraud: is a transaction fraudulent?

Root ``transactions``; the ``cc_fraud`` label group holds only frauds, so it is LEFT-joined and
missing labels are filled with 0. Card, account, bank and merchant details are joined by their
keys, named explicitly (foreign keys: Hopsworks only infers shared primary-key names);
account and bank join through the card, as nested joins. The card group is tagged ``pii``:
only the cardholder's gender and age group come from it, as training helper columns.
"""

from __future__ import annotations

from typing import Any

from feature_views import UseCase

NAME = "ccfraud_detection"
VERSION = 1
HELPERS = ["cardholder_gender", "cardholder_age_group"]
GROUP_KEYS = ["cc_num"]  # the card: a group split keeps each card's transactions in one split


def query(fs: Any) -> Any:
    """The view's query: transactions, the LEFT-joined ``cc_fraud`` label (point-in-time on
    ``t_id``; its rows are known at their transaction's time, ``known_at``), card → account and
    bank, and merchant."""
    tx = fs.get_feature_group("transactions", 1)
    labels = fs.get_feature_group("cc_fraud", 1)
    cards = fs.get_feature_group("card_details", 1)
    accounts = fs.get_feature_group("account_details", 1)
    banks = fs.get_feature_group("bank_details", 1)
    merchants = fs.get_feature_group("merchant_details", 1)
    card_query = (
        cards.select(HELPERS)
        .join(accounts.select(["credit_limit", "debt_end_prev_month"]), on=["account_id"])
        .join(banks.select(["credit_rating", "country"]), on=["bank_id"], prefix="bank_")
    )
    return (
        tx.select_except(["merchant_id"])
        .join(labels.select(["is_fraud"]))  # both keyed by t_id: Hopsworks' rule finds it
        .join(card_query, on=["cc_num"])
        .join(merchants.select(["category", "country"]), on=["merchant_id"], prefix="merchant_")
    )


def build(fs: Any) -> Any:
    """Get or create the ``ccfraud_detection`` feature view."""
    return fs.get_or_create_feature_view(
        NAME, VERSION, query(fs), labels=["is_fraud"], label_fill_values={"is_fraud": 0},
        training_helper_columns=HELPERS + GROUP_KEYS, prohibited_tags=["pii"],
        description="Card-transaction fraud; label group LEFT-joined and filled with 0.",
    )


USE_CASE = UseCase(
    name="ccfraud",
    description=__doc__.splitlines()[0],
    feature_view_name=NAME,
    feature_view_version=VERSION,
    build_feature_view=build,
    # relative windows: test = the last 30 days of data, validation the 30 before, 1 day apart,
    # so a daily schedule keeps working as later windows are loaded
    split={"split": "time", "test_window": "30D", "validation_window": "30D", "gap": "1D"},
    model={"model": "xgboost", "imbalance": "scale_pos_weight",
           "params": {"n_estimators": 300, "max_depth": 5, "learning_rate": 0.1}},
    gates=("roc_auc >= 0.8", "pr_auc >= 0.2", "better_than_baseline"),
    model_name="ccfraud_xgb",
    group_keys=tuple(GROUP_KEYS),
    demo={"n_transactions": 100_000, "model": {"params": {"n_estimators": 150}}},
)
