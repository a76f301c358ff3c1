"""Point-in-time joins of one hash bucket in numpy and pyarrow, for partitioned creation.

:class:`~feature_store.local.partitioned_join.PartitionedQuery` runs a query bucket by bucket.
When :func:`plan` covers the query's shape, each bucket is joined here instead of by the
compiled DuckDB statement, with the statement's semantics (:mod:`feature_store.local.pit`) and
its exact rows, values and order, at a fraction of the CPU:

1. the root rows are put in the statement's order first (the root group's upsert key,
   ascending, nulls last), so every output column is gathered once, already in order;
2. the join keys become dense integer codes: the root's values, hashed, and each right row's
   key looked up among them (a right row whose key no root row has cannot match: dropped);
   a null key or event time never matches;
3. each side's (code, event time) is packed into one int64 that sorts like the pair (event
   times are replaced by their ranks when the packing would not fit); the root side is sorted
   once for all joins; a root row's match is the last right row at or below its packed value
   (``searchsorted``) with the same code: the latest right row with
   ``right.event_time <= root.event_time`` on the keys;
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

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pyarrow as pa

    from feature_store.local.pit import CompiledQuery, JoinPlan

#: event-time units by the stored type: epoch milliseconds, microseconds, days
_UNITS = {"int64": "ms", "bigint": "ms", "timestamp[us, tz=UTC]": "us", "timestamp[us]": "us",
          "date32[day]": "day"}
_TO_MICROS = {"ms": 1_000, "us": 1, "day": 86_400_000_000}
#: key and order column types whose equality and order numpy/pyarrow share with DuckDB
_KEY_TYPES = ("int64", "int32", "string", "large_string", "bool", "date32[day]",
              "timestamp[us, tz=UTC]", "timestamp[us]")
#: bits of a packed (code, event time) value
_PACK_BITS = 62
#: multi-column key codes above this are re-densified (a code and a time rank then fit)
_DENSE_LIMIT = 1 << 24
#: result files are read back in row groups: keep them as small as DuckDB writes them
RESULT_ROW_GROUP = 122_880


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

    def reads(self) -> list[str]:
        """The right group's columns this join reads."""
        return list(dict.fromkeys([*self.right_keys, self.right_time, *self.tie_break,
                                   *self.columns]))


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
    if shape is None or keys is None or shape.post_filter:
        return None
    p = shape.plan
    placeholders = {node.alias: ph for ph, node in compiled.scans.items()}
    root_fg = p.root.fg
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
    lfg, rfg = jp.left.fg, jp.right.fg
    if not jp.point_in_time or not _typed(rfg, [*right_keys, *jp.tie_break], _KEY_TYPES):
        return None
    ltype = str(lfg.get_feature(lfg.event_time).type)
    rtype = str(rfg.get_feature(rfg.event_time).type)
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
    lookback = None
    if jp.join.lookback is not None:
        seconds = jp.join.lookback.total_seconds()
        lookback = int(seconds * 1000) if both_ms else int(seconds * 1_000_000)
    return Step(placeholder, right_keys, rfg.event_time, lscale, rscale,
                jp.join.join_type == "inner", lookback, tuple(jp.tie_break), tuple(columns))


# -- the kernel --------------------------------------------------------------------------------


def join_bucket(bp: BucketPlan, tables: dict[str, pa.Table], schema: pa.Schema) -> pa.Table:
    """The statement's result for one bucket: ``tables`` are the bucket's rows of each group
    (by placeholder), ``schema`` the statement's result schema."""
    import numpy as np
    import pyarrow as pa

    root = tables[bp.root]
    root = root.take(_root_order(root, bp.order))
    codes = _Codes(root, bp.keys)
    left = _LeftSide(root.column(bp.time), codes.left)
    matches = [_match(step, tables[step.placeholder], codes, left) for step in bp.steps]
    keep = np.ones(root.num_rows, dtype=bool)
    for step, match in zip(bp.steps, matches, strict=True):
        if step.inner:
            keep &= match >= 0
    rows = None if keep.all() else pa.array(np.flatnonzero(keep))
    columns = []
    for _, index, source in bp.output:
        if index < 0:
            column = root.column(source)
            columns.append(column if rows is None else column.take(rows))
            continue
        match = matches[index] if rows is None else matches[index][keep]
        taken = pa.array(match, mask=match < 0)
        columns.append(tables[bp.steps[index].placeholder].column(source).take(taken))
    return pa.table(columns, names=[name for name, _, _ in bp.output]).cast(schema)


