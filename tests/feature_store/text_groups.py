"""Feature groups whose values a text (csv/jsonl) version must carry faithfully, shared by the
text writer and text streaming tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def quoting_groups(fs: Any, rows: int, seed: int, words: list[Any]) -> tuple[Any, Any]:
    """``tx``: ``rows`` transactions with text from ``words`` (commas, quotes, newlines, empty
    vs null), NaN and null floats, booleans and timestamps; ``agg``: per-card spend joined
    point in time on ``card``."""
    rng = np.random.default_rng(seed)
    text = np.array(words, dtype=object)
    amount = rng.normal(size=rows)
    amount[::11] = np.nan
    amount[::13] = None
    tx = fs.get_or_create_feature_group("tx", version=1, primary_key=["tid"], event_time="ts")
    tx.insert(pd.DataFrame({
        "tid": np.arange(rows), "card": rng.integers(0, 10, rows),
        "ts": T0 + pd.to_timedelta(rng.permutation(rows), unit="min"),
        "amount": amount, "note": text[rng.integers(0, len(text), rows)],
        "flag": rng.random(rows) < 0.5, "label": rng.integers(0, 2, rows),
    }))
    agg = fs.get_or_create_feature_group("agg", version=1, primary_key=["card"], event_time="ts")
    agg.insert(pd.DataFrame({"card": np.arange(10).repeat(2),
                             "ts": np.tile([T0, T0 + pd.Timedelta(minutes=60)], 10),
                             "spend": rng.normal(size=20)}))
    return tx, agg
