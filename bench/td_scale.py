"""Out-of-core training-dataset creation at scale: ``--rows`` label rows PIT-joined with 3 × rows
feature rows, materialized as a train/test version.

Data: a label group (``id``, ``entity``, ``ts``, ``label``) and three feature groups of ``--rows``
rows each (``--width`` numeric columns, ``--rows / 10`` entities), PIT-joined on ``entity``. The
groups are created through the fstrain API; their rows are appended to the Delta tables in
chunks of ``--chunk`` rows (keys unique by construction, so the upsert an ``insert`` would do
changes nothing), which keeps the generator's memory bounded.

Measured, each in a fresh child process (peak RSS = VmHWM, which a child does not inherit):

- ``create``: ``fv.create_train_test_split(test_size=0.2, seed=1)``, split by ``--split``
  (random; stratified on the label, group on the entity, time on the event time) (streamed:
  PIT query in DuckDB with a memory limit and spilling, split, content hashes, statistics, Parquet files);
  label rows per second and peak RSS;
- ``verify``: ``fv.verify_training_dataset(v)`` (file hashes and content hashes, streamed);
- ``reread``: every split streamed back through the public read
  (``get_train_test_split(v, dataframe_type="arrow_batches")`` with keys, event time and helper
  columns), its ``X`` and ``y`` batches put back together in the file's column order and hashed:
  the digests must equal the ones recorded at creation (bit for bit), else the run fails;
- ``baseline`` (unless ``--no-baseline``): the same ASOF joins hand-written in DuckDB, ordered
  the same way, ``COPY``-ed to one Parquet file under the same memory limit: the floor fstrain's
  create is compared against (ratio printed).

    python bench/td_scale.py [--rows 10000000] [--width 2] [--memory-limit 4GB] [--store DIR]

``--store DIR`` keeps the generated store in ``DIR`` and reuses it when it is already there (the
100M store takes ~15 minutes to generate); the versions a run creates are deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

T0 = pd.Timestamp("2024-01-01", tz="UTC")
SPAN_US = 365 * 86_400 * 1_000_000
GROUPS = 3


def _append(fs, name: str, chunks) -> None:
    """Create the group from the first chunk through the API, append the rest to its table."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    fg = None
    for frame in chunks:
        if fg is None:
            fg = fs.create_feature_group(name, version=1, primary_key=["id" if name == "labels"
                                                                       else "entity"],
                                         event_time="ts", statistics_config=False)
            fg.insert(frame)
            path = str(fs.root / "tables" / f"{name}_1")
            schema = pa.schema(DeltaTable(path).schema().to_arrow())
            continue
        table = pa.Table.from_pandas(frame, preserve_index=False).select(schema.names).cast(schema)
        write_deltalake(path, table, mode="append")


def _label_chunks(rows: int, chunk: int, entities: int):
    rng = np.random.default_rng(7)
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        yield pd.DataFrame({"id": np.arange(start, start + n), "entity": rng.integers(0, entities, n),
                            "ts": T0 + pd.to_timedelta(rng.integers(0, SPAN_US, n), unit="us"),
                            "label": rng.integers(0, 2, n)})


def _feature_chunks(group: int, rows: int, chunk: int, entities: int, width: int):
    rng = np.random.default_rng(100 + group)
    step = SPAN_US // rows  # every feature row has its own time: (entity, ts) is unique
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        frame = pd.DataFrame({"entity": rng.integers(0, entities, n),
                              "ts": T0 + pd.to_timedelta(np.arange(start, start + n) * step, unit="us")})
        for c in range(width):
            frame[f"f{group}_{c}"] = rng.normal(size=n)
        yield frame


def build(root: Path, rows: int, width: int, chunk: int) -> None:
    import feature_store

    fs = feature_store.login(root=root).get_feature_store()
    entities = max(rows // 10, 1)
    _append(fs, "labels", _label_chunks(rows, chunk, entities))
    query = fs.get_feature_group("labels", 1).select_all()
    for g in range(GROUPS):
        _append(fs, f"feats{g}", _feature_chunks(g, rows, chunk, entities, width))
        query.join(fs.get_feature_group(f"feats{g}", 1).select_features(), on=["entity"])
    fs.create_feature_view("scale", query=query, labels=["label"])


CHILD = """
import json, sys, time
from pathlib import Path
def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
import feature_store, pyarrow, pandas, duckdb  # imports before the baseline RSS
root, step, memory_limit, split = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
base = hwm()
fv = feature_store.login(root=root).get_feature_store().get_feature_view("scale", 1)
t, cpu = time.perf_counter(), time.process_time()
if step == "create":
    v, _ = fv.create_train_test_split(test_size=0.2, seed=1, split=split,
                                      group_column="entity" if split == "group" else None,
                                      write_options={"memory_limit": memory_limit})
    rows = sum(s["rows"] for s in fv.get_training_dataset(v).splits.values())
elif step == "verify":
    fv.verify_training_dataset(max(fv._td.versions()))
    rows = 0
elif step == "reread":
    from bench.td_scale import reread
    rows = reread(fv, max(fv._td.versions()))
elif step == "cleanup":
    for version in fv._td.versions():
        fv.delete_training_dataset(version)
    rows = 0
else:
    from bench.td_scale import baseline
    rows = baseline(Path(root), memory_limit)
print("RESULT " + json.dumps({"seconds": time.perf_counter() - t, "cpu": time.process_time() - cpu,
                              "peak_mb": hwm(), "base_mb": base, "rows": rows}))
"""


def baseline(root: Path, memory_limit: str) -> int:
    """Hand-written DuckDB: the three ASOF joins, ordered by the root key, COPY-ed to Parquet."""
    import duckdb
    from deltalake import DeltaTable

    def src(name: str) -> str:
        files = DeltaTable(str(root / "feature_store" / "tables" / f"{name}_1")).file_uris()
        return "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "])"

    con = duckdb.connect(config={"memory_limit": memory_limit,
                                 "temp_directory": str(root / "baseline_spill")})
    con.execute("SET TimeZone='UTC'")
    con.execute("SET asof_loop_join_threshold=0")
    con.execute("SET enable_progress_bar=false")
    joins = " ".join(
        f"ASOF LEFT JOIN (SELECT * EXCLUDE (entity, ts), entity AS e{g}, ts AS t{g} "
        f"FROM {src(f'feats{g}')}) r{g} ON l.entity = r{g}.e{g} AND l.ts >= r{g}.t{g}"
        for g in range(GROUPS)
    )
    out = root / "baseline.parquet"
    sql = (f"COPY (SELECT l.*, COLUMNS('^f[0-9]_') FROM {src('labels')} l {joins} "
           f"ORDER BY l.id, l.ts) TO '{out}' (FORMAT parquet)")
    con.execute(sql)
    rows = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0]
    con.close()
    out.unlink()
    return int(rows)


