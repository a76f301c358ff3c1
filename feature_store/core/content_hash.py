"""Content hashes of training-data splits: the sha256 a training-dataset version records.

``table_sha256`` hashes an Arrow table's column names, types, row count and every value in row
order. Each column is hashed on its own (in parallel: ``hashlib`` releases the GIL on large
buffers) into three streams — the null mask, the value bytes, and for variable-width columns the
value lengths — and the table digest is the sha256 over the schema and the column digests.

The result depends only on the logical content: not on how the table is chunked, not on the file
format it was read back from (as long as the types agree), and not on ``PYTHONHASHSEED``. Fixed-
width values are hashed as their little-endian bytes, so ``-0.0`` and ``0.0`` differ, as do NaN
payloads; null slots hash as zeros plus a set bit in the null mask.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from feature_store.core import arrow_bits

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Recorded with every training-dataset version so a later change of algorithm is detectable.
ALGORITHM = "fstrain-columnar-sha256-v2"

_PARALLEL_MIN_ROWS = 100_000


def table_sha256(table: pa.Table) -> str:
    """sha256 of an Arrow table's schema and values, independent of chunking and storage."""
    digest = hashlib.sha256()
    digest.update(ALGORITHM.encode())
    digest.update(json.dumps([[f.name, str(f.type)] for f in table.schema]).encode())
    digest.update(str(table.num_rows).encode())
    columns = table.columns
    if table.num_rows >= _PARALLEL_MIN_ROWS and len(columns) > 1:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="fstrain-hash") as pool:
            column_digests = list(pool.map(_column_digest, columns))
    else:
        column_digests = [_column_digest(c) for c in columns]
    for column_digest in column_digests:
        digest.update(column_digest)
    return digest.hexdigest()


class StreamingTableHash:
    """:func:`table_sha256` fed batch by batch: equal to it over the concatenated batches.

    Each column keeps its three running streams (null mask, values, lengths), so a table far
    larger than memory is hashed with one batch in memory at a time.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows = 0
        self._streams = [(hashlib.sha256(), hashlib.sha256(), hashlib.sha256()) for _ in schema]

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Feed the next rows (their schema must be this hash's schema)."""
        if not batch.schema.equals(self.schema):
            raise ValueError(f"batch schema {batch.schema} differs from {self.schema}")
        for column, streams in zip(batch.columns, self._streams, strict=True):
            chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
            for chunk in chunks:
                _update_chunk(chunk, *streams)
        self.rows += batch.num_rows

    def hexdigest(self) -> str:
        """The digest :func:`table_sha256` gives for all rows fed so far."""
        digest = hashlib.sha256()
        digest.update(ALGORITHM.encode())
        digest.update(json.dumps([[f.name, str(f.type)] for f in self.schema]).encode())
        digest.update(str(self.rows).encode())
        for nulls, values, lengths in self._streams:
            digest.update(nulls.digest() + values.digest() + lengths.digest())
        return digest.hexdigest()


def _column_digest(column: pa.ChunkedArray) -> bytes:
    nulls, values, lengths = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
    for chunk in column.chunks:
        _update_chunk(chunk, nulls, values, lengths)
    return nulls.digest() + values.digest() + lengths.digest()


def _update_chunk(chunk: pa.Array, nulls: _Digest, values: _Digest,
                  lengths: _Digest) -> None:
    if isinstance(chunk.type, pa.DictionaryType):
        chunk = chunk.dictionary_decode()
    mask = ~arrow_bits.validity(chunk) if chunk.null_count else None
    nulls.update(mask.view("u1") if mask is not None else bytes(len(chunk)))
    _update_values(chunk, mask, values, lengths)


def _fixed_width(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t)
        or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t)
        or pa.types.is_decimal(t)
    )


def _nonzero_under(raw: np.ndarray, width: int, mask: np.ndarray) -> bool:
    """Whether any null slot of a fixed-width buffer holds non-zero bytes (usually none do, and
    checking them is much cheaper than copying the buffer to zero them)."""
    lanes = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}.get(width)
    if lanes is None:
        return bool(raw.reshape(len(mask), width)[mask].any())
    return bool(raw.view(lanes)[mask].any())


class _Digest(Protocol):
    """What the helpers need of a ``hashlib`` hash object (its type is private to hashlib)."""

    def update(self, data: Any, /) -> None: ...


def _update_values(
    chunk: pa.Array, mask: np.ndarray | None, values: _Digest, lengths: _Digest
) -> None:
    """Feed one chunk's values; ``mask`` marks null slots, whose undefined bytes hash as zeros."""
    t = chunk.type
    if pa.types.is_boolean(t):
        values.update(pc.fill_null(chunk.cast(pa.uint8()), 0).to_numpy(zero_copy_only=False))
    elif _fixed_width(t):
        width = t.bit_width // 8
        raw = np.frombuffer(chunk.buffers()[1], dtype="u1")[
            chunk.offset * width:(chunk.offset + len(chunk)) * width
        ]
        if mask is not None and _nonzero_under(raw, width, mask):
            raw = raw.reshape(len(chunk), width).copy()  # hash null slots as zeros
            raw[mask] = 0
        values.update(raw)
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t):
        if mask is not None:
            chunk = pc.fill_null(chunk, pa.scalar("" if pa.types.is_string(t)
                                                  or pa.types.is_large_string(t) else b"", t))
        sizes = pc.binary_length(chunk).cast(pa.int64()).to_numpy(zero_copy_only=False)
        lengths.update(sizes)
        index = "<i8" if pa.types.is_large_string(t) or pa.types.is_large_binary(t) else "<i4"
        bounds = np.frombuffer(chunk.buffers()[1], dtype=index)[
            chunk.offset:chunk.offset + len(chunk) + 1
        ]
        data = chunk.buffers()[2]
        if data is not None and len(bounds):
            values.update(memoryview(data)[int(bounds[0]):int(bounds[-1])])
    else:  # nested and other types: their canonical Python values, in order
        lengths.update(json.dumps(chunk.to_pylist(), default=str, sort_keys=True).encode())


def frame_sha256(frame: pd.DataFrame) -> str:
    """Content hash of a pandas frame: column names, dtypes and every value, independent of the
    index and of ``PYTHONHASHSEED``."""
    import pandas as pd

    digest = hashlib.sha256()
    digest.update(json.dumps([[str(c), str(t)] for c, t in frame.dtypes.items()]).encode())
    if len(frame):
        values = pd.util.hash_pandas_object(frame, index=False).to_numpy()
        digest.update(values.tobytes())
    return digest.hexdigest()
