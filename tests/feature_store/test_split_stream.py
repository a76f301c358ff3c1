"""Streamed reads of a materialized version equal the in-memory read, row for row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from feature_store.transformations import standard_scaler
from fstrain.kernel.errors import IntegrityError, InvalidArgumentError, NotFoundError

T0 = pd.Timestamp("2024-01-01", tz="UTC")
N = 240


@pytest.fixture
def fv(fs):
    rng = np.random.default_rng(5)
    tx = fs.get_or_create_feature_group("tx", version=1, primary_key=["tid"], event_time="ts")
    tx.insert(pd.DataFrame({"tid": np.arange(N), "card": rng.integers(0, 20, N),
                            "ts": T0 + pd.to_timedelta(np.arange(N), unit="h"),
                            "amount": rng.gamma(2, 10, N), "label": rng.integers(0, 2, N)}))
    agg = fs.get_or_create_feature_group("agg", version=1, primary_key=["card"], event_time="ts")
    agg.insert(pd.DataFrame({"card": np.arange(20), "ts": T0, "spend": rng.normal(size=20)}))
    return fs.create_feature_view("fraud", query=tx.select_all().join(agg.select(["spend"]), on=["card"]),
                                  labels=["label"], transformation_functions=[standard_scaler("amount")])


@pytest.fixture
def version(fv):
    v, _ = fv.create_train_test_split(test_size=0.25, seed=3, write_options={"batch_rows": 20})
    return v


def test_record_batches_equal_the_in_memory_read(fv, version):
    frames = fv.get_train_test_split(version, primary_key=True)
    streams = fv.get_train_test_split(version, primary_key=True, dataframe_type="arrow_batches")
    for frame, stream in zip(frames, streams, strict=True):
        stream.batch_rows = 16
        batches = list(stream)
        assert len(batches) > 1 and all(isinstance(b, pa.RecordBatch) for b in batches)
        pd.testing.assert_frame_equal(stream.read_all().to_pandas(), frame)
        pd.testing.assert_frame_equal(pa.Table.from_batches(list(stream)).to_pandas(), frame)


def test_polars_equals_pandas(fv, version):
    import polars as pl

    frames = fv.get_train_test_split(version)
    polars = fv.get_train_test_split(version, dataframe_type="polars")
    for frame, pframe in zip(frames, polars, strict=True):
        assert isinstance(pframe, pl.DataFrame)
        pd.testing.assert_frame_equal(pframe.to_pandas(), frame, check_dtype=False)


def _rows(dataset):
    return [(tuple(x.tolist()), float(y)) for x, y in dataset]


def test_torch_dataset_equals_in_memory_and_shards_cover_each_row_once(fv, version):
    X_train, _, y_train, _ = fv.get_train_test_split(version)
    train, test = fv.get_train_test_split(version, dataframe_type="torch")
    expected = [(tuple(np.float32(v) for v in row), float(y))
                for row, y in zip(X_train.to_numpy(), y_train["label"], strict=True)]
    assert _rows(train) == [(tuple(float(v) for v in x), y) for x, y in expected]
    shuffled = train.shuffled(buffer=16, seed=7)
    one, again, other = _rows(shuffled), _rows(train.shuffled(16, 7)), _rows(train.shuffled(16, 8))
    assert one == again and one != other and sorted(one) == sorted(_rows(train))
    shards = [_rows(shuffled.shard(r, 3)) for r in range(3)]
    assert sorted(sum(shards, [])) == sorted(one) and all(shards)


@pytest.mark.slow
def test_torch_dataloader_workers_split_the_rows(fv, version):
    import torch

    X_train, *_ = fv.get_train_test_split(version)
    train, _ = fv.get_train_test_split(version, dataframe_type="torch")
    def rows(rank):  # each rank runs two DataLoader workers: 4 shards in all
        loader = torch.utils.data.DataLoader(train.shuffled(16, 1).shard(rank, 2), batch_size=8,
                                             num_workers=2)
        return [tuple(x.tolist()) for xs, _ in loader for x in xs]

    first, second = rows(0), rows(1)
    assert first and second and len(first) + len(second) == len(X_train)
    assert sorted(first + second) == sorted(tuple(x.tolist()) for x, _ in train)


def test_streamed_reads_check_the_files(fv, version):
    import os

    import pyarrow.parquet as pq

    path = os.path.join(fv.get_training_dataset(version).location, "test.parquet")
    pq.write_table(pq.read_table(path).slice(1), path)
    with pytest.raises(IntegrityError, match="'test'"):
        fv.get_train_test_split(version, dataframe_type="arrow_batches")


def test_streaming_needs_a_materialized_version(fv):
    fv.train_test_split(test_size=0.25, seed=3)  # an in-memory version (csv and jsonl stream:
    version = fv.get_last_accessed_training_dataset()  # test_text_split_stream.py)
    assert fv.streams_split_files(version) is False  # what a caller asks instead of trying
    with pytest.raises(InvalidArgumentError, match="materialized"):
        fv.get_train_test_split(version, dataframe_type="torch")


def test_the_view_says_which_versions_stream(fv, version):
    """``streams_split_files`` (the protocol's question, which the Hopsworks view answers
    False) is true for a materialized version, false once its files are purged."""
    assert fv.streams_split_files(version) is True
    fv.purge_training_data(version)
    assert fv.streams_split_files(version) is False
    with pytest.raises(NotFoundError, match="purged"):
        fv.get_train_test_split(version, dataframe_type="arrow_batches")
    with pytest.raises(NotFoundError, match="version 99"):
        fv.streams_split_files(99)


@pytest.mark.slow
def test_ray_datasets_equal_the_in_memory_read(fv, version, local_ray):
    frames = fv.get_train_test_split(version, primary_key=True)
    datasets = fv.get_train_test_split(version, primary_key=True, dataframe_type="ray")
    for frame, ds in zip(frames[:2], datasets[:2], strict=True):  # X: sort by the key
        got = ds.to_pandas().sort_values("tid").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, frame.sort_values("tid").reset_index(drop=True),
                                      check_dtype=False)  # Ray: Arrow-backed dtypes
    for frame, ds in zip(frames[2:], datasets[2:], strict=True):  # y: same multiset
        assert sorted(ds.to_pandas()["label"]) == sorted(frame["label"])
    shards = datasets[0].repartition(4).split(2, equal=False)
    ids = sorted(sum((list(s.to_pandas()["tid"]) for s in shards), []))
    assert ids == sorted(frames[0]["tid"]) and all(s.count() for s in shards)