def _root_order(table: pa.Table, order: tuple[str, ...]) -> pa.Array:
    """Indices that order ``table`` as the statement's ``ORDER BY`` (ascending, nulls last)."""
    import pyarrow.compute as pc

    return pc.sort_indices(table, sort_keys=[(c, "ascending", "at_end") for c in order])


def _filled(array: Any) -> np.ndarray:
    """An integer Arrow array as int64 numpy, -1 where null."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    values = pc.fill_null(array.cast(pa.int64()), -1) if array.null_count else array.cast(pa.int64())
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)


class _Codes:
    """Dense integer codes of the root's key values (-1: a null key), and the same codes for a
    right group's keys (-1: null, or a value no root row has)."""

    def __init__(self, root: pa.Table, keys: tuple[str, ...]) -> None:
        import pyarrow.compute as pc

        self.steps: list[tuple[pa.Array, int]] = []  # per key column: its dictionary
        code = None
        for key in keys:
            encoded = pc.dictionary_encode(root.column(key).combine_chunks())
            code = self._mix(code, _filled(encoded.indices), encoded.dictionary)
        if code is None:
            raise ValueError("a partitioned query joins on at least one key")
        self.left = code
        self.count = max(1, int(code.max()) + 1) if len(code) else 1

    def _mix(self, code: np.ndarray | None, column: np.ndarray, dictionary: pa.Array
             ) -> np.ndarray:
        """Codes of the keys so far combined with one more column's codes (re-densified past
        :data:`_DENSE_LIMIT`)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        self.steps.append((dictionary, len(dictionary)))
        if code is None:
            return column
        combined = code * len(dictionary) + column
        combined[(code < 0) | (column < 0)] = -1
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

        code = np.empty(0, dtype=np.int64)
        columns = iter(keys)
        for index, (dictionary, size) in enumerate(self.steps):
            if size < 0:  # re-densify the combination as the root's was
                found = pc.index_in(pa.array(code, mask=code < 0), value_set=dictionary)
                code = _filled(found)
                continue
            values = table.column(next(columns)).combine_chunks()
            if values.type != dictionary.type:
                values = values.cast(dictionary.type)
            column = _filled(pc.index_in(values, value_set=dictionary))
            if index == 0:
                code = column
            else:
                mixed = code * size + column
                mixed[(code < 0) | (column < 0)] = -1
                code = mixed
        return code


def _times(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """An event-time column as int64 in its stored unit, and where it is not null."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_timestamp(array.type) and array.type.unit != "us":  # pragma: no cover
        raise RuntimeError(f"event time of type {array.type}: microseconds expected")
    ints = array.cast(pa.int32() if pa.types.is_date32(array.type) else pa.int64())
    valid = (np.ones(len(array), dtype=bool) if not array.null_count
             else np.asarray(array.is_valid().to_numpy(zero_copy_only=False)))
    values = pc.fill_null(ints, 0) if array.null_count else ints
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64), valid


class _LeftSide:
    """The root rows that can match (a key and an event time), sorted once by (code, time):
    ``rows`` (their indices), ``codes`` and ``times`` (stored unit), in that order."""

    def __init__(self, time: Any, code: np.ndarray) -> None:
        import numpy as np

        times, valid = _times(time)
        self.size = len(code)
        usable = valid & (code >= 0)
        self.rows = np.arange(len(code)) if usable.all() else np.flatnonzero(usable)
        codes, times = code[self.rows], times[self.rows]
        if len(self.rows):
            order = _pair_order(codes, times)
            self.rows, codes, times = self.rows[order], codes[order], times[order]
        self.codes, self.times = codes, times


