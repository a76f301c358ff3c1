"""Counting a training dataset's late-data figures from matched rows, shared by the in-memory
count (:mod:`feature_store.local.query.late_data`) and the partitioned kernel
(:mod:`feature_store.local.query.bucket_join`): numpy arrays in, the figures out, with the
exposure join's arithmetic (:func:`feature_store.local.query.pit.exposure_sql`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

#: a group's late-data figures: rows, matched rows, late rows, the largest delay in ms (or None)
Figures = tuple[int, int, int, int | None]


def late_figures(labels_us: np.ndarray, known_us: np.ndarray, present: np.ndarray,
                 matched: int) -> Figures:
    """``(rows, matched, late, max delay ms)`` from each row's label time and its match's
    known time (epoch µs; ``present``: a match with a known time). Late: known strictly after
    the label time; the delay is ``epoch_ms(known) - epoch_ms(label)`` as DuckDB computes it
    (:func:`epoch_ms`)."""
    late = present & (known_us > labels_us)
    count = int(late.sum())
    if not count:
        return len(labels_us), matched, 0, None
    delay = epoch_ms(known_us[late]) - epoch_ms(labels_us[late])
    return len(labels_us), matched, count, int(delay.max())


def add_figures(parts: list[Figures]) -> Figures:
    """The figures of a whole result from its parts' (buckets')."""
    delays = [p[3] for p in parts if p[3] is not None]
    return (sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts),
            max(delays) if delays else None)


def epoch_ms(us: np.ndarray) -> np.ndarray:
    """Epoch microseconds to milliseconds as DuckDB's ``epoch_ms`` gives them: rounded, halves
    away from zero."""
    import numpy as np

    return np.sign(us) * ((np.abs(us) + 500) // 1000)
