"""The split assignment of an out-of-core create runs in memory that does not grow with the
rows: a stratified and a group split of N and of 4N rows, created in one statement and in hash
partitions under the same DuckDB memory limit (256 MB) and data-segment cap, grow the data segment by
about as much while they assign (the codes and the assignment's other arrays as long as the
rows are file mappings, which the cap does not count; gathering the key column whole grows it
by ≈25–75 bytes per row, over 35 MiB more for the larger create)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

HERE = Path(__file__).parent
ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2",
       "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
N = 500_000
CAP_MIB = 600
#: what the larger create's assignment may grow the data segment by above the smaller one's
#: (one batch of key values and its per-class bookkeeping; noise)
ASSIGN_MARGIN_MIB = 12


def _store(root: Path) -> None:
    """Views ``n`` and ``n4`` (N and 4N rows: a label of 5 classes and a group column ``grp``
    of rows / 20 groups, joined point-in-time with a group keyed by ``grp``) and ``tiny`` (200
    rows, for the warm-up)."""
    import feature_store

    fs = feature_store.login(root=root).get_feature_store()
    rng = np.random.default_rng(0)
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    for name, n in (("tiny", 200), ("n", N), ("n4", 4 * N)):
        groups = max(n // 20, 10)
        rows = pd.DataFrame({
            "rid": np.arange(n), "ts": t0 + pd.to_timedelta(np.arange(n), unit="s"),
            "grp": rng.integers(0, groups, n), "x": rng.normal(size=n),
            "label": rng.integers(0, 5, n)})
        root_group = fs.get_or_create_feature_group(f"{name}_rows", version=1,
                                                    primary_key=["rid"], event_time="ts",
                                                    statistics_config=False)
        for start in range(0, n, N // 2):
            root_group.insert(rows.iloc[start:start + N // 2])
        side = fs.get_or_create_feature_group(f"{name}_groups", version=1, primary_key=["grp"],
                                              event_time="ts", statistics_config=False)
        side.insert(pd.DataFrame({"grp": np.arange(groups), "ts": t0,
                                  "g": rng.normal(size=groups)}))
        fs.create_feature_view(name, query=root_group.select_all().join(
            side.select(["g"]), on=["grp"]), labels=["label"])


def _run(root: Path, view: str, split: str, partitions: int) -> dict:
    options = {"memory_limit": "256MB", "partitions": partitions}
    env = {**os.environ, **ENV, "PYTHONPATH": str(HERE.parents[1])}
    run = subprocess.run([sys.executable, str(HERE / "flat_memory_worker.py"), str(root), view,
                          "stream", str(CAP_MIB), split, json.dumps(options)], env=env,
                         check=False, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_split_of_four_times_the_rows_assigns_in_as_much_memory(tmp_path):
    root = tmp_path / "store"
    _store(root)
    for split in ("stratified", "group"):
        for partitions in (1, 4):
            peaks = {view: _run(root, view, split, partitions) for view in ("n", "n4")}
            print(split, partitions, peaks)
            assert peaks["n"]["rows"] == N and peaks["n4"]["rows"] == 4 * N
            assert [p["buckets"] for p in peaks.values()] == ([[], []] if partitions == 1
                                                              else [[4], [4]])
            assert peaks["n4"]["assign_mib"] <= peaks["n"]["assign_mib"] + ASSIGN_MARGIN_MIB
