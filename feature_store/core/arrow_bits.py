"""numpy views of an Arrow array's buffers, for the streamed writes' hot loops (the merge's
gather, the streaming statistics, the content hash): a fixed-width array's values without a
copy, and its validity as one bool per value, unpacked from only the bytes of its bitmap that
cover the array (a slice of a large batch unpacks its own bits, not the batch's)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

#: numpy types holding the values of fixed-width Arrow arrays, by bit width
LANES = {8: "u1", 16: "<u2", 32: "<u4", 64: "<u8"}


def lanes(kind: pa.DataType) -> str | None:
    """The numpy type holding an Arrow type's values as raw bits (None: not fixed-width bytes,
    such as booleans, decimals, strings, nested and dictionary types)."""
    return LANES.get(kind.bit_width) if pa.types.is_primitive(kind) else None


def raw_values(array: pa.Array, dtype: str) -> np.ndarray:
    """A fixed-width array's values buffer as ``dtype`` (bytes under nulls are whatever the
    buffer holds), without a copy."""
    if not len(array):
        return np.zeros(0, dtype)
    width = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype, len(array), array.offset * width)


def validity(array: pa.Array) -> np.ndarray:
    """Whether each value is valid, as a bool array (all True without a bitmap or nulls)."""
    if pa.types.is_null(array.type):
        return np.zeros(len(array), bool)
    bitmap = array.buffers()[0] if len(array) else None
    if bitmap is None or not array.null_count:
        return np.ones(len(array), bool)
    first, count = array.offset, len(array)
    data = np.frombuffer(bitmap, "u1")[first // 8:(first + count + 7) // 8]
    bits = np.unpackbits(data, bitorder="little")
    return bits[first % 8:first % 8 + count].view(bool)
