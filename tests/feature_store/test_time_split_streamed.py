"""The streamed time split (out-of-core creation) gives the same codes and the same resolved
spec as :func:`assign_split_codes` on the whole frame, for every batching."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from feature_store.core.splits import (
    SplitSpec,
    assign_split_codes,
    make_split_spec,
    resolve_time_bounds,
    time_split_codes_streamed,
)
from fstrain.kernel.errors import InvalidArgumentError

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _times(n: int, seed: int, *, null_share: float = 0.1, distinct: int = 50,
           unit: str = "ns", tz: str | None = "UTC") -> pd.DataFrame:
    """Event times with many ties (``distinct`` values) and nulls."""
    rng = np.random.default_rng(seed)
    t = pd.Series(T0 + pd.to_timedelta(rng.integers(0, distinct, n) * (997 if distinct < 10**6 else 1), unit="s"))
    t = t.dt.tz_convert(tz) if tz else t.dt.tz_localize(None)
    t = t.astype(f"datetime64[{unit}, {tz}]" if tz else f"datetime64[{unit}]")
    t[rng.random(n) < null_share] = pd.NaT
    return pd.DataFrame({"t": t})


def _batchings(frame: pd.DataFrame, seed: int) -> Iterator[list[pd.DataFrame]]:
    n = len(frame)
    yield [frame]
    yield [frame.iloc[i:i + 1] for i in range(n)] or [frame]
    rng = np.random.default_rng(seed)
    for _ in range(2):  # random cuts, empty batches included
        cuts = np.sort(rng.integers(0, n + 1, rng.integers(1, 8)))
        edges = [0, *cuts.tolist(), n]
        yield [frame.iloc[a:b] for a, b in zip(edges, edges[1:])]


def _expected(frame: pd.DataFrame, spec: SplitSpec) -> tuple[SplitSpec, np.ndarray]:
    """The resolved spec and what in-memory creation assigns (a relative spec resolved first,
    as creation does)."""
    resolved = resolve_time_bounds(frame, spec, event_time_column="t")
    current = resolved if spec.is_relative else spec
    return resolved, assign_split_codes(frame, current, event_time_column="t")


def _check(frame: pd.DataFrame, spec: SplitSpec, seed: int = 0) -> None:
    try:
        want = _expected(frame, spec)
    except InvalidArgumentError as exc:
        for batches in _batchings(frame, seed):
            with pytest.raises(InvalidArgumentError) as got:
                time_split_codes_streamed(lambda b=batches: iter(b), spec, event_time_column="t")
            assert str(got.value) == str(exc)
        return
    for batches in _batchings(frame, seed):
        for limit in (0, 5, 1 << 20):  # radix passes down to single values, or gathered
            resolved, codes = time_split_codes_streamed(
                lambda b=batches: iter(b), spec, event_time_column="t", gather_limit=limit)
            assert codes.dtype == np.int8
            np.testing.assert_array_equal(codes, want[1])
            assert resolved == want[0]
            assert resolved.to_dict() == want[0].to_dict()


SIZE_SPECS = [
    make_split_spec("time", seed=0, test_size=0.2),
    make_split_spec("time", seed=0, test_size=0.3, validation_size=0.25, three_way=True),
    make_split_spec("time", seed=0, test_size=0.2, gap="30min"),
]


@pytest.mark.parametrize("spec", SIZE_SPECS)
@pytest.mark.parametrize("distinct", [1, 3, 50, 10**9])
def test_size_based_cuts_match_the_whole_frame(spec: SplitSpec, distinct: int) -> None:
    _check(_times(40, seed=distinct % 97, distinct=distinct), spec, seed=1)


def test_wide_range_units_and_timezones() -> None:
    """Times before 1970 and far after (int64 offsets over 63 bits), other units, naive times."""
    spec = SIZE_SPECS[1]
    wide = pd.DataFrame({"t": pd.to_datetime(
        [-(2**62), 2**62, 0, 5, 5, 5, -3, None, 2**62 - 1, -(2**62) + 7, 12, 13], utc=True)})
    _check(wide, spec)
    _check(wide, SIZE_SPECS[0])
    for unit, tz in (("us", None), ("ms", "UTC"), ("s", "Europe/Berlin")):
        _check(_times(40, seed=3, unit=unit, tz=tz, distinct=10**6), spec)


def test_ties_at_the_cut() -> None:
    """Many rows equal to the cut time: all of them fall on the later side, as in memory."""
    t = pd.Series([T0] * 5 + [T0 + pd.Timedelta(hours=1)] * 10 + [T0 + pd.Timedelta(hours=2)] * 5)
    _check(pd.DataFrame({"t": t}), SIZE_SPECS[0])
    _check(pd.DataFrame({"t": t}), SIZE_SPECS[1])


def test_relative_and_explicit_specs() -> None:
    frame = _times(80, seed=5, distinct=10**5)
    for spec in (
        make_split_spec("time", seed=0, test_window="3D"),
        make_split_spec("time", seed=0, test_window="2D", validation_window="2D",
                        three_way=True, gap="1h"),
        make_split_spec("time", seed=0, train_end=T0 + pd.Timedelta(days=6),
                        test_start=T0 + pd.Timedelta(days=6)),
        make_split_spec("time", seed=0, train_end=T0 + pd.Timedelta(days=4),
                        validation_start=T0 + pd.Timedelta(days=4),
                        validation_end=T0 + pd.Timedelta(days=5),
                        test_start=T0 + pd.Timedelta(days=5), three_way=True),
    ):
        _check(frame, spec)


def test_degenerate_inputs_fail_as_in_memory() -> None:
    """All-null, empty and too-small frames raise the in-memory error, word for word."""
    all_null = pd.DataFrame({"t": pd.Series([pd.NaT] * 6, dtype="datetime64[ns, UTC]")})
    empty = all_null.iloc[:0]
    for frame in (all_null, empty, _times(3, seed=2, null_share=0.0)):
        for spec in (*SIZE_SPECS, make_split_spec("time", seed=0, test_window="3D"),
                     make_split_spec("time", seed=0, train_end=T0, test_start=T0)):
            _check(frame, spec)
    with pytest.raises(InvalidArgumentError, match="time_split_codes_streamed"):
        time_split_codes_streamed(lambda: iter([all_null]),
                                  make_split_spec("random", seed=0, test_size=0.2),
                                  event_time_column="t")


def test_few_passes_over_the_source() -> None:
    """A size-based cut reads the source a bounded number of times (here: range, radix
    levels, gather, codes), holding one batch at a time; a small source once."""
    frame = _times(5000, seed=9, distinct=10**9, null_share=0.0)
    reads = []

    def read() -> Iterator[pd.DataFrame]:
        reads.append(1)
        return iter([frame.iloc[i:i + 500] for i in range(0, 5000, 500)])

    _, codes = time_split_codes_streamed(read, SIZE_SPECS[1], event_time_column="t",
                                         gather_limit=100)
    np.testing.assert_array_equal(codes, _expected(frame, SIZE_SPECS[1])[1])
    assert 3 <= len(reads) <= 6
    reads.clear()  # at most gather_limit rows: read once, cut and coded in memory
    _, codes = time_split_codes_streamed(read, SIZE_SPECS[1], event_time_column="t")
    np.testing.assert_array_equal(codes, _expected(frame, SIZE_SPECS[1])[1])
    assert len(reads) == 1


def _ms_or_dates(kind: str, n: int, seed: int) -> pa.Table:
    """Event times as a feature group may hold them besides timestamps: epoch milliseconds
    (int64) or dates, with ties and nulls."""
    rng = np.random.default_rng(seed)
    nulls = rng.random(n) < 0.15
    if kind == "epoch_ms":
        values = T0.value // 10**6 + rng.integers(0, 40, n) * 3_600_000
        return pa.table({"t": pa.array(values, pa.int64(), mask=nulls)})
    days = (T0.value // (86_400 * 10**9) + rng.integers(0, 40, n)).astype(np.int32)
    return pa.table({"t": pa.array(days, pa.date32(), mask=nulls)})


def _arrow_batchings(table: pa.Table, seed: int) -> Iterator[list[pd.DataFrame]]:
    """Each batch converted on its own, as out-of-core creation reads them: an int64 batch
    holding a null reaches pandas as floats, one without as integers."""
    for frames in _batchings(pd.DataFrame({"i": np.arange(table.num_rows)}), seed):
        yield [table.slice(int(f["i"].iloc[0]), len(f)).to_pandas() if len(f) else
               table.slice(0, 0).to_pandas() for f in frames]


@pytest.mark.parametrize("kind", ["epoch_ms", "date"])
def test_epoch_ms_and_date_event_times_stream_as_the_whole_column_converts(kind: str) -> None:
    """Every batch converted as ``_event_times`` converts it gives the codes and the resolved
    spec of the whole column converted at once, written into the given array."""
    table = _ms_or_dates(kind, 60, seed=3)
    whole = table.to_pandas()
    assert whole["t"].dtype == (np.float64 if kind == "epoch_ms" else object)
    unit = pd.Timedelta(hours=1) if kind == "epoch_ms" else pd.Timedelta(days=1)
    for spec in (*SIZE_SPECS, make_split_spec("time", seed=0, test_window=9 * unit),
                 make_split_spec("time", seed=0, test_window=9 * unit,
                                 validation_window=9 * unit, three_way=True, gap=unit),
                 make_split_spec("time", seed=0, train_end=T0 + 30 * unit,
                                 test_start=T0 + 30 * unit)):
        want = _expected(whole, spec)
        assert (want[1] >= 0).sum() > 30  # the windows hold rows: nothing is refused
        for frames in _arrow_batchings(table, seed=4):
            for limit in (0, 1 << 20):  # radix passes down to single values, or gathered
                made: list[np.ndarray] = []

                def alloc(n: int, dtype: object, made: list[np.ndarray] = made) -> np.ndarray:
                    made.append(np.full(n, 9, dtype=dtype))
                    return made[-1]

                resolved, codes = time_split_codes_streamed(
                    lambda f=frames: iter(f), spec, event_time_column="t", gather_limit=limit,
                    rows=table.num_rows, alloc=alloc)
                assert len(made) == 1 and codes is made[0]
                np.testing.assert_array_equal(codes, want[1])
                assert resolved == want[0] and resolved.to_dict() == want[0].to_dict()


def _kind_of(times: pd.Series, kind: str) -> pd.Series:
    """``times`` (UTC timestamps) as a feature group's event time of ``kind``."""
    if kind == "epoch_ms":
        return times.astype("int64") // 10**6
    return times.dt.date if kind == "date" else times


