"""Point-in-time joins of one hash bucket in numpy and pyarrow, for partitioned creation.

:class:`~feature_store.local.query.partitioned_join.PartitionedQuery` runs a query bucket by bucket.
When :func:`plan` covers the query's shape, each bucket is joined here instead of by the
compiled DuckDB statement, with the statement's semantics (:mod:`feature_store.local.query.pit`) and
its exact rows, values and order, at a fraction of the CPU:

1. the root rows are put in the statement's order first (the root group's upsert key,
   ascending, nulls last), so every output column is gathered once, already in order;
2. the join keys become dense integer codes: the root's values, hashed, and each right row's
   key looked up among them (a right row whose key no root row has cannot match: dropped);
   a null key or event time never matches;
3. each side's (code, event time) is packed into one int64 that sorts like the pair (times
   as offsets from the earliest, or as ranks if those are too wide; as many codes per pass as
   fit beside them); the root side is sorted once for all joins; a root row's match is the
   last right row at or below its packed value (``searchsorted``) with the same code: the
   latest right row with ``right.event_time <= root.event_time`` on the keys;
4. of several right rows with the same keys and event time, the one with the smallest
   tie-break values (the rest of the right group's upsert key; nulls last) is kept first;
5. a match older than ``lookback`` counts as none; a left join leaves the group's columns
   null where there is none, an inner join drops the row.

Event times of different types are compared as the statement compares them (both as UTC
timestamps: epoch milliseconds x 1000, dates at midnight), lookback in milliseconds when both
are epoch milliseconds of the same type, else in microseconds.

Coverage is decided by :func:`plan` and nowhere else: every join a point-in-time join of the
root on the partition keys, no filter naming a joined group (root-only filters and the window
are applied while the root is partitioned), keys and the root's upsert key of integer, string,
bool, date or timestamp type, event times that are timestamps, dates or epoch milliseconds.
Any other shape runs the statement on each bucket.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.local.query.late_counts import Figures, late_figures
from feature_store.local.query.query_plan import event_time_of, lookback_in_unit

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pyarrow as pa

    from feature_store.local.query.pit import CompiledQuery
    from feature_store.local.query.query_plan import JoinPlan

#: event-time units by the stored type: epoch milliseconds, microseconds, days
_UNITS = {"int64": "ms", "bigint": "ms", "timestamp[us, tz=UTC]": "us", "timestamp[us]": "us",
          "date32[day]": "day"}
_TO_MICROS = {"ms": 1_000, "us": 1, "day": 86_400_000_000}
#: key and order column types whose equality and order numpy/pyarrow share with DuckDB
_KEY_TYPES = ("int64", "int32", "string", "large_string", "bool", "date32[day]",
              "timestamp[us, tz=UTC]", "timestamp[us]")
#: bits of a packed (code, event time) value (non-negative: an int64 holds 63)
_PACK_BITS = 63
#: event-time offsets wider than this are replaced by their ranks (a pass then covers >= 1024 codes)
_MAX_TIME_BITS = 52
#: multi-column key codes above this are re-densified (a code and a time rank then fit)
_DENSE_LIMIT = 1 << 24
#: a single integer key is coded through a table indexed by value when its values span at
#: most this many times the root's rows plus :data:`_LOOKUP_SLACK` (4 bytes an entry)
_LOOKUP_SPAN = 4
_LOOKUP_SLACK = 1 << 16
#: right rows that cannot match are kept (with a code no root row has) when at least this
#: share of the rows can
_KEEP_UNUSABLE = 0.875
#: types :func:`_ints` reads as int64
_INT_TYPES = ("int64", "int32", "date32[day]", "timestamp[us, tz=UTC]", "timestamp[us]")
#: result files are read back batch by batch: keep batches as small as DuckDB's row groups
RESULT_ROW_GROUP = 122_880
#: a right bucket's column of when each row became known (epoch µs), for the late-data figures
KNOWN_US = "__fstrain_known_us"


@dataclass(frozen=True)
class Step:
    """One point-in-time join of the root group: what to read and how to compare."""

    placeholder: str
    right_keys: tuple[str, ...]  # in the order of the root's partition keys
    right_time: str
    left_scale: int  # root event time -> the comparison's unit
    right_scale: int
    inner: bool
    lookback: int | None  # in the comparison's unit
    tie_break: tuple[str, ...]
    columns: tuple[str, ...]  # right columns the output takes
    #: the bucket's rows carry :data:`KNOWN_US` (when each became known) and the join counts
    #: its late matches (:func:`join_bucket`'s ``counts``)
    known: bool = False

    def reads(self) -> list[str]:
        """The right group's columns this join reads."""
        return list(dict.fromkeys([*self.right_keys, self.right_time, *self.tie_break,
                                   *self.columns, *([KNOWN_US] if self.known else [])]))


