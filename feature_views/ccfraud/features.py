"""ccfraud's engineered features (the seed's card-velocity and location features), past-only.

Every engineered value of a transaction uses only that transaction and the card's transactions
**strictly before** it (no look-ahead: a later transaction, or another one at the same instant,
never changes an earlier row). The card median uses the card's whole past, so a windowed run
loads everything before its window (``WINDOWED`` in :mod:`feature_views.ccfraud.source`), engineers,
and keeps the window's rows: they equal a full run's rows in that window.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def engineer(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``frames`` with the transactions' engineered columns added."""
    return _ccfraud(frames)


def _ccfraud(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    tx = frames["transactions"].sort_values(["cc_num", "event_time", "t_id"]).copy()
    times = tx["event_time"].astype("int64").to_numpy()  # ns, sorted within each card
    cards = tx["cc_num"].to_numpy()
    amounts = tx["amount"].to_numpy(dtype=float)
    gap_s, count_1h, median = _card_history(cards, times, amounts, window_ns=3600 * 10**9)
    tx["seconds_since_prev_tx"] = gap_s
    tx["tx_count_1h"] = count_1h
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = amounts / np.where(median == 0, np.nan, median)
    tx["amount_to_card_median"] = np.where(np.isfinite(ratio), ratio, 1.0)
    cards_frame = frames["card_details"][["cc_num", "bank_id"]].merge(
        frames["bank_details"][["bank_id", "country"]], on="bank_id", how="left"
    )
    home = dict(zip(cards_frame["cc_num"], cards_frame["country"], strict=True))
    tx["is_foreign"] = tx["country"].to_numpy() != tx["cc_num"].map(home).to_numpy()
    frames = dict(frames)
    frames["transactions"] = tx.sort_values("t_id").reset_index(drop=True)
    return frames


def _card_history(
    keys: np.ndarray, times: np.ndarray, amounts: np.ndarray, window_ns: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row (sorted by key then time), from the key's rows strictly earlier in time:
    seconds since the latest one (-1 if none), 1 + how many fall in ``(t - window, t)``, and
    their median amount (NaN if none)."""
    n = len(keys)
    gap = np.full(n, -1.0)
    count = np.empty(n, dtype=np.int64)
    median = np.full(n, np.nan)
    boundaries = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1], True])
    for start, stop in zip(boundaries[:-1], boundaries[1:], strict=True):
        t = times[start:stop]
        before = np.searchsorted(t, t, side="left")  # rows strictly earlier in time
        has_prev = before > 0
        gap[start:stop][has_prev] = (t[has_prev] - t[before[has_prev] - 1]) / 1e9
        first = np.searchsorted(t, t - window_ns, side="right")
        count[start:stop] = np.maximum(before - first, 0) + 1
        expanding = pd.Series(amounts[start:stop]).expanding().median().to_numpy()
        median[start:stop][has_prev] = expanding[before[has_prev] - 1]
    return gap, count, median