def reread(fv, version: int) -> int:
    """Stream every split of ``version`` back through the public read and check that its
    content hash is the recorded one; returns the rows read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from feature_store.core.content_hash import StreamingTableHash

    td = fv.get_training_dataset(version)
    parts = fv.get_train_test_split(version, dataframe_type="arrow_batches", primary_key=True,
                                    event_time=True, training_helper_columns=True)
    files = fv._td.verified_files(version)
    rows = 0
    for i, name in enumerate(td.splits):
        schema = pq.read_schema(files[name])
        digest = StreamingTableHash(schema)
        for x, y in zip(parts[i], parts[len(td.splits) + i], strict=True):
            columns = {**dict(zip(x.schema.names, x.columns)), **dict(zip(y.schema.names, y.columns))}
            digest.update(pa.RecordBatch.from_arrays([columns[n] for n in schema.names],
                                                     schema=schema))
        if digest.hexdigest() != td.splits[name]["sha256"]:
            raise SystemExit(f"re-read of split {name!r} differs from the recorded content hash")
        rows += digest.rows
    return rows


def _child(root: Path, step: str, memory_limit: str, split: str = "random") -> dict:
    here = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", CHILD, str(root), step, memory_limit, split],
                          capture_output=True, text=True, cwd=here,
                          env={**os.environ, "PYTHONPATH": str(here)})
    if proc.returncode != 0:
        raise SystemExit(f"{step} failed:\n{proc.stderr[-3000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--width", type=int, default=2, help="numeric columns per feature group")
    parser.add_argument("--chunk", type=int, default=2_000_000, help="rows per generated chunk")
    parser.add_argument("--memory-limit", default="4GB", help="DuckDB memory limit (both runs)")
    parser.add_argument("--split", default="random",
                        choices=["random", "stratified", "group", "time"],
                        help="the version's split: stratified on the label, group on the "
                             "entity, time on the label rows' event time")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--store", default=None,
                        help="keep the generated store here and reuse it if present")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(args.store) if args.store else Path(tmp) / "store"
        if (root / "feature_store" / "catalog.sqlite").exists():
            print(f"reusing the store in {root}")
        else:
            t = time.perf_counter()
            build(root, args.rows, args.width, args.chunk)
            print(f"generated {args.rows:,} label rows + {GROUPS} x {args.rows:,} feature rows "
                  f"({args.width} columns each) in {time.perf_counter() - t:.0f} s")
        steps = ["create", "verify", "reread"] + ([] if args.no_baseline else ["baseline"])
        load = os.getloadavg()
        try:
            results = {step: _child(root, step, args.memory_limit, args.split)
                       for step in steps}
        finally:
            if args.store:
                _child(root, "cleanup", args.memory_limit)
        print(f"load average before: {load[0]:.1f}, after: {os.getloadavg()[0]:.1f} "
              f"(1 min; {os.cpu_count()} cores)")
        for step, r in results.items():
            print(f"{step:8s} {r['seconds']:8.1f} s  ({r['cpu']:7.1f} CPU-s in the process)  peak RSS {r['peak_mb'] / 1024:5.2f} GB "
                  f"(imports {r['base_mb'] / 1024:.2f} GB)")
        create = results["create"]
        print(f"create: {create['rows'] / create['seconds'] / 1e6:.2f} M label rows/s, "
              f"{create['rows']:,} rows in the version")
        if "reread" in results:
            print(f"reread: {results['reread']['rows']:,} rows streamed back, content hashes equal "
                  f"to the recorded ones ({results['reread']['rows'] / results['reread']['seconds'] / 1e6:.2f} M rows/s)")
            if results["reread"]["rows"] != create["rows"]:
                raise SystemExit("the re-read row count differs from the version's")
        if "baseline" in results:
            print(f"create / hand-written DuckDB COPY: "
                  f"{create['seconds'] / results['baseline']['seconds']:.2f}x time")


if __name__ == "__main__":
    main()
