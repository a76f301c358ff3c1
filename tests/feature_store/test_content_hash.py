"""The content hash recorded per training-data split: what it sees and what it ignores."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from feature_store.core.content_hash import ALGORITHM, _column_digest, table_sha256


def _table(n: int = 1000, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "x": pa.array(rng.normal(size=n)),
        "flag": pa.array(rng.integers(0, 2, n).astype(bool)),
        "city": pa.array(rng.choice(["paris", "oslo", "", "são paulo"], n)),
        "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i)
                        for i in range(n)], type=pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 30) for i in range(n)]),
        "maybe": pa.array([None if i % 7 == 0 else float(i) for i in range(n)]),
    })


def _rechunk(table: pa.Table, sizes: list[int]) -> pa.Table:
    batches, start = [], 0
    for size in sizes:
        batches.append(table.slice(start, size))
        start += size
    batches.append(table.slice(start))
    return pa.concat_tables(batches)


def test_same_content_same_hash_whatever_the_chunking():
    table = _table()
    digest = table_sha256(table)
    assert len(digest) == 64
    assert table_sha256(_rechunk(table, [1, 333, 100])) == digest
    assert table_sha256(table.combine_chunks()) == digest
    assert table_sha256(_rechunk(table, [999])) == digest


def test_large_tables_hash_in_parallel_with_the_same_result():
    table = _table(250_000, seed=3)
    assert table_sha256(table) == table_sha256(_rechunk(table, [100_001, 7]))


@pytest.mark.parametrize("column", ["id", "x", "flag", "city", "ts", "day", "maybe"])
def test_one_changed_value_changes_the_hash(column):
    table = _table()
    values = table.column(column).to_pylist()
    values[500] = values[501] if values[500] != values[501] else values[499]
    changed = table.set_column(table.column_names.index(column), column,
                               pa.array(values, type=table.schema.field(column).type))
    assert table_sha256(changed) != table_sha256(table)


def test_row_order_column_names_and_types_count():
    table = _table()
    digest = table_sha256(table)
    assert table_sha256(table.take(np.arange(table.num_rows)[::-1])) != digest
    assert table_sha256(table.rename_columns([*table.column_names[:-1], "other"])) != digest
    assert table_sha256(table.set_column(0, "id", table.column("id").cast(pa.int32()))) != digest


def test_null_differs_from_zero_and_empty_string():
    nulls = pa.table({"v": pa.array([1.0, None]), "s": pa.array(["a", None])})
    zeros = pa.table({"v": pa.array([1.0, 0.0]), "s": pa.array(["a", None])})
    empty = pa.table({"v": pa.array([1.0, None]), "s": pa.array(["a", ""])})
    assert len({table_sha256(nulls), table_sha256(zeros), table_sha256(empty)}) == 3


def test_string_boundaries_count():
    # the same bytes split differently across values are different data
    assert table_sha256(pa.table({"s": ["ab", "c"]})) != table_sha256(pa.table({"s": ["a", "bc"]}))


def test_dictionary_encoded_column_hashes_like_its_values():
    plain = pa.table({"s": pa.array(["a", "b", None, "a"])})
    encoded = pa.table({"s": plain.column("s").dictionary_encode()})
    # the table digest also covers the type name, so compare the column digests
    assert _column_digest(encoded.column("s")) == _column_digest(plain.column("s"))
    assert table_sha256(encoded) != table_sha256(plain)


def test_empty_table_and_algorithm_name():
    empty = _table().slice(0, 0)
    assert table_sha256(empty) != table_sha256(_table(1))
    assert ALGORITHM.endswith("-v2")


@pytest.mark.parametrize("values, arrow_type", [
    ([dt.date(2024, 1, 1), None, dt.date(2024, 1, 3)], pa.date32()),
    ([Decimal("1.50"), None, Decimal("-2.25")], pa.decimal128(5, 2)),
    ([dt.time(1, 2), None, dt.time(3, 4)], pa.time64("us")),
    ([5, None, 7], pa.duration("s")),
    ([1, None, 3], pa.timestamp("us", tz="UTC")),
    ([True, None, False], pa.bool_()),
    ([b"ab", None, b""], pa.binary()),
])
def test_nullable_columns_of_every_fixed_width_type_hash_and_see_changes(values, arrow_type):
    column = pa.array(values, type=arrow_type)
    table = pa.table({"c": column})
    digest = table_sha256(table)
    assert table_sha256(_rechunk(table, [1])) == digest
    swapped = pa.table({"c": pa.array([values[2], None, values[0]], type=arrow_type)})
    assert table_sha256(swapped) != digest
    filled = pa.table({"c": pa.array([values[0], values[0], values[2]], type=arrow_type)})
    assert table_sha256(filled) != digest