@dataclass(frozen=True)
class BucketPlan:
    """A covered query: the root, its joins and the output columns."""

    root: str  # the root's placeholder
    keys: tuple[str, ...]  # the root's join keys
    time: str  # the root's event time
    order: tuple[str, ...]  # the root's upsert key: the statement's ORDER BY
    steps: tuple[Step, ...]
    #: (output name, source step index or -1 for the root, source column), in output order
    output: tuple[tuple[str, int, str], ...]

    def root_reads(self) -> list[str]:
        """The root group's columns the kernel reads."""
        own = [src for _, step, src in self.output if step < 0]
        return list(dict.fromkeys([*self.keys, self.time, *self.order, *own]))


# -- coverage ----------------------------------------------------------------------------------


def plan(compiled: CompiledQuery) -> BucketPlan | None:
    """The kernel's plan for ``compiled``, or None when its shape must run the statement.

    The one place that decides coverage (see the module docstring)."""
    shape, keys = compiled.shape, compiled.partition_keys
    if shape is None or keys is None or shape.post_filter or compiled.versions:
        return None  # as-known joins (row versions) run the statement
    p = shape.plan
    placeholders = {node.alias: ph for ph, node in compiled.scans.items()}
    root_fg = p.root.group
    root_keys = keys[placeholders[p.root.alias]]
    if not root_fg.event_time or not _typed(root_fg, [*root_keys, *root_fg.upsert_key],
                                            _KEY_TYPES):
        return None
    steps = []
    for index, jp in enumerate(p.joins):
        step = _step(jp, placeholders[jp.right.alias], keys[placeholders[jp.right.alias]],
                     [c.source for c in p.columns if c.node is jp.right])
        if step is None:
            return None
        steps.append(step)
    where = {jp.right.alias: i for i, jp in enumerate(p.joins)}
    output = [(c.name, where.get(c.node.alias, -1), c.source) for c in p.columns]
    output += [(name, -1, source) for source, name in shape.extra_columns]
    return BucketPlan(placeholders[p.root.alias], tuple(root_keys), root_fg.event_time,
                      tuple(root_fg.upsert_key), tuple(steps), tuple(output))


def _typed(fg: Any, columns: list[str], allowed: tuple[str, ...]) -> bool:
    return all(str(fg.get_feature(c).type) in allowed for c in columns)


def _step(jp: JoinPlan, placeholder: str, right_keys: tuple[str, ...],
          columns: list[str]) -> Step | None:
    """The join as a :class:`Step`, or None when its types are not covered."""
    lfg, rfg = jp.left.group, jp.right.group
    if not jp.point_in_time or not _typed(rfg, [*right_keys, *jp.tie_break], _KEY_TYPES):
        return None
    ltype = str(lfg.get_feature(event_time_of(lfg)).type)
    rtype = str(rfg.get_feature(event_time_of(rfg)).type)
    if ltype not in _UNITS or rtype not in _UNITS:
        return None
    lunit, runit = _UNITS[ltype], _UNITS[rtype]
    both_ms = lunit == runit == "ms"
    if both_ms and ltype != rtype:
        return None  # the statement compares two converted timestamps with a millisecond count
    if both_ms:
        lscale = rscale = 1
    else:
        lscale, rscale = _TO_MICROS[lunit], _TO_MICROS[runit]
    lookback = None if jp.join.lookback is None else lookback_in_unit(jp)
    return Step(placeholder, right_keys, event_time_of(rfg), lscale, rscale,
                jp.join.join_type == "inner", lookback, tuple(jp.tie_break), tuple(columns))


