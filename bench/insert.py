"""Insert throughput: 1M rows into a new feature group, with and without a 5-expectation suite.

Prints rows/s (median of --repeat runs) and the cost of validation as a ratio. Target: the suite
costs at most 15% (ratio <= 1.15).

    python bench/insert.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import feature_store

SUITE = [
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "amount"}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "amount", "min_value": 0, "max_value": 1e6}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "cc_num"}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "category", "value_set": ["a", "b", "c", "d"]}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "lat", "min_value": -90, "max_value": 90}},
]


def make_frame(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "t_id": np.arange(rows, dtype=np.int64),
            "cc_num": rng.integers(0, 100_000, rows),
            "amount": rng.gamma(2.0, 50.0, rows),
            "category": rng.choice(np.array(["a", "b", "c", "d"], dtype=object), rows),
            "lat": rng.uniform(-90, 90, rows),
            "event_time": pd.Timestamp("2024-01-01", tz="UTC")
            + pd.to_timedelta(rng.integers(0, 86_400 * 365, rows), unit="s"),
        }
    )


def run_once(frame: pd.DataFrame, with_suite: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        fs = feature_store.login(root=Path(tmp)).get_feature_store()
        fg = fs.get_or_create_feature_group(
            "tx", version=1, primary_key=["t_id"], event_time="event_time",
            statistics_config=False, expectation_suite=SUITE if with_suite else None,
        )
        start = time.perf_counter()
        _, report = fg.insert(frame)
        elapsed = time.perf_counter() - start
        assert (report is not None) == with_suite
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    frame = make_frame(args.rows)
    run_once(frame.head(1000), True)  # warm up imports (GX import is not insert cost)
    plain_runs, suite_runs = [], []
    for _ in range(args.repeat):  # interleaved, so drift on a shared machine hits both alike
        plain_runs.append(run_once(frame, False))
        suite_runs.append(run_once(frame, True))
    plain, suite = statistics.median(plain_runs), statistics.median(suite_runs)
    print(f"rows: {args.rows:,}")
    print(f"insert without suite: {plain:.3f} s  ({args.rows / plain:,.0f} rows/s)")
    print(f"insert with 5-expectation suite: {suite:.3f} s  ({args.rows / suite:,.0f} rows/s)")
    print(f"validation cost ratio (with/without): {suite / plain:.2f}  (target <= 1.15)")


if __name__ == "__main__":
    main()
