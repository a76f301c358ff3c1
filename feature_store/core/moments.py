"""Count, extremes, mean and squared deviations of a sequence of doubles fed in pieces, equal bit
for bit whatever the pieces' boundaries.

The values are taken in consecutive blocks of :data:`BLOCK` (at most one block is held, copied);
each block's sum and squared deviations are numpy's pairwise ones, and the blocks are combined
in order: their sums added exactly (``math.fsum``), their squared deviations by Chan et al.'s
pairwise update. The result is a function of the values' sequence only, so a column summed whole
and the same column fed a batch at a time give ``==`` figures (the split statistics, the
standard scaler's fit and the label distributions rely on it).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

__all__ = ["BLOCK", "BlockMoments", "Moments", "moments_of"]

#: values per block: moments accumulate over consecutive blocks of this many values whatever the
#: pieces' boundaries
BLOCK = 65_536


class Moments(NamedTuple):
    """What :class:`BlockMoments` found: ``n`` values, their mean (exact sum / n), the sum of
    their squared deviations from the mean, their smallest and largest."""

    n: int
    mean: float
    m2: float
    low: float
    high: float


def _block_moments(x: Any) -> tuple[float, int, float, float, float, float] | None:
    """(sum, count, mean, squared deviations, min, max) of a block of doubles (pairwise sums);
    None where they are not finite."""
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported as None
        total = float(np.sum(x))
        if not math.isfinite(total):
            return None
        n = len(x)
        mean = total / n
        deviations = x - mean
        m2 = float(np.square(deviations, out=deviations).sum())
    if not math.isfinite(m2):
        return None
    return total, n, mean, m2, float(x.min()), float(x.max())


def _combine(a: tuple[int, float, float, float, float],
             b: tuple[int, float, float, float, float]) -> tuple[int, float, float, float, float]:
    """Chan et al.'s combination of two (count, mean, squared deviations, min, max)."""
    (na, mean_a, m2_a, low_a, high_a), (nb, mean_b, m2_b, low_b, high_b) = a, b
    both = na + nb
    delta = mean_b - mean_a
    return (both, mean_a + delta * nb / both, m2_a + m2_b + delta * delta * na * nb / both,
            min(low_a, low_b), max(high_a, high_b))


class BlockMoments:
    """The moments of every double fed to :meth:`feed` (see the module docstring), in blocks of
    ``block`` values.

    ``finite`` turns False (and stays so) once a block holds NaN or ±inf or its sums overflow;
    :meth:`result` is then None.
    """

    def __init__(self, block: int = BLOCK) -> None:
        self.block = block
        self.n, self.low, self.high, self.mean, self.m2 = 0, math.inf, -math.inf, 0.0, 0.0
        self.sums: list[float] = []
        self.finite = True
        self.held: Any = None  # the next block's first values (a numpy buffer of ``block``)
        self.filled = 0

    def feed(self, x: np.ndarray) -> None:
        """Feed the next values (a 1-d float64 array; not kept)."""
        if not self.finite or not len(x):
            return
        block = self.block
        start = 0
        if self.filled:  # complete the held block first
            start = min(block - self.filled, len(x))
            self.held[self.filled:self.filled + start] = x[:start]
            self.filled += start
            if self.filled < block:
                return
            self.filled = 0
            self._add(self.held)
        whole = start + (len(x) - start) // block * block
        for first in range(start, whole, block):
            if self.finite:
                self._add(x[first:first + block])
        if whole < len(x) and self.finite:
            if self.held is None:
                self.held = np.empty(block)
            self.filled = len(x) - whole
            self.held[:self.filled] = x[whole:]

    def _add(self, x: Any) -> None:
        """Combine one block's moments (in block order)."""
        block = _block_moments(x)
        if block is None:
            self.finite, self.held, self.filled = False, None, 0
            return
        self.n, self.mean, self.m2, self.low, self.high = _combine(
            (self.n, self.mean, self.m2, self.low, self.high), block[1:])
        self.sums.append(block[0])

    def result(self) -> Moments | None:
        """The moments of every value fed (the held partial block included, this object
        unchanged; mean 0.0 and extremes ±inf when none was); None where a value is NaN or
        ±inf or the sums overflow."""
        if not self.finite:
            return None
        n, mean, m2, low, high = self.n, self.mean, self.m2, self.low, self.high
        sums = self.sums
        if self.filled:
            block = _block_moments(self.held[:self.filled])
            if block is None:
                return None
            n, mean, m2, low, high = _combine((n, mean, m2, low, high), block[1:])
            sums = [*sums, block[0]]
        if not n:
            return Moments(0, 0.0, 0.0, low, high)
        try:
            exact = math.fsum(sums) / n
        except OverflowError:  # the exact sum overflows a double
            return None
        return Moments(n, exact, m2, low, high)


def moments_of(x: np.ndarray) -> Moments | None:
    """:class:`BlockMoments` of one array (the whole-column form of the same computation)."""
    acc = BlockMoments()
    acc.feed(x)
    return acc.result()