# -- the kernel --------------------------------------------------------------------------------


def join_bucket(bp: BucketPlan, tables: dict[str, pa.Table], schema: pa.Schema,
                counts: dict[int, Figures] | None = None) -> pa.Table:
    """The statement's result for one bucket: ``tables`` are the bucket's rows of each group
    (by placeholder), ``schema`` the statement's result schema. ``counts`` receives, per
    index of a step with ``known``, the bucket's late-data figures
    (:func:`~feature_store.local.query.late_counts.late_figures`)."""
    import numpy as np
    import pyarrow as pa

    root = tables[bp.root]
    root = root.take(_root_order(root, bp.order))
    codes = _Codes(root, bp.keys)
    left = _LeftSide(root.column(bp.time), codes.left)
    matches = [_match(step, tables[step.placeholder], codes, left) for step in bp.steps]
    if counts is not None:
        counts.update(_late_counts(bp, root, tables, matches))
    keep = np.ones(root.num_rows, dtype=bool)
    for step, match in zip(bp.steps, matches, strict=True):
        if step.inner:
            keep &= match >= 0
    rows = None if keep.all() else pa.array(np.flatnonzero(keep))
    gathers = [_Gather(match if rows is None else match[keep]) for match in matches]
    columns = []
    for _, index, source in bp.output:
        if index < 0:
            column = root.column(source)
            columns.append(column if rows is None else column.take(rows))
        else:
            columns.append(gathers[index].take(tables[bp.steps[index].placeholder].column(source)))
    return pa.table(columns, names=[name for name, _, _ in bp.output]).cast(schema)


def _late_counts(bp: BucketPlan, root: pa.Table, tables: dict[str, pa.Table],
                 matches: list[np.ndarray]) -> dict[int, Figures]:
    """Per step with ``known``: its matches' late-data figures (a match whose row became known
    after the root row's event time is late)."""
    import numpy as np

    column = root.column(bp.time)
    times, _ = _times(column)
    labels = times * _TO_MICROS[_UNITS[str(column.type)]]
    out = {}
    for index, (step, match) in enumerate(zip(bp.steps, matches, strict=True)):
        if not step.known:
            continue
        known = _one_chunk(tables[step.placeholder].column(KNOWN_US))
        hit = match >= 0
        values = _filled(known)[np.where(hit, match, 0)] if len(known) else np.zeros(len(match), np.int64)
        valid = (np.asarray(known.is_valid().to_numpy(zero_copy_only=False))[np.where(hit, match, 0)]
                 if len(known) else np.zeros(len(match), bool))
        out[index] = late_figures(labels, values, hit & valid, int(hit.sum()))
    return out


def _root_order(table: pa.Table, order: tuple[str, ...]) -> np.ndarray | pa.Array:
    """Indices that order ``table`` as the statement's ``ORDER BY`` (ascending, nulls last):
    a stable numpy sort of the first column when it holds integers (or dates, timestamps)
    without nulls and, unless it is the only one, distinct values (a primary key's usually
    are; a merge sort, fast on presorted runs), else pyarrow's stable sort on all columns."""
    import numpy as np
    import pyarrow.compute as pc

    first = _ints(table.column(order[0]))
    if first is not None and first[1] is None:
        values = first[0]
        rows = np.argsort(values, kind="stable")
        ordered = values[rows]
        if len(order) == 1 or not (ordered[1:] == ordered[:-1]).any():
            return rows
    return pc.sort_indices(table, sort_keys=[(c, "ascending", "at_end") for c in order])


