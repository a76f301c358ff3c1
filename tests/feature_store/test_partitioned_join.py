"""Out-of-core creation in hash partitions (``partitioned_join``): bit-identical to the in-memory
path and to the single statement, whatever the number of partitions."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feature_store.local.query import partitioned_join as pj
from feature_store.local.training_data.training_data_stream import StreamOptions
from fstrain.kernel.errors import InvalidArgumentError

T0 = pd.Timestamp("2024-01-01", tz="UTC")
N = 240


def _groups(fs):
    """A root keyed by ``rid`` joined on two columns (``a``, ``b``; nulls, keys without matches),
    a group with duplicate event times per key (ties broken by ``v``), and one on ``b`` alone."""
    rng = np.random.default_rng(5)
    a = pd.array(rng.integers(0, 12, N), dtype="Int64")
    a[::19] = pd.NA
    root = fs.get_or_create_feature_group("ev", version=1, primary_key=["rid"], event_time="ts")
    root.insert(pd.DataFrame({
        "rid": np.arange(N), "a": a, "b": rng.choice(["x", "y", "z", None], N),
        "ts": T0 + pd.to_timedelta(rng.permutation(N), unit="h"),
        "x": rng.normal(size=N), "helper": rng.integers(0, 3, N),
        "label": rng.choice([1.0, 0.0, None], N, p=[0.3, 0.6, 0.1]),
    }))
    hist = fs.get_or_create_feature_group("hist", version=1, primary_key=["a", "b", "v"],
                                          event_time="ts")
    m = 150
    hist.insert(pd.DataFrame({  # keys 0..9 only: a = 10, 11 never match
        "a": rng.integers(0, 10, m), "b": rng.choice(["x", "y", "z"], m), "v": np.arange(m),
        "ts": T0 + pd.to_timedelta(rng.integers(0, N // 4, m) * 4, unit="h"),
        "h1": rng.normal(size=m), "h2": rng.choice(["p", "q", None], m),
    }))
    prof = fs.get_or_create_feature_group("prof", version=1, primary_key=["b"], event_time="ts")
    prof.insert(pd.DataFrame({"b": ["x", "y", "z"] * 4,
                              "ts": np.repeat([T0 + pd.Timedelta(hours=h) for h in (0, 50, 100, 150)], 3),
                              "p": np.arange(12.0)}))
    return root, hist, prof


def _create(fv, stream, split="random", window=(None, None, None), **kwargs):
    kwargs = kwargs or {"test_size": 0.25}
    spec = fv._make_spec(False, 7, split, **kwargs)
    start, end, extra = window
    version, _ = fv._td.create(spec, seed=7, start_time=start, end_time=end,
                               extra_filter=extra, materialize=True,
                               data_format="parquet", description="", statistics_config=None,
                               stream=stream)
    return fv.get_training_dataset(version)


def _same(a, b):
    assert list(a.splits) == list(b.splits) and a.columns == b.columns
    for name in a.splits:
        assert b.splits[name]["rows"] == a.splits[name]["rows"] > 0
        assert b.splits[name]["sha256"] == a.splits[name]["sha256"]
        assert b.splits[name]["label_distribution"] == a.splits[name]["label_distribution"]
        files = [pq.read_table(Path(td.location) / f"{name}.parquet") for td in (a, b)]
        assert files[0].schema == files[1].schema and files[0].equals(files[1])


@pytest.fixture
def runs(monkeypatch):
    """How many buckets each partitioned run used (negative: joined by the statement, not by
    the numpy kernel)."""
    seen: list[int] = []
    real = pj.PartitionedQuery.run

    def spy(self):
        seen.append(self.buckets if self.kernel is not None else -self.buckets)
        return real(self)

    monkeypatch.setattr(pj.PartitionedQuery, "run", spy)
    return seen


def test_partitioned_versions_equal_in_memory_for_any_bucket_count(fs, runs):
    root, hist, _ = _groups(fs)
    query = (root.select_all()
             .join(hist.select(["h1", "h2"]), on=["a", "b"])
             .join(hist.select(["h1"]), on=["b", "a"], prefix="late_", lookback="30h")
             .filter(root.x > -1.5))
    fv = fs.create_feature_view("p", query=query, labels=["label"],
                                training_helper_columns=["helper"], label_fill_values={"label": -1.0})
    in_memory = _create(fv, None)
    for buckets in (3, 8):
        _same(in_memory, _create(fv, StreamOptions(batch_rows=13, partitions=buckets)))
    timed = _create(fv, None, "time", test_size=0.3)
    _same(timed, _create(fv, StreamOptions(batch_rows=64, partitions=2), "time", test_size=0.3))
    window = (T0 + pd.Timedelta(hours=20), T0 + pd.Timedelta(hours=200), root.helper > 0)
    _same(_create(fv, None, window=window),
          _create(fv, StreamOptions(batch_rows=9, partitions=6), window=window))
    # a filter on a joined group runs after the joins: the statement joins each bucket
    window = (T0 + pd.Timedelta(hours=20), T0 + pd.Timedelta(hours=200), hist.h1 > -1.0)
    _same(_create(fv, None, window=window),
          _create(fv, StreamOptions(batch_rows=9, partitions=6), window=window))
    assert runs == [3, 8, 2, 6, -6]
    fv.verify_training_dataset(timed.version)


def test_inner_joins_partition_and_other_shapes_fall_back(fs, runs):
    root, hist, prof = _groups(fs)
    inner = fs.create_feature_view(
        "inner", query=root.select_all().join(hist.select(["h1"]), on=["a", "b"], join_type="inner"),
        labels=["label"])
    _same(_create(inner, None), _create(inner, StreamOptions(batch_rows=5, partitions=4)))
    assert runs == [4]
    mixed = fs.create_feature_view(  # groups joined on different keys: one statement
        "mixed", query=root.select_all().join(hist.select(["h1"]), on=["a", "b"])
        .join(prof.select(["p"]), on=["b"]), labels=["label"])
    assert mixed._td._prepare(None, None, None, None)[0].partition_keys is None
    _same(_create(mixed, None), _create(mixed, StreamOptions(batch_rows=5, partitions=4)))
    assert runs == [4]


def test_bucket_count_follows_the_memory_limit(fs, monkeypatch):
    root, hist, _ = _groups(fs)
    fv = fs.create_feature_view("m", query=root.select_all().join(hist.select(["h1"]), on=["a", "b"]),
                                labels=["label"])
    compiled = fv._td._prepare(None, None, None, None)[0]
    size = pj.estimated_bytes(compiled)
    assert size > 0
    assert pj.bucket_count(compiled, "1GB") == 1
    for limit in (size, size // 2):
        expected = math.ceil(size / int(limit * pj.BUCKET_SHARE))
        assert expected > 1
        assert pj.bucket_count(compiled, f"{limit}B") == expected
        assert StreamOptions(memory_limit=f"{limit}B").buckets(compiled) == expected
    assert StreamOptions(partitions=9, memory_limit="1GB").buckets(compiled) == 9
    # the numpy kernel joins buckets of at most KERNEL_BUCKET_ROWS root rows, when partitioned,
    # up to KERNEL_MAX_BUCKETS
    monkeypatch.setattr(pj, "KERNEL_BUCKET_ROWS", 10)
    assert pj.bucket_count(compiled, f"{size}B") == 16 > math.ceil(size / int(size * pj.BUCKET_SHARE))
    monkeypatch.setattr(pj, "KERNEL_MAX_BUCKETS", 100)
    assert pj.bucket_count(compiled, f"{size}B") == N // 10
    assert pj.bucket_count(compiled, f"{size // 10}B") == 100  # what the memory needs
    assert pj.bucket_count(compiled, "1GB") == 1
    assert pj.size_bytes("1.5 GiB") == 3 << 29 and pj.size_bytes("4GB") == 4 * 10**9
    with pytest.raises(ValueError, match="not a size"):
        pj.size_bytes("lots")


@pytest.mark.parametrize("value", [0, "4", True])
def test_bad_partitions_option_is_refused(value):
    with pytest.raises(InvalidArgumentError, match="partitions"):
        StreamOptions.from_write_options({"partitions": value})


def _scratch(table, path):
    """A result file as the kernel (Arrow IPC, small batches) or the statement (Parquet) writes it."""
    if path.suffix == ".arrow":
        with pa.ipc.new_file(str(path), table.schema) as writer:
            writer.write_table(table, max_chunksize=300)
    else:
        pq.write_table(table, path, row_group_size=300)


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_merge_equals_one_sort_with_ties_nulls_and_strings(tmp_path, suffix):
    rng = np.random.default_rng(1)
    n = 5000
    table = pa.table({
        "k": pa.array(rng.integers(0, 300, n)),  # ties: the second key decides
        "s": pa.array([None if i % 97 == 0 else f"s{i % 41}" for i in range(n)]),
        "u": pa.array(np.arange(n)),
    })
    order = ["k", "s", "u"]
    sort_keys = [(c, "ascending") for c in order]
    bucket = rng.integers(0, 4, n)
    files = []
    for b in range(4):
        path = tmp_path / f"{b}{suffix}"
        _scratch(table.filter(pa.array(bucket == b)).sort_by(sort_keys), path)
        files.append(path)
    expected = table.sort_by(sort_keys)
    for batch_rows, columns in ((1000, None), (64, ["u"])):
        merged = pa.concat_tables(pj.merge_ordered(files, order, columns, batch_rows))
        assert merged.equals(expected if columns is None else expected.select(columns))
    for b, path in enumerate(files):
        _scratch(table.filter(pa.array(bucket == b)), path)
    ints = pa.concat_tables(pj.merge_ordered(files, ["u"], None, 500))
    assert ints.equals(table)
    # columns asked for in another order than the files': read by name
    picked = pa.concat_tables(pj.merge_ordered(files, ["u"], ["s", "k"], 500))
    assert picked.equals(table.select(["s", "k"]))
    assert sum(pj.file_rows(f) for f in files) == n


def test_partition_batches_follow_the_memory_limit(fs, monkeypatch):
    """The kernel's partitioning reads batches of at most PARTITION_SHARE of DuckDB's memory
    limit (a batch of 1M wide rows in each of two groups overran a 256 MB limit several times);
    the version is the same whatever the batch size."""
    from feature_store.local.query import bucket_join

    assert pj.partition_batch_rows(136, 256 * 10**6) == 256 * 10**6 // 32 // 136
    assert pj.partition_batch_rows(8, 64 * 10**9) == pj.PARTITION_BATCH
    assert pj.partition_batch_rows(10**6, 10**6) == pj.PARTITION_MIN_BATCH
    root, hist, _ = _groups(fs)
    fv = fs.create_feature_view("pb", query=root.select_all().join(hist.select(["h1"]), on=["a", "b"]),
                                labels=["label"])
    batches: list[int] = []
    real = bucket_join.write_buckets

    def spy(reader, *args):
        def counted():
            for batch in reader:
                batches.append(batch.num_rows)
                yield batch
        return real(counted(), *args)

    monkeypatch.setattr(bucket_join, "write_buckets", spy)
    whole = _create(fv, StreamOptions(batch_rows=7, partitions=3))
    assert max(batches) == N  # the default minimum holds every row of this small root
    monkeypatch.setattr(pj, "PARTITION_MIN_BATCH", 1)
    monkeypatch.setattr(pj, "PARTITION_SHARE", 4096 / (64 * 10**6))  # 4 KiB of a 64 MB limit
    batches.clear()
    small = _create(fv, StreamOptions(batch_rows=7, partitions=3, memory_limit="64MB"))
    assert len(batches) > 4 and max(batches) < N / 4  # rows of more than 8 value bytes
    _same(whole, small)


def test_bucket_numbers_are_a_function_of_the_key_values():
    """Equal keys get the same bucket whatever their batch, chunking or neighbours (nulls as
    0); timestamps by their microseconds in any unit or zone; every bucket is used."""
    rng = np.random.default_rng(3)
    ints = rng.integers(-(1 << 40), 1 << 40, 5000)
    days = pa.array(rng.integers(0, 20000, 5000).astype(np.int32), pa.date32())
    both = pj.bucket_numbers([pa.array(ints), days], 7)
    assert both.dtype == np.uint16 and set(both) == set(range(7))
    assert np.array_equal(pj.bucket_numbers([pa.array(ints[::-1]), days[::-1]], 7), both[::-1])
    chunked = pa.chunked_array([ints[:10], ints[10:]])
    assert np.array_equal(pj.bucket_numbers([chunked], 5), pj.bucket_numbers([pa.array(ints)], 5))
    assert not np.array_equal(both, pj.bucket_numbers([days, pa.array(ints)], 7))  # key order
    micros = pa.array(ints, pa.timestamp("us", "UTC"))
    assert np.array_equal(pj.bucket_numbers([micros], 9), pj.bucket_numbers([pa.array(ints)], 9))
    nanos = pa.array(ints * 1000, pa.timestamp("ns", "Europe/Paris"))
    assert np.array_equal(pj.bucket_numbers([nanos], 9), pj.bucket_numbers([micros], 9))
    nulls = pa.array([5, None, 0, None], pa.int64())
    assert list(pj.bucket_numbers([nulls], 11)) == list(pj.bucket_numbers([pa.array([5, 0, 0, 0])], 11))
    flags = pj.bucket_numbers([pa.array([True, False, None])], 3)
    assert list(flags) == list(pj.bucket_numbers([pa.array([1, 0, 0])], 3))
    counts = np.bincount(pj.bucket_numbers([pa.array(np.arange(64_000) << 20)], 16), minlength=16)
    assert counts.min() > 3000  # regular keys spread over every bucket


def test_integer_date_and_bool_keys_are_bucketed_in_numpy(fs, runs, monkeypatch):
    """Keys of integers (with nulls), dates and bools are bucketed without DuckDB's hash, in
    any key order of a join; the version equals the in-memory one."""
    rng = np.random.default_rng(8)
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 3, N)]
    k = pd.array(rng.integers(0, 9, N), dtype="Int64")
    k[::13] = pd.NA
    root = fs.get_or_create_feature_group("nk", version=1, primary_key=["rid"], event_time="ts")
    root.insert(pd.DataFrame({"rid": np.arange(N), "k": k, "d": days, "on": rng.random(N) < 0.5,
                              "ts": T0 + pd.to_timedelta(rng.permutation(N), unit="h"),
                              "label": rng.integers(0, 2, N)}))
    m = 400
    hist = fs.get_or_create_feature_group("nh", version=1, primary_key=["k", "d", "on"],
                                          event_time="ts")
    hist.insert(pd.DataFrame({
        "k": rng.integers(0, 10, m), "on": rng.random(m) < 0.5,
        "d": [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 4, m)],
        "ts": T0 + pd.to_timedelta(np.arange(m), unit="h"), "h": rng.normal(size=m)}))
    query = (root.select_all().join(hist.select(["h"]), on=["k", "d", "on"])
             .join(hist.select(["h"]), on=["on", "d", "k"], prefix="r_", lookback="40h"))
    fv = fs.create_feature_view("nkv", query=query, labels=["label"])
    sql_hashed = []
    real = pj.PartitionedQuery._sql_hashed
    monkeypatch.setattr(pj.PartitionedQuery, "_sql_hashed",
                        lambda self: sql_hashed.append(real(self)) or real(self))
    in_memory = _create(fv, None)
    for buckets in (3, 5):
        _same(in_memory, _create(fv, StreamOptions(batch_rows=11, partitions=buckets)))
    assert runs == [3, 5] and sql_hashed and all(h == [False] * 3 for h in sql_hashed)
    train = pq.read_table(Path(in_memory.location) / "train.parquet")
    assert 0 < train.column("h").null_count < train.column("r_h").null_count < train.num_rows


def test_gather_equals_arrow_take_for_every_column_kind():
    """The merge's gather (numpy for fixed-width columns, Arrow for the rest) gives Arrow's
    take, in one chunk per column: nulls, sliced chunks, empty chunks, several widths."""
    rng = np.random.default_rng(3)
    n = 400
    mask = rng.random(n) < 0.2
    whole = pa.table({
        "i64": pa.array(rng.integers(-9, 9, n), mask=mask),
        "f64": pa.array(rng.normal(size=n)),
        "f32": pa.array(rng.normal(size=n).astype("f4"), mask=~mask),
        "i8": pa.array(rng.integers(-9, 9, n).astype("i1")),
        "u16": pa.array(rng.integers(0, 9, n).astype("u2"), mask=mask),
        "ts": pa.array(rng.integers(0, 10**12, n), pa.timestamp("us", tz="UTC"), mask=mask),
        "d": pa.array(rng.integers(0, 10**4, n).astype("i4"), pa.date32()),
        "b": pa.array(rng.random(n) < 0.5, mask=mask),
        "s": pa.array([None if m else f"s{i}" for i, m in enumerate(mask)]),
        "dec": pa.array([None if m else i for i, m in enumerate(mask)], pa.decimal128(9, 2)),
    })
    # chunks that start inside their buffers (slices) and an empty one
    table = pa.concat_tables([whole.slice(0, 150), whole.slice(150, 0), whole.slice(150, 1),
                              whole.slice(151)])
    assert table.column("i64").num_chunks > 1
    for indices in (rng.permutation(n), rng.permutation(n)[:57], np.arange(0), np.arange(n)):
        got = pj.gather(table, indices)
        assert got.equals(whole.take(pa.array(indices, pa.int64())))
        assert all(c.num_chunks == 1 for c in got.columns)
        assert [c.null_count for c in got.columns] == [
            c.null_count for c in whole.take(pa.array(indices, pa.int64())).columns]


@pytest.mark.parametrize("dtype", ["i8", "i4", "u8", "u1", "M8[us]", "M8[D]"])
def test_stable_argsort_equals_numpys(dtype):
    """The merge's sort of a window's first key (row numbers packed under the keys where they
    fit, numpy's stable argsort where not) orders as numpy's stable argsort, ties included."""
    rng = np.random.default_rng(4)
    samples = [rng.integers(0, 40, size).astype(dtype) for size in (0, 1, 2, 300)]
    if dtype in ("i8", "u8"):  # spans too wide to pack: the plain stable argsort
        info = np.iinfo(dtype)
        samples.append(np.array([info.max, info.min, 3, info.max, 0], dtype))
    for keys in samples:
        indices, ties = pj._stable_argsort(keys, True)
        expected = np.argsort(keys, kind="stable")
        assert np.array_equal(indices, expected)
        ordered = keys[expected]
        assert ties == bool(np.any(ordered[1:] == ordered[:-1]))
        assert np.array_equal(pj._stable_argsort(np.unique(keys), True)[0],
                              np.arange(len(np.unique(keys))))


def test_arrow_bits_validity_and_values_of_slices():
    """Validity and raw values of slices starting anywhere in a bitmap's byte, of arrays
    without a bitmap, and of the null type."""
    from feature_store.core import arrow_bits

    rng = np.random.default_rng(6)
    mask = rng.random(100) < 0.3
    whole = pa.array(rng.integers(0, 9, 100), mask=mask)
    for start, length in ((0, 100), (3, 50), (13, 0), (9, 1), (17, 83)):
        part = whole.slice(start, length)
        assert np.array_equal(arrow_bits.validity(part), ~mask[start:start + length])
        raw = arrow_bits.raw_values(part, arrow_bits.lanes(part.type))
        assert np.array_equal(raw[~mask[start:start + length]].view("i8"),
                              part.drop_null().to_numpy())
    assert arrow_bits.validity(pa.array([1.0, 2.0])).all()
    assert not arrow_bits.validity(pa.nulls(3)).any()
    assert arrow_bits.lanes(pa.bool_()) is None and arrow_bits.lanes(pa.string()) is None
    assert arrow_bits.lanes(pa.timestamp("us", "UTC")) == "<u8"


def test_split_statistics_are_identical_for_any_bucket_count_and_batch_rows(fs, runs, monkeypatch):
    """The statistics recorded for a split while it is written (counts, min/max/mean/stddev)
    are a function of its rows and their order only: two partitioned creates of the same version
    with other bucket counts and batch sizes (other merge windows fed to the split writers)
    record them bit for bit alike. Blocks of 8 values make every batching break blocks."""
    from feature_store.local.storage import statistics

    monkeypatch.setattr(statistics, "BLOCK", 8)
    monkeypatch.setattr(pj, "MERGE_MIN_READ", 1)  # windows of batch_rows / buckets rows
    root, hist, _ = _groups(fs)
    fv = fs.create_feature_view("ps", query=root.select_all().join(hist.select(["h1"]), on=["a", "b"]),
                                labels=["label"], label_fill_values={"label": -1.0})
    a = _create(fv, StreamOptions(batch_rows=13, partitions=3))
    b = _create(fv, StreamOptions(batch_rows=64, partitions=8))
    _same(a, b)
    assert runs == [3, 8]
    for name in a.splits:
        recorded = [td.splits[name]["statistics"] for td in (a, b)]
        assert recorded[0] == recorded[1]  # ==, not approximately
        means = {e["feature"]: e["mean"] for e in recorded[0]["features"] if e.get("mean") is not None}
        assert {"x", "h1", "label"} <= set(means)


def test_a_result_file_read_by_some_columns_releases_only_its_own_pages(tmp_path, monkeypatch):
    """A read of some of a mapped result file's columns (a split's key columns) hands the pages
    merged back as a read of all does. Read with pyarrow's ``included_fields``, the columns were
    copied out of the mapping: their pages stayed resident (1 GB of RSS to assign a 30M-row
    stratified split), and the copies' addresses, taken for file offsets, made the release run
    past the file under the system allocator ("madvise start out of bounds"); only buffers
    inside the mapping count."""
    table = pa.table({"k": np.arange(30_000), "v": np.arange(30_000) * 0.5,
                      "s": [f"s{i}" for i in range(30_000)]})
    path = tmp_path / "part.arrow"
    with pa.ipc.new_file(str(path), table.schema) as writer:
        for batch in table.to_batches(max_chunksize=3_000):
            writer.write_batch(batch)
    mapping = pj._Mapping(path)
    assert mapping.start(pa.record_batch({"k": pa.array([1, 2])})) is None  # not in the file
    released: list[int] = []
    real = pj._Mapping.release
    monkeypatch.setattr(pj._Mapping, "release",
                        lambda self, end: released.append(end) or real(self, end))
    for columns in (None, ["k"], ["s", "k"]):
        released.clear()
        batches, _ = pj._ordered_batches(path, columns, 1_000)
        got = pa.Table.from_batches(list(batches))
        assert got.equals(table if columns is None else table.select(columns))
        assert all(0 <= end < path.stat().st_size for end in released)
        assert len(released) == 8  # zero-copy: the pages of the batches merged are handed back
