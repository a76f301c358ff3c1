"""Training-dataset read-back: ``fv.get_train_test_split(v)`` vs reading its parquet files directly.

Creates a materialized train/test version of ``--rows`` rows (a root group PIT-joined to one
feature group), then times, in this process, reading it back through fstrain against
``pyarrow.parquet.read_table`` of the same split files followed by ``to_pandas``. Also reports
how long the create took and how much of it the PIT join was. Target: read ≤ 1.3× pyarrow.
A split file is hashed the first time a process reads it and then remembered by its identity
(device, inode, size, mtime, ctime); the first-read ratio (every file hashed) is printed too.

    python bench/td_read.py [--rows 1000000] [--repeat 5]
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


def build(root: Path, rows: int) -> object:
    rng = np.random.default_rng(3)
    fs = feature_store.login(root=root).get_feature_store()
    labels = fs.create_feature_group("labels", version=1, primary_key=["id"], event_time="ts",
                                     statistics_config=False)
    labels.insert(pd.DataFrame({"id": np.arange(rows), "entity": rng.integers(0, rows // 10, rows),
                                "ts": T0 + pd.to_timedelta(rng.integers(0, 10**7, rows), unit="s"),
                                "label": rng.integers(0, 2, rows)}))
    feats = pd.DataFrame({"entity": rng.integers(0, rows // 10, rows),
                          "ts": T0 + pd.to_timedelta(rng.integers(0, 10**7, rows), unit="s")})
    feats = feats.drop_duplicates(["entity", "ts"])
    for c in range(10):
        feats[f"f{c}"] = rng.normal(size=len(feats))
    fg = fs.create_feature_group("feats", version=1, primary_key=["entity"], event_time="ts",
                                 statistics_config=False)
    fg.insert(feats)
    return fs.create_feature_view("bench_td", query=labels.select_all().join(fg.select_features(), on=["entity"]),
                                  labels=["label"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fv = build(Path(tmp), args.rows)
        start = time.perf_counter()
        fv.query.read()
        join_s = time.perf_counter() - start
        start = time.perf_counter()
        version, _ = fv.create_train_test_split(test_size=0.2, seed=1, statistics_config=False)
        create_s = time.perf_counter() - start
        location = Path(fv.get_training_dataset(version).location)

        def fstrain_read() -> int:
            X_tr, X_te, y_tr, y_te = fv.get_train_test_split(version)
            return len(X_tr) + len(X_te)

        def pyarrow_read() -> int:
            import pyarrow.parquet as pq

            frames = [pq.read_table(location / f"{s}.parquet").to_pandas() for s in ("train", "test")]
            return sum(len(f) for f in frames)

        def fstrain_cold_read() -> int:  # as a fresh process's first read: hashes every file
            from feature_store.local.readers import split_files

            split_files.VERIFIED.entries.clear()
            return fstrain_read()

        results = {}
        for name, fn in (("pyarrow", pyarrow_read), ("fstrain", fstrain_read),
                         ("fstrain-first-read", fstrain_cold_read)):
            fn()  # warm-up (file cache, imports)
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                rows = fn()
                times.append(time.perf_counter() - t)
            results[name] = statistics.median(times)
            print(f"{name:18s} read median {results[name]:.3f} s  ({rows:,} rows)")
        print(f"create_train_test_split: {create_s:.2f} s, of which the PIT join query alone "
              f"takes {join_s:.2f} s ({join_s / create_s:.0%})")
        print(f"fstrain / pyarrow read time: {results['fstrain'] / results['pyarrow']:.2f}  (target <= 1.3; "
              "files verified once per identity in this process)")
        print(f"first read in a process (every file hashed) / pyarrow: "
              f"{results['fstrain-first-read'] / results['pyarrow']:.2f}")


if __name__ == "__main__":
    main()