def _ints(column: Any) -> tuple[np.ndarray, np.ndarray | None] | None:
    """An integer, date or timestamp column's values as int64 numpy (0 where null) and where
    they are not null (None: nowhere null), or None for any other type."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if str(column.type) not in _INT_TYPES:
        return None
    array = _one_chunk(column)
    ints = array.cast(pa.int32() if pa.types.is_date32(array.type) else pa.int64())
    if not array.null_count:
        return np.asarray(ints.to_numpy(), dtype=np.int64), None
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
    return np.asarray(pc.fill_null(ints, 0).to_numpy(), dtype=np.int64), valid


def _one_chunk(column: Any) -> pa.Array:
    """A column as one array: its only chunk as it is (``combine_chunks`` copies even one)."""
    import pyarrow as pa

    if not isinstance(column, pa.ChunkedArray):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _filled(array: Any) -> np.ndarray:
    """An integer Arrow array as int64 numpy, -1 where null."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    array = _one_chunk(array)
    values = pc.fill_null(array.cast(pa.int64()), -1) if array.null_count else array.cast(pa.int64())
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)


class _Codes:
    """Dense integer codes of the root's key values (-1: a null key), and the same codes for a
    right group's keys (-1: null, or a value no root row has).

    A single integer key whose values span a range not much wider than the root's rows is
    coded through a table indexed by value (:class:`_Lookup`); other keys are hashed
    (dictionary-encoded), column by column."""

    def __init__(self, root: pa.Table, keys: tuple[str, ...]) -> None:
        import pyarrow.compute as pc

        self.steps: list[tuple[pa.Array, int]] = []  # per key column: its dictionary
        self.lookup = _Lookup.of(root.column(keys[0]), root.num_rows) if len(keys) == 1 else None
        if self.lookup is not None:
            self.left = self.lookup.codes(root.column(keys[0]))
            self.count = self.lookup.count
            return
        code = None
        for key in keys:
            encoded = pc.dictionary_encode(_one_chunk(root.column(key)))
            code = self._mix(code, _filled(encoded.indices), encoded.dictionary)
        if code is None:
            raise ValueError("a partitioned query joins on at least one key")
        self.left = code
        self.count = max(1, int(code.max()) + 1) if len(code) else 1

    def _mix(self, code: np.ndarray | None, column: np.ndarray, dictionary: pa.Array
             ) -> np.ndarray:
        """Codes of the keys so far combined with one more column's codes (re-densified past
        :data:`_DENSE_LIMIT`)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        self.steps.append((dictionary, len(dictionary)))
        if code is None:
            return column
        combined = _combined(code, column, len(dictionary))
        if int(combined.max(initial=0)) < _DENSE_LIMIT:
            return combined
        encoded = pc.dictionary_encode(pa.array(combined, mask=combined < 0))
        self.steps.append((encoded.dictionary, -1))  # -1: a re-densifying step
        return _filled(encoded.indices)

    def right(self, table: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
        """The codes of ``table``'s rows (keys in the root's key order)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.lookup is not None:
            return self.lookup.codes(table.column(keys[0]))
        code = np.empty(0, dtype=np.int64)
        columns = iter(keys)
        for index, (dictionary, size) in enumerate(self.steps):
            if size < 0:  # re-densify the combination as the root's was
                found = pc.index_in(pa.array(code, mask=code < 0), value_set=dictionary)
                code = _filled(found)
                continue
            values = _one_chunk(table.column(next(columns)))
            if values.type != dictionary.type:
                values = values.cast(dictionary.type)
            column = _filled(pc.index_in(values, value_set=dictionary))
            code = column if index == 0 else _combined(code, column, size)
        return code


