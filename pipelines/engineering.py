"""Feature engineering of the feature pipeline, per use case (pure functions on frames).

Only ccfraud derives features here (the seed's card-velocity and location features); the other
use cases store their source columns as they are. Engineered columns are computed within the
loaded window (a run over ``[start, end)`` sees no earlier history: documented in the README).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def engineer(use_case: str, frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Return ``frames`` with the use case's engineered columns added."""
    if use_case == "ccfraud":
        return _ccfraud(frames)
    return frames


def _ccfraud(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    tx = frames["transactions"].sort_values(["cc_num", "event_time", "t_id"]).copy()
    by_card = tx.groupby("cc_num", sort=False)
    gap = by_card["event_time"].diff().dt.total_seconds()
    tx["seconds_since_prev_tx"] = gap.fillna(-1.0)
    times = tx["event_time"].astype("int64").to_numpy() // 1_000_000_000
    cards = tx["cc_num"].to_numpy()
    tx["tx_count_1h"] = _rolling_count(cards, times, 3600)
    median = by_card["amount"].transform("median")
    tx["amount_to_card_median"] = (tx["amount"] / median.replace(0, np.nan)).fillna(1.0)
    cards_frame = frames["card_details"][["cc_num", "bank_id"]].merge(
        frames["bank_details"][["bank_id", "country"]], on="bank_id", how="left"
    )
    home = dict(zip(cards_frame["cc_num"], cards_frame["country"], strict=True))
    tx["is_foreign"] = tx["country"].to_numpy() != tx["cc_num"].map(home).to_numpy()
    frames = dict(frames)
    frames["transactions"] = tx.sort_values("t_id").reset_index(drop=True)
    return frames


def _rolling_count(keys: np.ndarray, seconds: np.ndarray, window: int) -> np.ndarray:
    """Per key (rows sorted by key then time): transactions in ``(t - window, t]``, this one included."""
    out = np.empty(len(keys), dtype=np.int64)
    boundaries = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1], True])
    for start, stop in zip(boundaries[:-1], boundaries[1:], strict=True):
        t = seconds[start:stop]
        first = np.searchsorted(t, t - window, side="right")
        out[start:stop] = np.arange(len(t)) - first + 1
    return out
