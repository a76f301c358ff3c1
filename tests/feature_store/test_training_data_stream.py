"""Out-of-core creation: a version streamed in small batches equals one built in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feature_store.core.content_hash import StreamingTableHash, table_sha256
from feature_store.local.training_data.training_data_stream import StreamOptions
from feature_store.transformations import label_encoder, standard_scaler
from fstrain.kernel.errors import InvalidArgumentError

T0 = pd.Timestamp("2024-01-01", tz="UTC")
N = 300


@pytest.fixture
def fv(fs):
    rng = np.random.default_rng(3)
    tx = fs.get_or_create_feature_group("tx", version=1, primary_key=["tid"], event_time="ts")
    amount = rng.gamma(2, 10, N)
    amount[::17] = np.nan
    tx.insert(pd.DataFrame({
        "tid": np.arange(N), "card": rng.integers(0, 30, N),
        "ts": T0 + pd.to_timedelta(rng.permutation(N), unit="h"),
        "amount": amount, "kind": rng.choice(["a", "b", None], N),
        "label": (rng.random(N) < 0.3).astype(int),
    }))
    agg = fs.get_or_create_feature_group("card_agg", version=1, primary_key=["card"], event_time="ts")
    agg.insert(pd.DataFrame({"card": np.arange(30).repeat(3),
                             "ts": np.tile([T0, T0 + pd.Timedelta(days=3), T0 + pd.Timedelta(days=9)], 30),
                             "spend": rng.normal(size=90)}))
    query = tx.select_all().join(agg.select(["spend"]), on=["card"])
    return fs.create_feature_view("fraud", query=query, labels=["label"],
                                  transformation_functions=[standard_scaler("amount"),
                                                            label_encoder("kind")])


def _create(fv, stream, three_way, split, **kwargs):
    spec = None if three_way is None else fv._make_spec(three_way, 11, split, **kwargs)
    version, _ = fv._td.create(spec, seed=11, start_time=None, end_time=None, extra_filter=None,
                               materialize=True, data_format="parquet", description="",
                               statistics_config=None, stream=stream)
    return version


CASES = [
    (None, None, {}),
    (False, "random", {"test_size": 0.25}),
    (True, "random", {"test_size": 0.2, "validation_size": 0.2}),
    (False, "stratified", {"test_size": 0.3}),
    (False, "time", {"test_size": 0.2}),
    (False, "group", {"test_size": 0.3, "group_column": "card"}),
]


@pytest.fixture
def mapped(monkeypatch):
    """Every array the split assignment allocates (path, dtype, rows, mapped from a file), and
    whether its scratch folder was gone after each create."""
    from feature_store.local.training_data import training_data_stream as ts

    seen: list[tuple[Path, str, int, bool]] = []
    real = ts.ScratchArrays.__call__

    def spy(self, n, dtype):
        out = real(self, n, dtype)
        seen.append((self.folder, np.dtype(dtype).name, n, isinstance(out, np.memmap)))
        return out

    monkeypatch.setattr(ts.ScratchArrays, "__call__", spy)
    return seen


@pytest.mark.parametrize(("three_way", "split", "kwargs"), CASES)
def test_streamed_version_is_bit_identical_to_in_memory(fv, mapped, monkeypatch, three_way,
                                                       split, kwargs):
    """On both out-of-core paths (one statement; hash partitions), every strategy's codes held
    in a file mapping that is gone once the version is created; the key columns' batches cut
    again into pieces of other sizes."""
    from feature_store.local.training_data import rows

    in_memory = _create(fv, None, three_way, split, **kwargs)
    a = fv.get_training_dataset(in_memory)
    for stream, piece in ((StreamOptions(batch_rows=7), 5),
                          (StreamOptions(batch_rows=7, partitions=3), 1 << 16)):
        monkeypatch.setattr(rows, "KEY_PIECE_ROWS", piece)
        streamed = _create(fv, stream, three_way, split, **kwargs)
        _same_version(fv, a, fv.get_training_dataset(streamed))
    if split is None:
        assert mapped == []
        return
    # each create's codes (and the assignment's scratch arrays: permutations, occurrence codes)
    assert len({folder for folder, *_ in mapped}) == 2 and all(is_map for *_, is_map in mapped)
    for folder in {folder for folder, *_ in mapped}:
        assert ("int8", N) in [(dtype, n) for f, dtype, n, _ in mapped if f == folder]
    assert all(folder.name == ".split-scratch" and not folder.exists() for folder, *_ in mapped)


def _same_version(fv, a, b):
    assert list(a.splits) == list(b.splits)
    assert a.columns == b.columns and a.split_spec == b.split_spec
    assert a.transformation_statistics == b.transformation_statistics
    for name in a.splits:
        left, right = a.splits[name], b.splits[name]
        assert right["rows"] == left["rows"] > 0
        assert right["sha256"] == left["sha256"]
        assert right["label_distribution"] == left["label_distribution"]
        files = [pq.read_table(Path(td.location) / f"{name}.parquet") for td in (a, b)]
        assert files[0].schema == files[1].schema and files[0].equals(files[1])
        assert table_sha256(files[1]) == right["sha256"]
        assert pq.ParquetFile(Path(b.location) / f"{name}.parquet").num_row_groups > 1
        for sa, sb in zip(left["statistics"]["features"], right["statistics"]["features"], strict=True):
            assert sa.keys() == sb.keys()
            for key, value in sa.items():
                assert sb[key] == (pytest.approx(value) if isinstance(value, float) else value)
    fv.verify_training_dataset(b.version)
    assert fv._td.read_splits(b.version)[1].keys() == fv._td.read_splits(a.version)[1].keys()
    for x, y in zip(fv._td.read_splits(b.version)[1].values(),
                    fv._td.read_splits(a.version)[1].values(), strict=True):
        assert x.equals(y)


def test_scratch_arrays_are_file_mappings_deleted_also_on_failure(tmp_path):
    from feature_store.local.training_data.training_data_stream import ScratchArrays

    folder = tmp_path / ".split-scratch"
    with pytest.raises(RuntimeError, match="boom"), ScratchArrays(folder) as alloc:
        codes = alloc(1000, np.int8)
        codes[:] = 3
        assert isinstance(codes, np.memmap) and len(list(folder.iterdir())) == 1
        assert alloc(0, np.int64).shape == (0,)  # no file for no rows
        raise RuntimeError("boom")
    assert not folder.exists() and int(codes.sum()) == 3000  # the mapping outlives the file


def test_default_create_streams_and_purged_version_recreates(fv):
    version, _ = fv.create_train_test_split(test_size=0.25, seed=2,
                                            write_options={"batch_rows": 16})
    before = fv.get_train_test_split(version)
    td = fv.get_training_dataset(version)
    fv.purge_training_data(version)
    fv.recreate_training_dataset(version)
    after = fv.get_train_test_split(version)
    for x, y in zip(before, after, strict=True):
        pd.testing.assert_frame_equal(x, y)
    assert fv.get_training_dataset(version).splits["train"]["sha256"] == td.splits["train"]["sha256"]
    assert not any(p.name.startswith(".") for p in Path(td.location).iterdir())  # no scratch left


@pytest.mark.parametrize("options", [{"batch_rows": 0}, {"batch_rows": "10"}, {"memory_limit": "lots"}])
def test_bad_write_options_are_refused_and_write_nothing(fv, options):
    with pytest.raises(InvalidArgumentError, match="write_options"):
        fv.create_train_test_split(test_size=0.25, seed=2, write_options=options)
    assert fv.get_training_datasets() == []


def test_streaming_hash_equals_table_hash_for_any_batching():
    table = pa.table({
        "i": pa.array([1, None, 3, 4, 5], pa.int64()), "s": pa.array(["a", None, "", "dd", "e"]),
        "f": pa.array([0.5, -0.0, None, float("nan"), 2.0]), "b": pa.array([True, None, False, True, True]),
        "t": pa.array([0, 1, None, 3, 4], pa.timestamp("us", tz="UTC")),
    })
    for size in (1, 2, 5):
        hasher = StreamingTableHash(table.schema)
        for batch in table.to_batches(max_chunksize=size):
            hasher.update(batch)
        assert hasher.hexdigest() == table_sha256(table)
    hasher = StreamingTableHash(table.schema)
    hasher.update(table.slice(0, 4))
    assert hasher.hexdigest() != table_sha256(table)


def test_streaming_verify_catches_changed_and_missing_files(fv):
    from fstrain.kernel.errors import IntegrityError

    version, _ = fv.create_train_test_split(test_size=0.25, seed=2, write_options={"batch_rows": 50})
    fv.verify_training_dataset(version)
    location = Path(fv.get_training_dataset(version).location)
    test = pq.read_table(location / "test.parquet")
    pq.write_table(test.slice(1), location / "test.parquet")  # a valid file, one row fewer
    with pytest.raises(IntegrityError, match="split 'test'"):
        fv.verify_training_dataset(version)
    (location / "test.parquet").unlink()
    with pytest.raises(IntegrityError, match="missing"):
        fv.verify_training_dataset(version)


def test_verified_split_file_is_not_rehashed_but_a_rewrite_is_caught(fv, monkeypatch):
    import os

    import feature_store.local.readers.split_files as files_module
    from fstrain.kernel.errors import IntegrityError

    monkeypatch.setattr(files_module, "RACY_NS", -10**18)  # remember files however new
    hashed = []
    real = files_module.sha256_hex
    monkeypatch.setattr(files_module, "sha256_hex", lambda data: hashed.append(1) or real(data))
    version, _ = fv.create_train_test_split(test_size=0.25, seed=2)
    first = fv.get_train_test_split(version)
    assert len(hashed) == 2  # both split files checked once
    second = fv.get_train_test_split(version)
    assert len(hashed) == 2  # same identities: not hashed again
    for x, y in zip(first, second, strict=True):
        pd.testing.assert_frame_equal(x, y)
    path = Path(fv.get_training_dataset(version).location) / "train.parquet"
    before = os.stat(path)
    table = pq.read_table(path)
    flipped = table.set_column(table.column_names.index("label"), "label",
                               pa.array([1 - v for v in table.column("label").to_pylist()]))
    pq.write_table(flipped, path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the mtime put back; ctime moves
    with pytest.raises(IntegrityError, match="'train' no longer matches"):
        fv.get_train_test_split(version)


def test_filled_labels_stream_bit_identically(fs):
    """A positives-only label group LEFT-joined and filled (ccfraud's shape), 9-row batches."""
    tx = fs.get_or_create_feature_group("t", version=1, primary_key=["tid"], event_time="ts")
    tx.insert(pd.DataFrame({"tid": np.arange(60), "amount": np.arange(60) * 1.5,
                            "ts": T0 + pd.to_timedelta(np.arange(60), unit="h")}))
    fraud = fs.get_or_create_feature_group("fraud", version=1, primary_key=["tid"], event_time="ts")
    fraud.insert(pd.DataFrame({"tid": np.arange(0, 60, 7), "is_fraud": 1,
                               "ts": T0 + pd.to_timedelta(np.arange(0, 60, 7), unit="h")}))
    fv = fs.create_feature_view("f", query=tx.select_all().join(fraud.select(["is_fraud"])),
                                labels=["is_fraud"], label_fill_values={"is_fraud": 0})
    versions = [_create(fv, stream, False, "stratified", test_size=0.25)
                for stream in (None, StreamOptions(batch_rows=9))]
    tds = [fv.get_training_dataset(v) for v in versions]
    assert tds[0].columns == tds[1].columns
    for name in ("train", "test"):
        assert tds[0].splits[name]["sha256"] == tds[1].splits[name]["sha256"]
        assert tds[1].splits[name]["label_distribution"]["is_fraud"].keys() == {"0", "1"}


def test_one_statement_hands_duckdb_back_before_the_split_is_assigned(fv, monkeypatch):
    """The single statement's connection is closed once its result is spooled: DuckDB's buffers
    (up to its memory limit: the ASOF join's and the ORDER BY's) are not held while the split
    is assigned and dealt (at 2M rows they held ~240 MiB resident through both passes)."""
    import duckdb

    from feature_store.local.training_data import training_data_stream as ts
    from feature_store.local.training_data.store import TrainingDataStore

    opened: list[duckdb.DuckDBPyConnection] = []
    connect, make = ts.connect, TrainingDataStore._streamed_assigner
    open_while_assigning: list[bool] = []

    def recorded(*args, **kwargs):
        opened.append(connect(*args, **kwargs))
        return opened[-1]

    def _is_open(con) -> bool:
        try:
            con.execute("SELECT 1")
        except duckdb.ConnectionException:
            return False
        return True

    def checked(self, *args, **kwargs):
        assign = make(self, *args, **kwargs)

        def run(read, rows, alloc):
            open_while_assigning.extend(_is_open(c) for c in opened)
            return assign(read, rows, alloc)

        return run

    monkeypatch.setattr(ts, "connect", recorded)
    monkeypatch.setattr(TrainingDataStore, "_streamed_assigner", checked)
    version = _create(fv, StreamOptions(batch_rows=64, partitions=1), False, "stratified",
                      test_size=0.3)
    assert open_while_assigning == [False]  # the statement's connection, the only one then
    splits = fv.get_training_dataset(version).splits
    assert sum(s["rows"] for s in splits.values()) == N
