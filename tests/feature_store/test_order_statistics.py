"""The shared streamed selection (``select_key_ranks``) gives ``np.partition``'s k-th smallest
key exactly, for int64 and float keys, duplicates, all-equal values, the extreme ranks and any
gather limit (1 forces every counting pass; ``n`` gathers at once)."""

from __future__ import annotations

import numpy as np
import pytest

from feature_store.core.order_statistics import float_keys, select_key_ranks, select_ranks


def _batches(keys: np.ndarray, parts: int):
    return lambda: np.array_split(keys, parts)


def _cases(rng: np.random.Generator) -> list[np.ndarray]:
    n = 3000
    return [
        rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, n, dtype=np.int64),
        rng.integers(-5, 5, n).astype(np.int64),  # heavy duplicates
        np.full(n, -7, dtype=np.int64),  # all equal
        np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1, 1] * 7, dtype=np.int64),
        rng.integers(1_600_000_000_000_000_000, 1_700_000_000_000_000_000, n, dtype=np.int64),
    ]


@pytest.mark.parametrize("limit", [1, 16, 1 << 20])
def test_int64_keys_match_np_partition(limit: int) -> None:
    rng = np.random.default_rng(7)
    for keys in _cases(rng):
        n = len(keys)
        ranks = sorted({0, 1, n // 4, n // 2, n - 2, n - 1, int(rng.integers(n))})
        got = select_key_ranks(_batches(keys, 5), ranks, n, int(keys.min()), int(keys.max()),
                               limit)
        assert got == {k: int(np.partition(keys, k)[k]) for k in ranks}


@pytest.mark.parametrize("limit", [1, 16, 1 << 20])
def test_float_keys_match_np_sort(limit: int) -> None:
    rng = np.random.default_rng(8)
    for values in (rng.standard_cauchy(2000), rng.integers(0, 3, 2000).astype(float),
                   np.full(50, 2.5), np.array([-0.0, 0.0, -1e308, 1e308, 5e-324, -3.5] * 5)):
        n = len(values)
        ranks = [0, n // 3, n // 2, n - 1]
        keys = float_keys(values)
        got = select_key_ranks(_batches(keys, 3), ranks, n, int(keys.min()), int(keys.max()),
                               limit)
        assert got == {k: int(np.sort(keys)[k]) for k in ranks}
        floats = select_ranks(_batches(values, 3), ranks, n, float(values.min()),
                              float(values.max()), limit)
        assert floats == {k: float(np.sort(values)[k]) for k in ranks}


def test_every_rank_of_a_small_column_and_one_row_batches() -> None:
    keys = np.array([5, -3, 5, 9, -3, 0, 2**62, -(2**62), 5], dtype=np.int64)
    n = len(keys)
    got = select_key_ranks(lambda: [keys[i:i + 1] for i in range(n)], range(n), n,
                           int(keys.min()), int(keys.max()), 1)
    assert [got[k] for k in range(n)] == sorted(keys.tolist())