@pytest.mark.parametrize("kind", ["timestamp", "epoch_ms", "date"])
def test_out_of_core_creation_streams_the_time_split(fs, monkeypatch, kind: str) -> None:
    """Out-of-core creation, in one statement and in partitions, takes the streamed path for a
    time split on a timestamp, epoch-millisecond or date event time and writes the in-memory
    version's splits and recorded (resolved) spec."""
    import pyarrow.parquet as pq

    from feature_store.core import splits
    from feature_store.local.training_data.training_data_stream import StreamOptions

    rng = np.random.default_rng(4)
    n, unit = 150, "D" if kind == "date" else "h"
    root = fs.get_or_create_feature_group("ev", version=1, primary_key=["rid"], event_time="ts")
    root.insert(pd.DataFrame({
        "rid": np.arange(n), "a": rng.integers(0, 5, n),
        "ts": _kind_of(pd.Series(T0 + pd.to_timedelta(rng.integers(0, 40, n), unit=unit)), kind),
        "label": rng.integers(0, 2, n).astype(float),
    }))
    side = fs.get_or_create_feature_group("side", version=1, primary_key=["a"], event_time="ts")
    side.insert(pd.DataFrame({"a": np.arange(5), "ts": _kind_of(pd.Series([T0] * 5), kind),
                              "s": np.arange(5.0)}))
    fv = fs.create_feature_view("tv", query=root.select_all().join(side.select(["s"]), on=["a"]),
                                labels=["label"])
    calls: list[int] = []
    real = splits.time_split_codes_streamed
    monkeypatch.setattr(splits, "time_split_codes_streamed",
                        lambda *a, **k: calls.append(1) or real(*a, **k))

    def create(stream, three_way, **kwargs):
        spec = fv._make_spec(three_way, 7, "time", **kwargs)
        version, _ = fv._td.create(spec, seed=7, start_time=None, end_time=None,
                                   extra_filter=None, materialize=True, data_format="parquet",
                                   description="", statistics_config=None, stream=stream)
        return fv.get_training_dataset(version)

    for three_way, kwargs in ((True, {"test_size": 0.3, "validation_size": 0.2}),
                              (False, {"test_window": f"10{unit}", "gap": f"1{unit}"})):
        want = create(None, three_way, **kwargs)
        for partitions in (3, 1):
            got = create(StreamOptions(batch_rows=16, partitions=partitions), three_way, **kwargs)
            assert got.split_spec == want.split_spec
            for name in want.splits:
                assert got.splits[name]["sha256"] == want.splits[name]["sha256"]
                files = [pq.read_table(f"{td.location}/{name}.parquet") for td in (want, got)]
                assert files[0].num_rows > 0 and files[0].equals(files[1])
    assert len(calls) == 4


@pytest.mark.parametrize("rows", [5, 7])
def test_a_read_giving_other_rows_than_counted_is_refused_from_the_exception_root(rows: int) -> None:
    """The codes pass checks the row count it was promised (``rows``): a read that yields more
    or fewer rows is an InvalidArgumentError (FeatureStoreError), not a bare ValueError."""
    times = pd.DataFrame({"t": pd.date_range("2024-01-01", periods=6, freq="D", tz="UTC")})
    spec = make_split_spec("time", seed=0, train_end=times.t[3], test_start=times.t[3])
    with pytest.raises(InvalidArgumentError, match=f"of {rows} row"):
        time_split_codes_streamed(lambda: iter([times]), spec, event_time_column="t",
                                  rows=rows, alloc=lambda n, dtype: np.empty(n, dtype=dtype))
