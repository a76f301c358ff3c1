"""Late-data check on a long history: ``fv.training_data()`` (a new in-memory version, which
records its late-data exposure) against ``fv.query.read()`` (the same point-in-time join, no
version, no exposure) in the same process, over a feature group written in ``--commits`` small
inserts.

A group without an ``ingestion_time`` whose files were only ever added reads each row's known
time from the commit that added its file, which takes a walk of the group's Delta log; the
ratio shows what that walk costs a create as the history grows (it had loaded every version
afresh: quadratic in commits).

    python bench/late_data_commits.py [--commits 300] [--rows 20000] [--repeat 3]
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

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def build(root: Path, commits: int, rows: int) -> None:
    """A label group of ``rows`` rows (one commit) and a feature group of ``commits`` inserts
    of 20 rows each, joined in the view ``late``."""
    rng = np.random.default_rng(3)
    fs = feature_store.login(root=root).get_feature_store()
    labels = fs.create_feature_group("labels", version=1, primary_key=["id"], event_time="ts",
                                     statistics_config=False)
    labels.insert(pd.DataFrame({
        "id": np.arange(rows), "entity": rng.integers(0, 100, rows),
        "ts": T0 + pd.to_timedelta(rng.integers(0, 86_400 * 30, rows), unit="s"),
        "label": rng.integers(0, 2, rows)}))
    feats = fs.create_feature_group("feats", version=1, primary_key=["entity"], event_time="ts",
                                    statistics_config=False)
    for c in range(commits):
        feats.insert(pd.DataFrame({
            "entity": rng.integers(0, 100, 20),
            "ts": T0 + pd.to_timedelta(c * 3600 + np.arange(20), unit="s"),
            "x": rng.normal(size=20)}))
    fs.create_feature_view("late", version=1, labels=["label"], query=labels.select_all().join(
        feats.select(["x"]), on=["entity"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        build(root, args.commits, args.rows)
        print(f"built {args.rows:,} labels and a group of {args.commits} commits in "
              f"{time.perf_counter() - start:.1f} s")
        fv = feature_store.login(root=root).get_feature_store().get_feature_view("late", 1)
        runs = {"query.read": lambda: fv.query.read(),
                "training_data": lambda: fv.training_data(statistics_config=False, seed=0)}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for name, run in runs.items():  # warm-up
            run()
        for _ in range(args.repeat):
            for name, run in runs.items():
                t = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - t)
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        for name, median in medians.items():
            print(f"{name:22s} median {median:.3f} s")
        late = fv.get_training_dataset(max(fv._td.versions())).extra["late_data"]["groups"]
        print(f"late data recorded: {[(g['group'], g['late'], g['matched']) for g in late]}")
        print(f"training_data / query.read: "
              f"{medians['training_data'] / medians['query.read']:.2f}")


if __name__ == "__main__":
    main()
