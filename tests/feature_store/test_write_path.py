"""The write path of out-of-core creation (split codes, the replayed merge, split files): the
same versions as the in-memory path and as recorded before it was made cheaper."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feature_store.core.splits import (
    NO_SPLIT,
    assign_split_codes,
    assign_splits,
    make_split_spec,
)
from feature_store.local.query import partitioned_join as pj
from feature_store.local.training_data.training_data_stream import StreamOptions

T0 = pd.Timestamp("2024-01-01", tz="UTC")
N = 400

#: content sha256 of every split, recorded with the code before split codes and the footer count
#: (the files' bytes changed since: their row groups no longer follow the merge's windows)
GOLDEN = {
    "random": {
        "train": "3953dcd02d516afc43844258fbaef192fcc1eb257fb414b4e74646438c18d684",
        "test": "f932fedb0ef3efca56936f2eff2c45c3918c957cb4747e295bc3b8450e9078fe",
    },
    "time": {
        "train": "4e873956669d7d3afd1835d10d1179d1c0886a48f6832482cbe60bb8b3dda26e",
        "test": "759efa2dc09d45f88d5aa2242a517c0f5b9fe180fcd0946b7bcfeeccbdc55b67",
    },
    "group": {
        "train": "beb088767f68769d70f9f4642a8098fbdafc94357bbec1b89414ecbcc7541f3c",
        "test": "b971b16d0243912c95d208ac38a390d4eb290905757e9d9d18506c1785201ea7",
    },
    "stratified": {
        "train": "7259550a01342148759ebef8adae77dd7cb7eb35225ac42d62020b82e9a6da26",
        "test": "f16013719a55726628d6dd78138ca280df72046ef3da3755d9f2567170a8164c",
    },
}

SPLITS = {
    "random": {"test_size": 0.25},
    "time": {"test_size": 0.3},
    "group": {"test_size": 0.25, "group_column": "entity"},
    "stratified": {"test_size": 0.25},
}


def _view(fs):
    """Labels keyed by ``rid`` PIT-joined with a feature group on ``entity`` (the group column
    comes after the root key in the result, so the merge reads columns out of file order)."""
    rng = np.random.default_rng(3)
    root = fs.get_or_create_feature_group("ev", version=1, primary_key=["rid"], event_time="ts")
    root.insert(pd.DataFrame({
        "rid": np.arange(N), "entity": rng.integers(0, 40, N),
        "ts": T0 + pd.to_timedelta(rng.permutation(N), unit="h"),
        "label": rng.choice([0, 1, 2], N, p=[0.5, 0.3, 0.2]), "x": rng.normal(size=N),
    }))
    feats = fs.get_or_create_feature_group("feats", version=1, primary_key=["entity", "v"],
                                           event_time="ts")
    m = 300
    feats.insert(pd.DataFrame({
        "entity": rng.integers(0, 40, m), "v": np.arange(m),
        "ts": T0 + pd.to_timedelta(rng.integers(0, N, m), unit="h"),
        "f": rng.normal(size=m), "s": rng.choice(["p", "q", None], m),
    }))
    query = root.select_all().join(feats.select(["f", "s"]), on=["entity"])
    return fs.create_feature_view("w", query=query, labels=["label"])


def _create(fv, stream, split, three_way=False):
    spec = fv._make_spec(three_way, 7, split, **SPLITS[split])
    version, _ = fv._td.create(spec, seed=7, start_time=None, end_time=None, extra_filter=None,
                               materialize=True, data_format="parquet", description="",
                               statistics_config=None, stream=stream)
    return fv.get_training_dataset(version)


@pytest.fixture
def passes(monkeypatch):
    """The column lists every merge of the partitioned results was asked for."""
    seen: list[list[str] | None] = []
    real = pj.merge_windows

    def spy(files, order, columns, batch_rows):
        seen.append(columns)
        return real(files, order, columns, batch_rows)

    monkeypatch.setattr(pj, "merge_windows", spy)
    return seen


@pytest.mark.parametrize("split", list(SPLITS))
def test_partitioned_versions_equal_in_memory_and_recorded(fs, passes, split):
    fv = _view(fs)
    in_memory = _create(fv, None, split)
    streamed = _create(fv, StreamOptions(batch_rows=37, partitions=4), split)
    assert list(streamed.splits) == list(in_memory.splits) == ["train", "test"]
    for name, meta in streamed.splits.items():
        assert meta["rows"] == in_memory.splits[name]["rows"] > 0
        assert meta["sha256"] == in_memory.splits[name]["sha256"]
        assert meta["label_distribution"] == in_memory.splits[name]["label_distribution"]
        stats, expected = meta["statistics"], in_memory.splits[name]["statistics"]
        assert stats["row_count"] == meta["rows"]
        for got, want in zip(stats["features"], expected["features"], strict=True):
            assert got.keys() == want.keys()
            for key, value in want.items():
                assert got[key] == (pytest.approx(value, rel=1e-12)
                                    if isinstance(value, float) else value), (name, key)
        path = Path(streamed.location) / f"{name}.parquet"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == meta["file_sha256"]
    assert {n: m["sha256"] for n, m in streamed.splits.items()} == GOLDEN[split]
    # a random split reads no column: its rows are counted from the files' footers; the other
    # strategies read only their key column before the one full pass (a time split of few rows
    # once, a stratified or group split twice: its counts, then its codes)
    assert passes[-1] is None and all(p is not None and len(p) == 1 for p in passes[:-1])
    assert len(passes) == 1 + {"random": 0, "time": 1, "group": 2, "stratified": 2}[split]
    # row groups of batch_rows rows, whatever the buckets and the merge's windows: the files'
    # bytes are the same for any number of partitions
    other = _create(fv, StreamOptions(batch_rows=37, partitions=7), split)
    for name, meta in streamed.splits.items():
        assert other.splits[name]["file_sha256"] == meta["file_sha256"]
        groups = pq.ParquetFile(Path(streamed.location) / f"{name}.parquet").metadata
        sizes = [groups.row_group(g).num_rows for g in range(groups.num_row_groups)]
        assert sizes == [37] * (meta["rows"] // 37) + ([meta["rows"] % 37] if meta["rows"] % 37 else [])
    fv.verify_training_dataset(streamed.version)


def _frame(n=997):
    rng = np.random.default_rng(11)
    return pd.DataFrame({"y": rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1]),
                         "g": rng.integers(0, 60, n),
                         "t": T0 + pd.to_timedelta(rng.integers(0, 500, n), unit="h")})


#: sha256 (first 16 digits) of "|".join(split names) as assigned before the codes existed
ASSIGNED = {
    "random2": ({"seed": 3, "test_size": 0.2}, "a6a35b8c25300e64"),
    "random3": ({"seed": 3, "three_way": True, "test_size": 0.2, "validation_size": 0.15},
                "a55d7cbcce7f73b5"),
    "strat3": ({"strategy": "stratified", "seed": 4, "three_way": True, "test_size": 0.2,
                "validation_size": 0.1}, "0d18709607666273"),
    "group3": ({"strategy": "group", "group_column": "g", "seed": 5, "three_way": True,
                "test_size": 0.2, "validation_size": 0.2}, "c30298418376a10b"),
    "time_gap": ({"strategy": "time", "seed": 0, "three_way": True,
                  "train_end": T0 + pd.Timedelta("200h"), "validation_end": T0 + pd.Timedelta("350h"),
                  "gap": "10h"}, "e5480463744051cc"),
    "time_sizes": ({"strategy": "time", "seed": 0, "test_size": 0.25}, "5346b0657061f848"),
}


@pytest.mark.parametrize("case", list(ASSIGNED))
def test_split_codes_assign_the_rows_as_before(case):
    kwargs, digest = ASSIGNED[case]
    spec = make_split_spec(**kwargs)
    codes = assign_split_codes(_frame(), spec, event_time_column="t", label_column="y")
    names = assign_splits(_frame(), spec, event_time_column="t", label_column="y")
    assert codes.dtype == np.int8
    assert hashlib.sha256("|".join(map(str, names)).encode()).hexdigest()[:16] == digest
    expected = np.array([NO_SPLIT if n is None else spec.splits.index(n) for n in names])
    assert (codes == expected).all()
    assert (codes == NO_SPLIT).any() == (case == "time_gap")


def test_streaming_statistics_equal_duckdb_for_any_batching():
    """Numbers, NaN and ±inf (left to DuckDB), timestamps of every unit, dates, strings,
    booleans, decimals, all-null and single-value columns."""
    from feature_store.local.storage import engine
    from feature_store.local.storage.statistics import StreamingStatistics, compute_statistics

    rng = np.random.default_rng(0)
    n = 300
    f = rng.normal(size=n)
    f[::7] = np.nan
    table = pa.table({
        "i": pa.array(rng.integers(-2**62, 2**62, n)), "f": pa.array(f, from_pandas=True),
        "g": pa.array(rng.normal(size=n)).cast(pa.float32()),
        "nan": pa.array([1.0, float("nan")] * (n // 2)),
        "inf": pa.array([1.0, float("inf")] * (n // 2)),
        "ts": pa.array(rng.integers(0, 10**15, n)).cast(pa.timestamp("us", tz="UTC")),
        "tsn": pa.array(rng.integers(0, 10**18, n)).cast(pa.timestamp("ns")),
        "d": pa.array(rng.integers(0, 20000, n).astype("int32")).cast(pa.date32()),
        "s": pa.array(rng.choice(["a", "b", None], n)), "b": pa.array(rng.random(n) < 0.3),
        "none": pa.nulls(n, pa.float64()), "one": pa.array([None] * (n - 1) + [3], pa.int64()),
        "dec": pa.array([1, 2, None] * (n // 3), pa.decimal128(10, 2)),
        "no_ts": pa.nulls(n, pa.timestamp("ms")),
    })
    con = engine.connect()
    con.register("x", table)
    want = compute_statistics(con, "x", table.schema)
    for size in (n, 41, 1):
        stats = StreamingStatistics(table.schema)
        for batch in table.to_batches(max_chunksize=size):
            stats.update(batch)
        got = stats.result(con, "x")
        assert got["row_count"] == want["row_count"] == n
        for a, b in zip(got["features"], want["features"], strict=True):
            assert list(a) == list(b)
            for key, value in b.items():
                assert a[key] == (pytest.approx(value, rel=1e-12)
                                  if isinstance(value, float) else value), (a["feature"], key)
    con.close()


def test_verify_reports_changed_bytes_before_an_unreadable_file(tmp_path):
    """The file's sha256 runs beside the parse: a damaged file whose bytes changed is reported
    as changed; an unreadable file without a recorded hash as unreadable."""
    from feature_store.core.content_hash import table_sha256
    from feature_store.local.training_data.training_data_stream import (
        file_sha256,
        verified_content_hash,
    )
    from fstrain.kernel.errors import IntegrityError

    path = tmp_path / "train.parquet"
    table = pa.table({"a": np.arange(1000), "b": np.linspace(0, 1, 1000)})
    pq.write_table(table, path, row_group_size=100)
    recorded = file_sha256(path)
    assert verified_content_hash(path, "v", "train", recorded, batch_rows=64) == table_sha256(table)
    path.write_bytes(path.read_bytes()[:-20])  # the footer is cut: unreadable
    with pytest.raises(IntegrityError, match="no longer matches its recorded sha256"):
        verified_content_hash(path, "v", "train", recorded)
    with pytest.raises(IntegrityError, match="cannot be read as parquet"):
        verified_content_hash(path, "v", "train", None)


def test_pipelined_split_writers_keep_order_and_surface_a_failed_write(tmp_path, monkeypatch):
    """Many small batches for two splits, queued several deep on the writer, hasher, statistics
    and sink threads: each file holds its rows in order in full row groups, its recorded sha256
    is the file's and its content hash the rows'; a failing write raises from the ``with``."""
    from feature_store.core.content_hash import table_sha256
    from feature_store.local.training_data import training_data_stream as ts

    monkeypatch.setattr(ts, "SINK_BUFFER", 64)  # many sink writes, queued on the sink thread
    table = pa.table({"id": np.arange(1000, dtype="int64"), "x": np.linspace(0, 1, 1000)})
    with ts._SplitWriters(tmp_path, table.schema, ("a", "b"), group_rows=64) as writers:
        for batch in table.to_batches(max_chunksize=7):
            writers.write("a" if batch["id"][0].as_py() % 2 else "b", batch)
    for name, split in writers.files.items():
        written = pq.ParquetFile(split.path)
        rows = written.read()
        assert rows["id"].to_pylist() == sorted(rows["id"].to_pylist()) and rows.num_rows == split.rows
        assert [written.metadata.row_group(i).num_rows for i in range(written.num_row_groups)][:-1] \
            == [64] * (written.num_row_groups - 1)
        assert split.file_sha256 == hashlib.sha256(split.path.read_bytes()).hexdigest()
        assert split.sha256 == table_sha256(rows)
    assert sum(s.rows for s in writers.files.values()) == 1000

    def fail(*_: object) -> None:
        raise OSError("disk full")

    broken_dir = tmp_path / "broken"
    broken_dir.mkdir()
    with pytest.raises(OSError, match="disk full"):
        with ts._SplitWriters(broken_dir, table.schema, ("c",), group_rows=64) as broken:
            monkeypatch.setattr(broken.writers["c"], "write_table", fail, raising=False)
            for batch in table.to_batches(max_chunksize=100):
                broken.write("c", batch)
