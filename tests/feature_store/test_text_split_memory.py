"""csv and jsonl versions in bounded memory: child processes whose data segment is capped
(``RLIMIT_DATA``) below what the whole-table path needs create, rewrite and verify them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feature_store.core.content_hash import table_sha256
from feature_store.local.training_data import text_split_writer as tw

HERE = Path(__file__).parent
# Arrow allocates through malloc (counted by RLIMIT_DATA); a fixed mmap threshold returns freed
# buffers instead of growing the heap
ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2",
       "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}


def _run(worker: str, *args: object) -> subprocess.CompletedProcess:
    env = {**os.environ, **ENV, "PYTHONPATH": str(HERE.parents[1])}
    return subprocess.run([sys.executable, str(HERE / worker), *map(str, args)], env=env, check=False,
                          capture_output=True, text=True, timeout=600)


def _split_file(path: Path, rows: int) -> pa.Table:
    rng = np.random.default_rng(0)
    words = np.array(["a,b", 'q"x', "two\nlines", "plain", None], dtype=object)
    table = pa.table({"rid": np.arange(rows), **{f"f{i}": rng.normal(size=rows) for i in range(12)},
                      "s": pa.array(words[rng.integers(0, len(words), rows)])})
    pq.write_table(table, path, row_group_size=16_384)
    return table


@pytest.mark.slow
@pytest.mark.parametrize(("data_format", "rows", "cap_mib"), [("csv", 600_000, 64),
                                                              ("jsonl", 200_000, 64)])
def test_text_rewrite_and_verify_stay_under_a_cap_the_whole_table_exceeds(tmp_path, data_format,
                                                                         rows, cap_mib):
    source = tmp_path / "train.parquet"
    table = _split_file(source, rows)
    expected = hashlib.sha256(tw.encode(table, data_format, header=True)).hexdigest()
    whole = _run("text_rewrite_cap_worker.py", source, data_format, "whole", cap_mib)
    assert whole.returncode == 3, whole.stdout + whole.stderr[-3000:]
    run = _run("text_rewrite_cap_worker.py", source, data_format, "stream", cap_mib)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    # the text is larger than the cap, and the same bytes the whole-table writer produces
    assert (tmp_path / f"train.{data_format}").stat().st_size > cap_mib * 2**20
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result == {"file_sha256": expected, "content_hash": table_sha256(table)}


ROWS, FEATURES = 1_000_000, 16
CAP_MIB = 700  # streamed: DuckDB (256 MB limit) and the Parquet stage dominate; whole: > 1 GB


def _store(root: Path) -> None:
    """Labels and 16 float features of 1M entities, joined point in time; and a tiny copy."""
    import feature_store

    fs = feature_store.login(root=root).get_feature_store()
    rng = np.random.default_rng(0)
    ts = pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(np.arange(ROWS), unit="s")
    for name, n in (("big", ROWS), ("tiny", 200)):
        feats = pd.DataFrame({"rid": np.arange(n), "ts": ts[:n],
                              **{f"f{i}": rng.normal(size=n) for i in range(FEATURES)}})
        labels = pd.DataFrame({"rid": np.arange(n), "ts": ts[:n],
                               "label": (feats["f0"] > 0).astype(np.int64)})
        lg = fs.get_or_create_feature_group(f"{name}_labels", version=1, primary_key=["rid"],
                                            event_time="ts")
        lg.insert(labels)
        fg = fs.get_or_create_feature_group(f"{name}_features", version=1, primary_key=["rid"],
                                            event_time="ts")
        fg.insert(feats)
        fs.create_feature_view(name, query=lg.select_all().join(
            fg.select([f"f{i}" for i in range(FEATURES)]), on=["rid"]), labels=["label"])


@pytest.mark.slow
def test_a_csv_version_the_in_memory_path_cannot_hold_is_created_under_a_cap(tmp_path):
    import feature_store

    root = tmp_path / "store"
    _store(root)
    whole = _run("text_memory_cap_worker.py", root, "csv", "memory", CAP_MIB)
    assert whole.returncode == 3, whole.stdout + whole.stderr[-3000:]
    assert "in memory: out of memory" in whole.stdout
    run = _run("text_memory_cap_worker.py", root, "csv", "stream", CAP_MIB)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]  # and it verified, capped
    fv = feature_store.login(root=root).get_feature_store().get_feature_view("big", 1)
    (td,) = [t for t in fv.get_training_datasets() if t.data_format == "csv"]
    rows = {n: s["rows"] for n, s in td.splits.items()}
    assert sum(rows.values()) == ROWS and 0.24 < rows["test"] / ROWS < 0.26
    files = sorted(Path(td.location).iterdir())
    assert [f.name for f in files] == ["test.csv", "train.csv"]
    assert sum(f.stat().st_size for f in files) > 300 * 2**20
    for f in files:
        assert hashlib.sha256(f.read_bytes()).hexdigest() == td.splits[f.stem]["file_sha256"]
