"""csv and jsonl versions are created and verified a batch at a time, with the same bytes and
hashes as the whole-table writer wrote them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from feature_store.local.training_data import text_split_writer as tw

from feature_store.local.readers import text_split_reader as tr
from feature_store.local.training_data.training_data_stream import StreamOptions
from fstrain.kernel.errors import IntegrityError
from tests.feature_store.text_groups import quoting_groups

T0 = pd.Timestamp("2024-01-01", tz="UTC")
N = 120


@pytest.fixture
def fv(fs):
    """Text that needs quoting (commas, quotes, newlines, empty vs null), NaN and null floats,
    booleans and timestamps, joined point in time with a second group."""
    tx, agg = quoting_groups(fs, N, 7, ['plain', 'a,b', 'say "hi"', 'two\nlines', '', None, 'ünï'])
    return fs.create_feature_view("texts", query=tx.select_all().join(agg.select(["spend"]), on=["card"]),
                                  labels=["label"])


def _create(fv, data_format, stream, three_way, split, **kwargs):
    spec = None if three_way is None else fv._make_spec(three_way, 4, split, **kwargs)
    version, _ = fv._td.create(spec, seed=4, start_time=None, end_time=None, extra_filter=None,
                               materialize=True, data_format=data_format, description="",
                               statistics_config=None, stream=stream)
    return fv.get_training_dataset(version)


def _whole_table_bytes(table: pa.Table, data_format: str) -> bytes:
    """The bytes the in-memory writer wrote before streaming (kept here as the reference)."""
    if data_format == "csv":
        sink = pa.BufferOutputStream()
        pacsv.write_csv(table, sink)
        return bytes(sink.getvalue())
    return "".join(json.dumps(row, default=tw.json_default, allow_nan=True) + "\n"
                   for row in table.to_pylist()).encode()


CASES = [(None, None, {}), (False, "random", {"test_size": 0.25}),
         (True, "time", {"test_size": 0.2, "validation_size": 0.2})]


@pytest.mark.parametrize("data_format", ["csv", "jsonl"])
@pytest.mark.parametrize(("three_way", "split", "kwargs"), CASES)
def test_streamed_text_version_has_the_in_memory_bytes_and_hashes(fv, data_format, three_way,
                                                                   split, kwargs):
    before = _create(fv, data_format, None, three_way, split, **kwargs)  # the whole-table writer
    after = _create(fv, data_format, StreamOptions(batch_rows=7), three_way, split, **kwargs)
    parquet = _create(fv, "parquet", None, three_way, split, **kwargs)
    assert list(after.splits) == list(before.splits) and after.columns == before.columns
    for name in before.splits:
        old = (Path(before.location) / f"{name}.{data_format}").read_bytes()
        new = (Path(after.location) / f"{name}.{data_format}").read_bytes()
        assert new == old
        assert after.splits[name]["file_sha256"] == before.splits[name]["file_sha256"]
        assert after.splits[name]["sha256"] == before.splits[name]["sha256"]
        assert after.splits[name]["rows"] == before.splits[name]["rows"] > 0
        assert after.splits[name]["label_distribution"] == before.splits[name]["label_distribution"]
        # and what the writer before this change produced from the same rows
        rows = fv._td.read_splits(parquet.version)[1][name]
        assert new == _whole_table_bytes(rows, data_format)
    assert sorted(p.name for p in Path(after.location).iterdir()) == sorted(
        f"{n}.{data_format}" for n in after.splits)  # no Parquet or scratch left behind
    fv.verify_training_dataset(after.version)
    for x, y in zip(fv._td.read_splits(after.version)[1].values(),
                    fv._td.read_splits(before.version)[1].values(), strict=True):
        assert x.equals(y)


def test_csv_batches_keep_the_header_once_and_quote_by_type():
    table = pa.table({"s": ["a", "", None, 'q"x'], "i": [1, None, 3, 4]})
    pieces = [tw.encode(b, "csv", header=i == 0) for i, b in enumerate(table.to_batches(max_chunksize=1))]
    assert b"".join(pieces) == _whole_table_bytes(table, "csv")
    assert b"".join(pieces).count(b'"s"') == 1


@pytest.mark.parametrize("data_format", ["csv", "jsonl"])
def test_block_by_block_hash_equals_the_whole_file_parse(fv, data_format, monkeypatch):
    td = _create(fv, data_format, StreamOptions(batch_rows=9), False, "random", test_size=0.25)
    from feature_store.local.readers.split_files import arrow_schema

    path = Path(td.location) / f"train.{data_format}"
    schema = arrow_schema(td.columns)
    blocks = list(tr.iter_batches(path, data_format, schema, block_bytes=256))
    assert len(blocks) > 3  # really parsed in pieces
    assert tr.content_hash(path, data_format, schema, "v") == td.splits["train"]["sha256"]
    monkeypatch.setattr(tr, "READ_BLOCK_BYTES", 200)
    fv.verify_training_dataset(td.version)


@pytest.mark.parametrize("data_format", ["csv", "jsonl"])
def test_verify_catches_changed_damaged_and_missing_text_files(fv, data_format):
    td = _create(fv, data_format, StreamOptions(batch_rows=9), False, "random", test_size=0.25)
    path = Path(td.location) / f"test.{data_format}"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))  # a valid file, one row fewer
    with pytest.raises(IntegrityError, match="split 'test'"):
        fv.verify_training_dataset(td.version)
    path.unlink()
    with pytest.raises(IntegrityError, match="missing"):
        fv.verify_training_dataset(td.version)


@pytest.mark.parametrize("data_format", ["csv", "jsonl"])
def test_purged_text_version_recreates_with_the_same_bytes(fv, data_format):
    version, _ = fv.create_train_test_split(test_size=0.25, seed=2, data_format=data_format,
                                            write_options={"batch_rows": 16})
    td = fv.get_training_dataset(version)
    before = {n: (Path(td.location) / f"{n}.{data_format}").read_bytes() for n in td.splits}
    fv.purge_training_data(version)
    fv.recreate_training_dataset(version)
    again = fv.get_training_dataset(version)
    assert {n: (Path(td.location) / f"{n}.{data_format}").read_bytes() for n in td.splits} == before
    assert {n: s["file_sha256"] for n, s in again.splits.items()} == {
        n: s["file_sha256"] for n, s in td.splits.items()}
    fv.verify_training_dataset(version)


@pytest.mark.parametrize("data_format", ["csv", "jsonl"])
def test_text_version_streams_as_record_batches_equal_to_the_in_memory_read(fv, data_format,
                                                                            monkeypatch):
    version, _ = fv.create_train_test_split(test_size=0.25, seed=2, data_format=data_format)
    frames = fv.get_train_test_split(version, primary_key=True, event_time=True)
    monkeypatch.setattr(tr, "READ_BLOCK_BYTES", 512)  # many parse blocks
    parsed = list(tr.iter_batches(Path(fv.get_training_dataset(version).location)
                                  / f"train.{data_format}", data_format,
                                  fv._td.arrow_schema(fv.get_training_dataset(version))))
    assert len(parsed) > 3
    streams = fv.get_train_test_split(version, primary_key=True, event_time=True,
                                      dataframe_type="arrow_batches")
    for frame, stream in zip(frames, streams, strict=True):
        stream.batch_rows = 8
        batches = list(stream)
        assert len(batches) > 2 and all(isinstance(b, pa.RecordBatch) for b in batches)
        pd.testing.assert_frame_equal(stream.read_all().to_pandas(), frame)
    path = Path(fv.get_training_dataset(version).location) / f"test.{data_format}"
    path.write_bytes(path.read_bytes().replace(b"1", b"2", 1))  # a changed byte is refused
    with pytest.raises(IntegrityError, match="'test'"):
        fv.get_train_test_split(version, dataframe_type="arrow_batches")