def _pair_order(codes: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Indices that sort the (code, time) pairs."""
    import numpy as np

    low = int(times.min())
    shift = (int(times.max()) - low).bit_length()
    if shift + int(codes.max()).bit_length() <= _PACK_BITS:
        return np.argsort((codes << shift) | (times - low))
    return np.lexsort((times, codes))


def _match(step: Step, right: pa.Table, codes: _Codes, left: _LeftSide) -> np.ndarray:
    """Per root row, the index of its matching row in ``right`` (-1: none)."""
    import numpy as np

    match = np.full(left.size, -1, dtype=np.int64)
    rcode = codes.right(right, step.right_keys)
    rtime, valid = _times(right.column(step.right_time))
    usable = valid & (rcode >= 0)
    candidates = None if usable.all() else np.flatnonzero(usable)
    if candidates is not None:
        rcode, rtime = rcode[candidates], rtime[candidates]
    if not len(rcode) or not len(left.rows):
        return match
    ltime = left.times * step.left_scale if step.left_scale != 1 else left.times
    rtime = rtime * step.right_scale if step.right_scale != 1 else rtime
    lpacked, rpacked, shift = _pack(left.codes, ltime, rcode, rtime, codes.count)
    order = _right_order(rpacked, right, candidates, step.tie_break)
    ordered = rpacked[order]
    position = np.searchsorted(ordered, lpacked, side="right") - 1
    at = np.maximum(position, 0)
    hit = (position >= 0) & ((ordered[at] >> shift) == left.codes)
    found = order[at]
    if step.lookback is not None:
        hit &= rtime[found] >= ltime - step.lookback
    found = found[hit]
    match[left.rows[hit]] = found if candidates is None else candidates[found]
    return match


def _pack(lcode: np.ndarray, ltime: np.ndarray, rcode: np.ndarray, rtime: np.ndarray,
          count: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(code, time) of both sides as int64 values that sort like the pairs, and the shift of
    the code; the times become their ranks among both sides' when they would not fit."""
    import numpy as np

    code_bits = (count - 1).bit_length()
    low = min(int(ltime.min()), int(rtime.min()))
    span = max(int(ltime.max()), int(rtime.max())) - low
    if span.bit_length() + code_bits <= _PACK_BITS:
        shift = span.bit_length()
        return (lcode << shift) | (ltime - low), (rcode << shift) | (rtime - low), shift
    distinct, ranks = np.unique(np.concatenate([ltime, rtime]), return_inverse=True)
    shift = max(1, (len(distinct) - 1).bit_length())
    ranks = ranks.astype(np.int64)
    return (lcode << shift) | ranks[:len(ltime)], (rcode << shift) | ranks[len(ltime):], shift


def _right_order(packed: np.ndarray, right: pa.Table, candidates: np.ndarray | None,
                 tie_break: tuple[str, ...]) -> np.ndarray:
    """Indices into ``packed`` in ascending order, one per distinct value: of equal values
    (same keys and event time), the row with the smallest ``tie_break`` values (nulls last)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not tie_break:
        return np.argsort(packed)
    rows = None if candidates is None else pa.array(candidates)
    table = pa.table({"__packed": packed, **{
        f"__tie{i}": right.column(c) if rows is None else right.column(c).take(rows)
        for i, c in enumerate(tie_break)}})
    order = np.asarray(pc.sort_indices(table, sort_keys=[
        (name, "ascending", "at_end") for name in table.column_names]).to_numpy())
    ordered = packed[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return order[first]


# -- files -------------------------------------------------------------------------------------


def read_bucket(files: list[Path], columns: list[str], schema: pa.Schema) -> pa.Table:
    """``columns`` of a bucket's Parquet files (an empty table of ``schema`` when none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not files:
        return schema.empty_table().select(columns)
    return pa.concat_tables([pq.read_table(f, columns=columns, memory_map=True) for f in files])


def write_result(table: pa.Table, path: Path) -> None:
    """A bucket's result as a scratch Parquet file (read once, by the merge)."""
    import pyarrow.parquet as pq

    pq.write_table(table, path, compression="none", use_dictionary=False,
                   write_statistics=False, row_group_size=RESULT_ROW_GROUP)
