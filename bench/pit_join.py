"""Point-in-time join benchmark: ``fv.training_data()`` vs hand-written DuckDB and pandas.

Generates ``--rows`` label rows over ``--entities`` entities and three feature groups of
``--rows`` rows (4, 6 and 8 numeric columns), inserts them through the fstrain API, then times,
in this process and on the same Delta tables:

- ``fstrain``: ``fv.training_data()`` (PIT join, pinned commits, content hash; statistics off);
- ``duckdb``: one hand-written ``ASOF LEFT JOIN`` query over the tables' parquet files → pandas;
- ``pandas``: ``pandas.merge_asof`` chained over the three tables (read with pyarrow).

Prints the median of ``--repeat`` interleaved runs and the ratios. Peak RSS cannot be reset inside one
process, so each method's peak RSS (VmHWM minus the baseline after imports) is measured in a
fresh child process on the same tables.
Targets: fstrain ≤ 1.25× duckdb; pandas / fstrain ≥ 1.5; RSS ≤ 1.5× duckdb.

    python bench/pit_join.py [--rows 1000000] [--entities 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import feature_store

T0 = pd.Timestamp("2024-01-01", tz="UTC")
WIDTHS = (4, 6, 8)


def _times(rng: np.random.Generator, n: int) -> pd.Series:
    return T0 + pd.to_timedelta(rng.integers(0, 365 * 86_400, n), unit="s")


def build(root: Path, rows: int, entities: int) -> None:
    """Create the label group, three feature groups and the feature view."""
    rng = np.random.default_rng(7)
    fs = feature_store.login(root=root).get_feature_store()
    labels = fs.create_feature_group("labels", version=1, primary_key=["id"], event_time="ts",
                                     statistics_config=False)
    labels.insert(pd.DataFrame({"id": np.arange(rows), "entity": rng.integers(0, entities, rows),
                                "ts": _times(rng, rows), "label": rng.integers(0, 2, rows)}))
    query = labels.select_all()
    for i, width in enumerate(WIDTHS):
        frame = pd.DataFrame({"entity": rng.integers(0, entities, rows), "ts": _times(rng, rows)})
        frame = frame.drop_duplicates(["entity", "ts"])
        for c in range(width):
            frame[f"f{i}_{c}"] = rng.normal(size=len(frame))
        fg = fs.create_feature_group(f"feats{i}", version=1, primary_key=["entity"], event_time="ts",
                                     statistics_config=False)
        fg.insert(frame)
        query.join(fg.select_features(), on=["entity"])
    fs.create_feature_view("bench", query=query, labels=["label"])


def _files(root: Path, name: str) -> list[str]:
    from deltalake import DeltaTable

    return DeltaTable(str(root / "feature_store" / "tables" / f"{name}_1")).file_uris()


def run_fstrain(root: Path) -> int:
    fv = feature_store.login(root=root).get_feature_store().get_feature_view("bench", 1)
    X, y = fv.training_data(statistics_config=False, seed=0)
    return len(X)


def run_duckdb(root: Path) -> int:
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    con.execute("SET asof_loop_join_threshold=0")

    def src(name: str) -> str:
        return "read_parquet([" + ", ".join(f"'{f}'" for f in _files(root, name)) + "])"

    cols = ", ".join(f"r{i}.f{i}_{c}" for i, w in enumerate(WIDTHS) for c in range(w))
    joins = " ".join(
        f"ASOF LEFT JOIN {src(f'feats{i}')} r{i} ON l.entity = r{i}.entity AND l.ts >= r{i}.ts"
        for i in range(len(WIDTHS))
    )
    sql = f"SELECT l.id, l.entity, l.ts, l.label, {cols} FROM {src('labels')} l {joins}"
    frame = con.sql(sql).to_arrow_table().to_pandas()
    con.close()
    return len(frame)


def run_pandas(root: Path) -> int:
    import pyarrow.parquet as pq

    def read(name: str) -> pd.DataFrame:
        return pq.ParquetDataset(_files(root, name)).read().to_pandas()

    out = read("labels").sort_values("ts")
    for i in range(len(WIDTHS)):
        right = read(f"feats{i}").sort_values("ts")
        out = pd.merge_asof(out, right, on="ts", by="entity", direction="backward",
                            allow_exact_matches=True)
    return len(out)


METHODS = {"fstrain": run_fstrain, "duckdb": run_duckdb, "pandas": run_pandas}


def _vm_hwm_mb() -> float:
    """Peak RSS of this process (VmHWM; unlike ru_maxrss it is not inherited across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("VmHWM not available")


def _child(method: str, root: str, queue: mp.Queue) -> None:
    before = _vm_hwm_mb()
    METHODS[method](Path(root))
    queue.put(_vm_hwm_mb() - before)


def peak_rss_mb(method: str, root: Path) -> float:
    ctx = mp.get_context("spawn")
    queue: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(method, str(root), queue))
    proc.start()
    value = queue.get()
    proc.join()
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-pandas", action="store_true", help="for very large --rows")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        build(root, args.rows, args.entities)
        print(f"built {args.rows:,} label rows + 3 x {args.rows:,} feature rows in "
              f"{time.perf_counter() - start:.1f} s")
        methods = [m for m in METHODS if not (args.skip_pandas and m == "pandas")]
        times: dict[str, list[float]] = {m: [] for m in methods}
        rows: dict[str, int] = {m: METHODS[m](root) for m in methods}  # warm-up runs
        for _ in range(args.repeat):  # interleaved, so drift on a shared machine hits all alike
            for method in methods:
                gc.collect()
                t = time.perf_counter()
                rows[method] = METHODS[method](root)
                times[method].append(time.perf_counter() - t)
        results: dict[str, dict[str, float]] = {}
        for method in methods:
            results[method] = {"median_s": statistics.median(times[method]), "rows": rows[method],
                               "peak_rss_mb": peak_rss_mb(method, root)}
            print(f"{method:8s} median {results[method]['median_s']:.3f} s  rows {rows[method]:,}  "
                  f"peak RSS above imports {results[method]['peak_rss_mb']:.0f} MB")
        f, d = results["fstrain"], results["duckdb"]
        print(f"fstrain / duckdb time: {f['median_s'] / d['median_s']:.2f}  (target <= 1.25)")
        print(f"fstrain / duckdb peak RSS: {f['peak_rss_mb'] / d['peak_rss_mb']:.2f}  (target <= 1.5)")
        if "pandas" in results:
            print(f"pandas / fstrain time: {results['pandas']['median_s'] / f['median_s']:.2f}  (target >= 1.5)")
            print(f"pandas / duckdb time: {results['pandas']['median_s'] / d['median_s']:.2f}  "
                  "(context: the hand-written query's own lead over pandas on this machine)")
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
