"""csv and jsonl versions stream to torch and Ray in row-aligned pieces of their files, with the
rows, values and types of the in-memory read, each file checked against its recorded sha256."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from feature_store.local.readers import text_pieces as tp
from fstrain.kernel.errors import IntegrityError
from tests.feature_store.text_groups import quoting_groups

T0 = pd.Timestamp("2024-01-01", tz="UTC")
N = 120
FORMATS = ["csv", "jsonl"]


@pytest.fixture
def groups(fs):
    """Text that needs quoting (commas, quotes, newlines, empty vs null), NaN and null floats,
    booleans and timestamps, joined point in time with a second group."""
    return quoting_groups(fs, N, 11, ['plain', 'a,b', 'say "hi"', 'two\nlines', '"\n"', '', None,
                                      'ünï'])


@pytest.fixture
def fv(fs, groups):
    tx, agg = groups
    return fs.create_feature_view("texts", query=tx.select_all().join(agg.select(["spend"]),
                                                                       on=["card"]),
                                  labels=["label"])


@pytest.fixture
def numeric_fv(fs, groups):
    """The same rows, only numeric and boolean features (what a torch dataset takes)."""
    tx, agg = groups
    query = tx.select(["tid", "card", "flag", "label"]).join(agg.select(["spend"]), on=["card"])
    return fs.create_feature_view("numbers", query=query, labels=["label"])


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(tp, "PIECE_BYTES", 300)


def _path(fv, version, split, data_format):
    return Path(fv.get_training_dataset(version).location) / f"{split}.{data_format}"


@pytest.mark.parametrize("data_format", FORMATS)
def test_pieces_hold_the_rows_of_the_in_memory_read(fv, data_format, small_pieces, monkeypatch):
    version, _ = fv.create_train_test_split(test_size=0.25, seed=2, data_format=data_format)
    _, tables = fv._td.read_splits(version)
    indexes = fv._td.text_pieces(version)
    assert list(indexes) == ["train", "test"]
    monkeypatch.setattr(tp, "_READ_BYTES", 7)  # bounds found across tiny blocks agree
    for name, index in indexes.items():
        assert index.pieces > 3  # really cut
        pieces = [tp.read_piece(index, p) for p in range(index.pieces)]
        assert pa.concat_tables(pieces).equals(tables[name])  # rows, values, types, order
        again, digest = tp.index_file(index.path, data_format, index.schema, owner="other",
                                      split=name)
        assert again.bounds == index.bounds and again.header == index.header
        assert digest == fv.get_training_dataset(version).splits[name]["file_sha256"]
    notes = pa.concat_tables(tables.values())["note"].to_pylist()
    assert "two\nlines" in notes and '"\n"' in notes and None in notes and "" in notes


@pytest.mark.parametrize("data_format", FORMATS)
def test_piece_rows_are_counted_from_the_bytes_as_the_pieces_parse(fv, data_format,
                                                                   small_pieces):
    version, _ = fv.create_train_test_split(test_size=0.25, seed=2, data_format=data_format)
    for index in fv._td.text_pieces(version).values():
        rows = index.piece_rows()
        assert len(rows) == index.pieces > 3
        assert list(rows) == [index.read(p).num_rows for p in range(index.pieces)]
    path = index.path
    path.write_bytes(path.read_bytes())  # rewritten: the index is no longer the file's
    with pytest.raises(IntegrityError, match="no longer matches its recorded sha256"):
        index.piece_rows()


def test_csv_row_ends_skip_newlines_inside_quotes():
    ends = tp._RowEnds(csv=True, piece_bytes=1)
    text = b'"a","b"\n"x\n""\n",1\n"",2\n,3'
    for i in range(len(text)):  # one byte at a time
        ends.feed(text[i:i + 1])
    header_end, bounds = ends.finish()
    assert text[:header_end] == b'"a","b"\n'
    assert [text[a:b] for a, b in itertools.pairwise(bounds)] == [b'"x\n""\n",1\n', b'"",2\n', b",3"]


def _rows(dataset):
    return [(tuple(x.tolist()), float(y)) for x, y in dataset]


@pytest.mark.parametrize("data_format", FORMATS)
def test_torch_text_dataset_equals_the_parquet_one_and_shuffles_by_piece(numeric_fv, data_format,
                                                                         small_pieces):
    from fstrain.trainers.readers.torch_split import TextSplitDataset

    fv = numeric_fv
    text, _ = fv.create_train_test_split(test_size=0.25, seed=3, data_format=data_format)
    parquet, _ = fv.create_train_test_split(test_size=0.25, seed=3)
    X_train, _, y_train, _ = fv.get_train_test_split(text)
    train, test = fv.get_train_test_split(text, dataframe_type="torch")
    assert isinstance(train, TextSplitDataset) and train.source.pieces > 3
    expected = [(tuple(float(np.float32(v)) for v in row), float(y))
                for row, y in zip(X_train.to_numpy(), y_train["label"], strict=True)]
    assert _rows(train) == expected  # file order without a shuffle buffer
    parquet_sets = fv.get_train_test_split(parquet, dataframe_type="torch")
    for mine, theirs in zip((train, test), parquet_sets, strict=True):
        x, y = next(iter(mine))
        assert x.dtype == next(iter(theirs))[0].dtype and y.dtype == next(iter(theirs))[1].dtype
        assert _rows(mine) == _rows(theirs)
    shuffled = train.shuffled(16, 7)
    one, again, other = _rows(shuffled), _rows(train.shuffled(16, 7)), _rows(train.shuffled(16, 8))
    assert one == again and one != other and sorted(one) == sorted(expected)
    shuffled.set_epoch(1)
    assert _rows(shuffled) != one and sorted(_rows(shuffled)) == sorted(one)
    for shards in (3, train.source.pieces + 1):  # then more shards than pieces: sliced
        parts = [_rows(shuffled.shard(r, shards)) for r in range(shards)]
        assert sorted(row for part in parts for row in part) == sorted(one)


@pytest.mark.parametrize("data_format", FORMATS)
def test_changed_text_files_are_refused_before_and_while_streaming(numeric_fv, data_format,
                                                                   small_pieces):
    fv = numeric_fv
    version, _ = fv.create_train_test_split(test_size=0.25, seed=3, data_format=data_format)
    train, test = fv.get_train_test_split(version, dataframe_type="torch")
    path = _path(fv, version, "test", data_format)
    original = path.read_bytes()
    path.write_bytes(original)  # the same bytes, written again after it was verified
    with pytest.raises(IntegrityError, match="split 'test' no longer matches"):
        list(test)
    assert _rows(train)  # the other split is untouched
    path.write_bytes(original.replace(b"1", b"2", 1))  # a changed byte
    for dataframe_type in ("torch", "ray"):
        with pytest.raises(IntegrityError, match="split 'test' no longer matches"):
            fv.get_train_test_split(version, dataframe_type=dataframe_type)
    os.remove(path)
    with pytest.raises(IntegrityError, match="missing"):
        fv.get_train_test_split(version, dataframe_type="torch")


@pytest.mark.slow
def test_ray_datasets_of_text_versions_equal_the_in_memory_read(fv, small_pieces, local_ray):
    ray = local_ray
    for data_format in FORMATS:
        version, _ = fv.create_train_test_split(test_size=0.25, seed=2,
                                                data_format=data_format)
        flags = {"primary_key": True, "event_time": True}
        frames = fv.get_train_test_split(version, **flags)
        datasets = fv.get_train_test_split(version, dataframe_type="ray", **flags)
        for frame, ds in zip(frames, datasets, strict=True):
            got = pa.concat_tables(ray.get(ds.to_arrow_refs()))
            pd.testing.assert_frame_equal(got.to_pandas(), frame)  # order, values, dtypes
        assert datasets[0].materialize().num_blocks() > 3  # a block per piece
        shards = datasets[0].split(2, equal=False)
        ids = sorted(t for s in shards for t in s.to_pandas()["tid"])
        assert ids == sorted(frames[0]["tid"]) and all(s.count() for s in shards)
        path = _path(fv, version, "train", data_format)
        path.write_bytes(path.read_bytes())  # written again after it was verified
        with pytest.raises(IntegrityError, match="split 'train' no longer matches"):
            datasets[0].materialize()


ROWS, FEATURES = 250_000, 16
CAP_MIB = 32  # torch grows the data segment by ~7 MiB; the train text alone is ~60 MiB


def _capped(root: Path, version: int, mode: str) -> subprocess.CompletedProcess:
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": str(here.parents[1]),
           # Arrow allocates through malloc (counted by RLIMIT_DATA); a fixed mmap threshold
           # returns freed buffers instead of growing the heap
           "ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2",
           "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(here / "text_stream_cap_worker.py"), str(root),
                           str(version), mode, str(CAP_MIB)], env=env, capture_output=True,
                          text=True, timeout=600, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("data_format", FORMATS)
def test_text_versions_stream_to_torch_under_a_cap_the_in_memory_read_exceeds(tmp_path,
                                                                             data_format):
    import feature_store

    root = tmp_path / "store"
    fs = feature_store.login(root=root).get_feature_store()
    rng = np.random.default_rng(0)
    versions = {}
    for name, n in (("big", ROWS), ("tiny", 300)):
        frame = pd.DataFrame({"rid": np.arange(n),
                              **{f"f{i}": rng.normal(size=n) for i in range(FEATURES)}})
        frame["label"] = (frame["f0"] > 0).astype(np.int64)
        fg = fs.get_or_create_feature_group(name, version=1, primary_key=["rid"])
        fg.insert(frame)
        fv = fs.create_feature_view(name, query=fg.select_all(), labels=["label"])
        versions[name], _ = fv.create_train_test_split(test_size=0.25, seed=1,
                                                       data_format=data_format)
    fv = fs.get_feature_view("big", 1)
    size = _path(fv, versions["big"], "train", data_format).stat().st_size
    assert size > CAP_MIB * 2**20  # the train split's text alone is larger than the cap
    read = _capped(root, versions["big"], "read")
    assert read.returncode == 3, read.stdout + read.stderr[-3000:]
    run = _capped(root, versions["big"], "torch")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    X, _, y, _ = fv.get_train_test_split(versions["big"])
    assert got["rows"] == len(X) and got["y_sum"] == float(y["label"].sum())
    expected = float(X.to_numpy(np.float32).astype(np.float64).sum())
    assert got["x_sum"] == pytest.approx(expected, rel=1e-9)
    assert got["growth_mib"] < CAP_MIB