class _Lookup:
    """Codes of a single integer (or date, timestamp) key through a table indexed by the value
    less the root's smallest: a code is the value's rank among the root's distinct values."""

    def __init__(self, low: int, table: np.ndarray, key_type: pa.DataType) -> None:
        self.low, self.table, self.type = low, table, key_type
        self.count = max(1, int(table[-1]) + 1)  # the largest value is the root's

    @classmethod
    def of(cls, column: Any, rows: int) -> _Lookup | None:
        """The lookup for the root's key ``column`` (of ``rows`` rows), or None when it is not
        of an integer type, all null, or its values span more than :data:`_LOOKUP_SPAN`
        times the rows (plus :data:`_LOOKUP_SLACK`): a table that size is not worth it."""
        import numpy as np

        ints = _ints(column)
        if ints is None:
            return None
        values = ints[0] if ints[1] is None else ints[0][ints[1]]
        if not len(values):
            return None
        low, high = int(values.min()), int(values.max())
        if high - low >= _LOOKUP_SPAN * rows + _LOOKUP_SLACK:
            return None
        present = np.zeros(high - low + 1, dtype=bool)
        present[values - low] = True
        table = np.cumsum(present, dtype=np.int32)
        table -= 1
        table[~present] = -1
        return cls(low, table, column.type)

    def codes(self, column: Any) -> np.ndarray:
        """The codes of a key column's rows (cast to the root key's type, as the dictionary
        route casts): -1 where null or a value no root row has."""
        import numpy as np

        ints = _ints(column if column.type == self.type else column.cast(self.type))
        assert ints is not None  # the root key's type is an integer type
        values, inside = ints
        high = self.low + len(self.table) - 1
        if len(values) and (int(values.min()) < self.low or int(values.max()) > high):
            within = (values >= self.low) & (values <= high)
            inside = within if inside is None else inside & within
        if inside is None:
            return self.table[values - self.low if self.low else values].astype(np.int64)
        code = self.table[np.where(inside, values - self.low, 0)].astype(np.int64)
        code[~inside] = -1
        return code


def _combined(code: np.ndarray, column: np.ndarray, size: int) -> np.ndarray:
    """The codes of the key columns so far combined with one more column's codes (``size``
    values): -1 where either is -1."""
    combined = code * size + column
    combined[(code < 0) | (column < 0)] = -1
    return combined


