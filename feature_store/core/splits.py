"""Split strategies for training datasets (``create_train_test_split`` and friends).

A :class:`SplitSpec` is built and validated by :func:`make_split_spec`, stored with the training
dataset version (:meth:`SplitSpec.to_dict`) and applied by :func:`assign_splits`, which returns the
split name of every row. Split names are ``train``, ``validation`` and ``test`` (Hopsworks).

This module is the one place to import splits from; the work is done in three modules below it:
:mod:`.split_spec` (the value and its validation), :mod:`.split_assignment` (in memory, and
k-fold) and :mod:`.split_streams` (the same codes in bounded memory, batch by batch).

Strategies:

* ``random`` — rows are shuffled with ``numpy.random.default_rng(seed)``; ``int(n*test_size)``
  rows go to test, ``int(n*validation_size)`` to validation, the remainder to train.
* ``stratified`` — the same per class of the label (or ``stratify_column``): each class is split
  in the same proportions, with per-class counts rounded by largest remainder so the totals are
  ``int(n*size)``. Every class gets at least one row in every split, so a class with fewer rows
  than splits is refused (and the totals may then exceed ``int(n*size)`` by a few rows).
* ``group`` — the unique values of ``group_column`` are shuffled by seed and whole groups fill
  test, then validation, until each reaches ``int(n*size)`` rows (it may overshoot by less than
  one group); the remaining groups go to train. No group is in two splits.
* ``time`` — half-open windows ``[start, end)`` on the event time (UTC; naive = UTC). A ``None``
  start or end is unbounded. With sizes instead of bounds, the cut points are event-time
  quantiles: train is the earliest part, test the latest, and rows that share the cut timestamp
  all go to the later split. Rows with a null event time or outside every window get ``None``.

**Relative windows** (time strategy). Instead of dates, ``test_window`` (and ``validation_window``,
optionally ``train_window``) give durations counted back from an *anchor*: the data's last event
time (``anchor=None``) or a timestamp (e.g. the scheduler's ``HOPS_END_TIME``; rows at or after it
are left out). The test split is the last ``test_window`` before the anchor, validation the
``validation_window`` before it, with ``gap`` between splits; train is everything earlier (or the
``train_window`` before validation). :func:`resolve_time_bounds` turns them into explicit bounds
at materialization, and the stored spec keeps both, so a daily schedule keeps working as new data
arrives while every version records the exact dates it used.

**Gap.** With ``gap`` (time strategy only), rows whose event time is in
``[train_end, train_end + gap)`` — and for three-way splits also in
``[validation_end, validation_end + gap)`` — are dropped (split ``None``), so rolling aggregates
computed up to the cut cannot leak into the next split.

Time bounds take priority over sizes, as in Hopsworks: sizes passed together with bounds are
ignored (and dropped from the spec). The result depends only on the row order, the values and the
seed; the caller sorts the frame deterministically first.
"""

from __future__ import annotations

from feature_store.core.split_assignment import (
    NO_SPLIT,
    assign_split_codes,
    assign_splits,
    kfold_indices,
    resolve_time_bounds,
)
from feature_store.core.split_spec import (
    SPLIT_NAMES,
    STRATEGIES,
    SplitSpec,
    make_split_spec,
    relative_bounds,
)
from feature_store.core.split_streams import time_split_codes_streamed

__all__ = [
    "NO_SPLIT",
    "SPLIT_NAMES",
    "STRATEGIES",
    "SplitSpec",
    "assign_split_codes",
    "assign_splits",
    "kfold_indices",
    "make_split_spec",
    "relative_bounds",
    "resolve_time_bounds",
    "time_split_codes_streamed",
]
