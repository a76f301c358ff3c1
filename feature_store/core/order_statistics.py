"""Exact order statistics of a column read a batch at a time, in memory bounded by a batch and a
few histograms: the ``k``-th smallest value for each of a few ``k``, as sorting the whole
column would give (``np.partition(values, k)[k]``), never an approximation.

The selection (:func:`select_key_ranks`) works on integer keys in the values' order, which each
caller maps its values to: event times their int64 ticks (the time split's size-based cuts),
doubles an unsigned 64-bit key (:func:`float_keys`: sign bit flipped for positives, all bits
for negatives; ``-0.0`` as ``0.0``; :func:`select_ranks`, the robust scaler's quartiles). A
pass over the batches counts each open rank's candidates by the next 16 bits of their key's
offset from the smallest; the rank's digit is found from the counts, and the candidates narrow
to those sharing it. Once a rank's candidates are few (``gather_limit``) the next pass gathers
them and selects in memory; once every bit is fixed, the key itself is the answer. At most four
counting passes and one gathering pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["GATHER_LIMIT", "float_keys", "select_key_ranks", "select_ranks"]

#: a rank's candidates are gathered and selected in memory once at most this many remain
GATHER_LIMIT = 1 << 20
_RADIX_BITS = 16
_SIGN = np.uint64(1 << 63)


def float_keys(x: np.ndarray) -> np.ndarray:
    """Unsigned keys of finite doubles ``x`` in the doubles' order (``-0.0`` equal to ``0.0``)."""
    bits = (np.asarray(x, dtype=np.float64) + 0.0).view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def _key_float(key: int) -> float:
    bits = np.uint64(key)
    bits = bits & ~_SIGN if bits & _SIGN else ~bits
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def select_ranks(values: Callable[[], Iterable[np.ndarray]], ranks: Iterable[int], count: int,
                 low: float, high: float, gather_limit: int = GATHER_LIMIT) -> dict[int, float]:
    """The ``k``-th smallest (0-based) of the ``count`` finite doubles that ``values()`` yields
    (the same sequence on every call), for each ``k`` in ``ranks``; ``low`` and ``high`` are
    their smallest and largest."""
    low_key, high_key = (int(k) for k in float_keys(np.array([low, high])))
    if low_key == high_key:  # every value is equal: ``low`` itself (its sign kept)
        return {k: low for k in sorted(set(ranks))}
    keys = select_key_ranks(lambda: (float_keys(x) for x in values()), ranks, count, low_key,
                            high_key, gather_limit)
    return {k: _key_float(key) for k, key in keys.items()}


@dataclass
class _Rank:
    """One order statistic being selected: its candidates are the keys whose offset from the
    smallest, shifted right by ``top``, equals ``prefix``; the answer is the ``rank``-th smallest
    (0-based) of those ``count`` candidates; ``wanted`` is its rank among all keys."""

    wanted: int
    rank: int
    count: int
    prefix: int
    top: int
    found: int | None = None

    def candidates(self, offsets: np.ndarray) -> np.ndarray:
        if self.top >= 64:
            return np.ones(len(offsets), dtype=bool)
        return (offsets >> np.uint64(self.top)) == np.uint64(self.prefix)


def select_key_ranks(keys: Callable[[], Iterable[np.ndarray]], ranks: Iterable[int], count: int,
                     low: int, high: int, gather_limit: int = GATHER_LIMIT) -> dict[int, int]:
    """The ``k``-th smallest (0-based) of the ``count`` integer keys that ``keys()`` yields as
    int64 or uint64 arrays (the same sequence on every call), for each ``k`` in ``ranks``;
    ``low`` and ``high`` are their smallest and largest. Each key is taken as its offset from
    ``low`` (modulo 2**64, exact as ``high - low < 2**64``); the answers are Python ints."""
    modulus = 1 << 64
    base = np.uint64(low % modulus)
    bits = (high - low).bit_length()
    open_ranks = [_Rank(wanted=k, rank=k, count=count, prefix=0, top=bits)
                  for k in sorted(set(ranks))]
    for r in open_ranks:
        if r.top == 0:  # every key is equal
            r.found = low
    while pending := [r for r in open_ranks if r.found is None]:
        hists = {id(r): np.zeros(1 << _RADIX_BITS, dtype=np.int64) for r in pending}
        gathered: dict[int, list[np.ndarray]] = {id(r): [] for r in pending}
        for x in keys():
            offsets = np.asarray(x).view(np.uint64) - base
            for r in pending:
                sel = offsets[r.candidates(offsets)]
                if r.count <= gather_limit:
                    gathered[id(r)].append(sel)
                else:
                    width = min(r.top, _RADIX_BITS)
                    digits = (sel >> np.uint64(r.top - width)) & np.uint64((1 << width) - 1)
                    _count(hists[id(r)], digits.astype(np.intp))
        for r in pending:
            if r.count <= gather_limit:
                found = np.partition(np.concatenate(gathered[id(r)]), r.rank)[r.rank]
                r.found = low + int(found)
                continue
            _narrow(r, hists[id(r)])
            if r.top == 0:
                r.found = low + r.prefix
    return {r.wanted: r.found for r in open_ranks if r.found is not None}


def _count(hist: np.ndarray, digits: np.ndarray) -> None:
    """Add ``digits``' counts to ``hist`` (a small batch without a histogram of its own)."""
    if len(digits) < 4096:
        np.add.at(hist, digits, 1)
    else:
        hist += np.bincount(digits, minlength=len(hist))


def _narrow(r: _Rank, hist: np.ndarray) -> None:
    """Fix ``r``'s next digit from its candidates' counts by digit."""
    width = min(r.top, _RADIX_BITS)
    cum = np.cumsum(hist)
    digit = int(np.searchsorted(cum, r.rank, side="right"))
    r.rank -= int(cum[digit - 1]) if digit else 0
    r.count = int(hist[digit])
    r.prefix = (r.prefix << width) | digit
    r.top -= width
