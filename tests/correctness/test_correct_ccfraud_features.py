"""ccfraud's engineered features see only the strict past, and windowed runs equal full runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipelines import feature
from pipelines.feature.engineering import engineer
from feature_views.ccfraud import source as ccfraud

ENGINEERED = ["seconds_since_prev_tx", "tx_count_1h", "amount_to_card_median"]
T0 = pd.Timestamp("2024-03-01", tz="UTC")


def _tiny(amounts, seconds, card="c1"):
    n = len(amounts)
    tx = pd.DataFrame({
        "t_id": list(range(n)), "cc_num": [card] * n,
        "event_time": [T0 + pd.Timedelta(seconds=s) for s in seconds],
        "amount": amounts, "country": ["SE"] * n,
    })
    frames = {"transactions": tx,
              "card_details": pd.DataFrame({"cc_num": [card], "bank_id": [1]}),
              "bank_details": pd.DataFrame({"bank_id": [1], "country": ["SE"]})}
    return engineer("ccfraud", frames)["transactions"].sort_values("t_id")


def test_card_median_uses_only_earlier_transactions():
    out = _tiny([10.0, 20.0, 30.0, 1000.0], [0, 60, 120, 180])
    # no history -> 1.0; then 20/10, 30/median(10,20)=2, 1000/median(10,20,30)=50
    assert list(out["amount_to_card_median"]) == [1.0, 2.0, 2.0, 50.0]


def test_same_instant_transactions_do_not_see_each_other():
    out = _tiny([10.0, 99.0, 1.0], [0, 60, 60])
    assert list(out["amount_to_card_median"]) == [1.0, 9.9, 0.1]
    assert list(out["seconds_since_prev_tx"]) == [-1.0, 60.0, 60.0]
    assert list(out["tx_count_1h"]) == [1, 2, 2]


def test_a_later_transaction_never_changes_an_earlier_feature():
    frames = ccfraud.load(n_transactions=3000, seed=7)
    full = engineer("ccfraud", frames)["transactions"].set_index("t_id")
    cut = pd.Timestamp("2024-04-01", tz="UTC")
    early = dict(frames)
    early["transactions"] = frames["transactions"][frames["transactions"]["event_time"] < cut]
    partial = engineer("ccfraud", early)["transactions"].set_index("t_id")
    pd.testing.assert_frame_equal(partial[ENGINEERED], full.loc[partial.index, ENGINEERED])


def _transactions(project):
    fg = project.get_feature_store().get_feature_group("transactions", version=1)
    return fg.read().sort_values("t_id").reset_index(drop=True)


@pytest.mark.parametrize("window", [("2024-03-01", "2024-04-15"), ("2024-06-01", None)])
def test_windowed_run_equals_a_full_run_on_the_window_rows(tmp_path, window):
    import feature_store

    full_project = feature_store.login(root=tmp_path / "full")
    windowed_project = feature_store.login(root=tmp_path / "windowed")
    size = {"n_transactions": 3000, "seed": 5}
    feature.run(full_project, feature.FeaturePipelineConfig(use_case="ccfraud", **size))
    start, end = window
    feature.run(windowed_project, feature.FeaturePipelineConfig(use_case="ccfraud", start=start,
                                                                end=end, **size))
    full = _transactions(full_project)
    lo = pd.Timestamp(start, tz="UTC")
    mask = full["event_time"] >= lo
    if end is not None:
        mask &= full["event_time"] < pd.Timestamp(end, tz="UTC")
    expected = full[mask].reset_index(drop=True)
    got = _transactions(windowed_project)
    assert len(got) == len(expected) > 0
    assert got["event_time"].min() >= lo
    pd.testing.assert_frame_equal(got, expected)
    assert np.isfinite(got["amount_to_card_median"]).all()