def _times(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """An event-time column as int64 in its stored unit, and where it is not null."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    array = _one_chunk(column)
    if pa.types.is_timestamp(array.type) and array.type.unit != "us":  # pragma: no cover
        raise RuntimeError(f"event time of type {array.type}: microseconds expected")
    ints = array.cast(pa.int32() if pa.types.is_date32(array.type) else pa.int64())
    valid = (np.ones(len(array), dtype=bool) if not array.null_count
             else np.asarray(array.is_valid().to_numpy(zero_copy_only=False)))
    values = pc.fill_null(ints, 0) if array.null_count else ints
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64), valid


class _LeftSide:
    """The root rows that can match (a key and an event time), sorted once by code (and time):
    ``rows`` (their indices), ``codes`` and ``times`` (stored unit), in that order."""

    def __init__(self, time: Any, code: np.ndarray) -> None:
        import numpy as np

        times, valid = _times(time)
        self.size = len(code)
        usable = valid & (code >= 0)
        if usable.all():
            self.rows, codes = np.arange(len(code)), code
        else:
            self.rows = np.flatnonzero(usable)
            codes, times = code[self.rows], times[self.rows]
        if len(self.rows):
            order, codes = _pair_order(codes, times)
            self.rows = order if len(self.rows) == self.size else self.rows[order]
            times = times[order]
        self.codes, self.times = codes, times


def _pair_order(codes: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices that sort the rows by code, and by time within a code as far as the times fit
    beside the codes and the indices (the order within a code only makes the searches
    cache-friendly), and the codes in that order: one numpy sort of the three packed into
    int64 values (several times faster than an argsort), or an argsort of code and time if
    even the indices do not fit beside the codes."""
    import numpy as np

    low = int(times.min())
    bits = (int(times.max()) - low).bit_length()
    code_bits = int(codes.max()).bit_length()
    index_bits = (len(codes) - 1).bit_length()
    if code_bits + index_bits > _PACK_BITS:
        kept = max(0, min(bits, _PACK_BITS - code_bits))
        order = np.argsort((codes << kept) | ((times - low) >> (bits - kept)))
        return order, codes[order]
    kept = min(bits, _PACK_BITS - code_bits - index_bits)
    key = codes << (kept + index_bits)
    key |= ((times - low) >> (bits - kept)) << index_bits
    key |= np.arange(len(codes))
    key.sort()
    return key & ((1 << index_bits) - 1), key >> (kept + index_bits)


def _match(step: Step, right: pa.Table, codes: _Codes, left: _LeftSide) -> np.ndarray:
    """Per root row, the index of its matching row in ``right`` (-1: none).

    The codes are searched in passes of as many codes as fit beside the times in a packed
    value (one pass unless the keys are many and the times span more than a few years of
    microseconds)."""
    import numpy as np

    match = np.full(left.size, -1, dtype=np.int64)
    if not len(left.rows):
        return match
    ltime = left.times * step.left_scale if step.left_scale != 1 else left.times
    rcode, rtime, candidates = _right_rows(step, right, codes)
    if not len(rcode):
        return match
    lkey, rkey, shift = _time_axis(ltime, rtime)
    width = 1 << max(0, _PACK_BITS - shift)
    ties = _tie_table(right, candidates, step.tie_break)
    for first in range(0, codes.count, width):
        lo, hi = (int(i) for i in np.searchsorted(left.codes, [first, first + width]))
        # one pass: every code (and the code past them, of rows that cannot match) fits
        picked = None if width > codes.count else np.flatnonzero(
            (rcode >= first) & (rcode < first + width))
        if lo == hi or (picked is not None and not len(picked)):
            continue
        hit, found = _latest(
            left.codes[lo:hi] - first if first else left.codes[lo:hi], lkey[lo:hi],
            rcode - first if picked is None else rcode[picked] - first,
            rkey if picked is None else rkey[picked], shift,
            ties if ties is None or picked is None else ties.take(picked))
        if picked is not None:
            found = picked[found]
        if step.lookback is not None:
            hit &= rtime[found] >= ltime[lo:hi] - step.lookback
        if candidates is not None:
            found = candidates[found]
        if not hit.all():
            found[~hit] = -1
        match[left.rows[lo:hi]] = found
    return match


def _right_rows(step: Step, right: pa.Table, codes: _Codes
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The right rows' codes and event times (in the comparison's unit), and which rows they
    are (None: all). A row without an event time or with a key no root row has cannot match:
    such rows are left out, or, when they are few (left out, the rest would be copied), kept
    with the code past the root's (``codes.count``) and a time the others have."""
    import numpy as np

    rcode = codes.right(right, step.right_keys)
    rtime, valid = _times(right.column(step.right_time))
    usable = valid & (rcode >= 0)
    candidates = None
    if not usable.all():
        kept = np.count_nonzero(usable)
        if kept < _KEEP_UNUSABLE * len(usable):
            candidates = np.flatnonzero(usable)
            rcode, rtime = rcode[candidates], rtime[candidates]
        else:
            rcode = np.where(usable, rcode, codes.count)
            rtime = np.where(usable, rtime, rtime[int(np.argmax(usable))])
    rtime = rtime * step.right_scale if step.right_scale != 1 else rtime
    return rcode, rtime, candidates


def _time_axis(ltime: np.ndarray, rtime: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Both sides' times as non-negative values in the same order, and their bit width:
    offsets from the earliest, or ranks among both sides' times when the offsets would need
    more than :data:`_MAX_TIME_BITS` bits."""
    import numpy as np

    low = min(int(ltime.min()), int(rtime.min()))
    bits = (max(int(ltime.max()), int(rtime.max())) - low).bit_length()
    if bits <= _MAX_TIME_BITS:
        return ltime - low, rtime - low, bits
    distinct, ranks = np.unique(np.concatenate([ltime, rtime]), return_inverse=True)
    ranks = ranks.astype(np.int64)
    return ranks[:len(ltime)], ranks[len(ltime):], max(1, (len(distinct) - 1).bit_length())


def _tie_table(right: pa.Table, candidates: np.ndarray | None,
               tie_break: tuple[str, ...]) -> pa.Table | None:
    """The tie-break columns of the usable right rows (None: no tie-break)."""
    import pyarrow as pa

    if not tie_break:
        return None
    rows = None if candidates is None else pa.array(candidates)
    return pa.table({f"__tie{i}": right.column(c) if rows is None else right.column(c).take(rows)
                     for i, c in enumerate(tie_break)})


def _latest(lcode: np.ndarray, ltime: np.ndarray, rcode: np.ndarray, rtime: np.ndarray,
            shift: int, ties: pa.Table | None) -> tuple[np.ndarray, np.ndarray]:
    """For each left (code, time), sorted: whether a right row has the same code and a time at
    or before it, and the index of the latest such right row (where there is one)."""
    import numpy as np

    lpacked = lcode << shift
    lpacked |= ltime
    rpacked = rcode << shift
    rpacked |= rtime
    order, ordered = _sorted_pairs(rpacked, rcode, rtime, shift)
    if ties is not None:
        order, ordered = _broken_ties(order, ordered, ties)
    at = np.searchsorted(ordered, lpacked, side="right")
    at -= 1  # the last right row at or below; -1 (none) takes the last row: not a hit
    hit = (ordered[at] >> shift) == lcode
    if int(lpacked.min()) < int(ordered[0]):
        hit &= at >= 0
    return hit, order[at]


def _sorted_pairs(packed: np.ndarray, codes: np.ndarray, times: np.ndarray, shift: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Indices that sort ``packed`` (``codes << shift | times``), equal values by index, and
    the sorted values: one numpy sort of int64 values packing the code, as many high bits of
    the time as fit and the index (several times faster than an argsort), then, only where
    low bits of the times were left out and put rows out of order, a stable sort of the
    nearly sorted values (a merge sort: fast on presorted runs)."""
    import numpy as np

    index_bits = (len(packed) - 1).bit_length()
    kept = min(shift, _PACK_BITS - int(codes.max()).bit_length() - index_bits)
    if kept < 0:
        order = np.argsort(packed, kind="stable")
        return order, packed[order]
    key = codes << (kept + index_bits)
    high = times >> (shift - kept)
    high <<= index_bits
    key |= high
    del high
    key |= np.arange(len(packed))
    key.sort()
    if kept == shift:  # the sorted values are the packed ones, with their indices
        return key & ((1 << index_bits) - 1), key >> index_bits
    order = key
    order &= (1 << index_bits) - 1
    ordered = packed[order]
    if len(ordered) > 1 and (ordered[1:] < ordered[:-1]).any():
        fix = np.argsort(ordered, kind="stable")
        order, ordered = order[fix], ordered[fix]
    return order, ordered


def _broken_ties(order: np.ndarray, ordered: np.ndarray, ties: pa.Table
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``order`` and ``ordered`` (sorted values, equal ones by index) kept to one row per
    distinct value: of equal values (same keys and event time), the row with the smallest
    ``ties`` values (nulls last; fully equal ties: the first by index). Only the rows in
    runs of equal values are sorted by their ties (pyarrow's stable sort)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    same = ordered[1:] == ordered[:-1]
    if not same.any():
        return order, ordered
    in_run = np.zeros(len(order), dtype=bool)
    in_run[1:] |= same
    in_run[:-1] |= same
    starts = in_run.copy()
    starts[1:] &= ~same  # a run's first position
    at = np.flatnonzero(in_run)
    rows, values = order[at], ordered[at]
    table = pa.table({"__packed": values, **{name: ties.column(name).take(pa.array(rows))
                                             for name in ties.column_names}})
    by_ties = np.asarray(pc.sort_indices(table, sort_keys=[
        (name, "ascending", "at_end") for name in table.column_names]).to_numpy(), dtype=np.int64)
    first = np.ones(len(by_ties), dtype=bool)
    first[1:] = values[by_ties][1:] != values[by_ties][:-1]
    order = order.copy()
    order[starts] = rows[by_ties[first]]  # each run's winner, runs in ascending order
    keep = ~in_run | starts
    return order[keep], ordered[keep]


class _Gather:
    """A join's matches (per output row, a right row or -1: none, a null) and how to take a
    right column's values by them: fixed-width columns without nulls by a numpy gather
    (nulls zeroed, as pyarrow's take leaves them), others by pyarrow's take."""

    def __init__(self, match: np.ndarray) -> None:
        import numpy as np
        import pyarrow as pa

        self.match = match
        self.missing = np.flatnonzero(match < 0)
        self.index = match
        self.validity = None
        if len(self.missing):
            self.index = np.maximum(match, 0)
            self.validity = pa.py_buffer(np.packbits(match >= 0, bitorder="little"))

    def take(self, column: Any) -> pa.Array:
        """``column``'s values at the matches, null where there is none."""
        import numpy as np
        import pyarrow as pa

        array = _one_chunk(column)
        kind = array.type
        if len(array) == 0:  # a bucket without rows of this group: nothing matched
            return pa.nulls(len(self.match), kind)
        if (array.null_count or not pa.types.is_primitive(kind) or pa.types.is_boolean(kind)
                or kind.bit_width not in (8, 16, 32, 64)):
            return array.take(pa.array(self.match, mask=self.match < 0))
        width = kind.bit_width // 8
        values = np.frombuffer(array.buffers()[1], dtype=f"u{width}", count=array.offset + len(array))
        taken = values[array.offset:][self.index]
        taken[self.missing] = 0
        return pa.Array.from_buffers(kind, len(taken), [self.validity, pa.py_buffer(taken)],
                                     null_count=len(self.missing))


# -- files -------------------------------------------------------------------------------------


def write_buckets(batches: pa.RecordBatchReader, numbers: Callable[[pa.RecordBatch], np.ndarray],
                  drop: list[str], folder: Path, file_name: Callable[[int], str]) -> None:
    """Split a stream's rows by their bucket number (``numbers(batch)``: one per row, uint16)
    into one Arrow IPC file per bucket with rows, ``folder / file_name(bucket)``, without the
    ``drop`` columns: the kernel's own scratch format, written and read (memory-mapped)
    without encoding. A batch's rows keep their order within a bucket."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            ids = numbers(batch)
            counts = np.bincount(ids)
            data = batch.drop_columns(drop) if drop else batch
            if np.count_nonzero(counts) > 1:  # a stable sort: rows keep their order
                data = pc.take(data, pc.sort_indices(pa.array(ids)), boundscheck=False)
            start = 0
            for bucket in map(int, np.flatnonzero(counts)):
                if bucket not in writers:
                    path = folder / file_name(bucket)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    writers[bucket] = pa.ipc.new_file(path, data.schema)
                writers[bucket].write_batch(data.slice(start, int(counts[bucket])))
                start += int(counts[bucket])
    finally:
        for writer in writers.values():
            writer.close()


def read_bucket(files: list[Path], columns: list[str], schema: pa.Schema) -> pa.Table:
    """``columns`` of a bucket's Arrow IPC files, memory-mapped, one chunk per column (an
    empty table of ``schema`` when there are none)."""
    import pyarrow as pa

    if not files:
        return schema.empty_table().select(columns)
    parts = [pa.ipc.open_file(pa.memory_map(str(f))).read_all().select(columns) for f in files]
    return pa.concat_tables(parts).combine_chunks()


def write_result(table: pa.Table, path: Path, batch_rows: int = RESULT_ROW_GROUP) -> None:
    """A bucket's result as a scratch Arrow IPC file (read once, by the merge): written without
    encoding, in batches of ``batch_rows`` rows (the merge holds one batch of every file)."""
    import pyarrow as pa

    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table, max_chunksize=batch_rows)
