"""Model-dependent transformations fitted from the train split's batches record exactly what the
whole-column fit records (``==`` and the same JSON), for every batching, every kind and the
materialized formats; the robust scaler's quartiles are np.percentile's bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hsfs.hopsworks_udf import udf
from hsfs.transformation_statistics import TransformationStatistics

from feature_store.core import order_statistics
from feature_store.core.order_statistics import select_ranks
from feature_store.core.transformation_fit import fit_transformations_streamed
from feature_store.core.transformations import (
    fit_transformations,
    label_encoder,
    min_max_scaler,
    one_hot_encoder,
    robust_scaler,
    standard_scaler,
)
from feature_store.local.training_data import transformation_stats
from feature_store.local.training_data.training_data_stream import StreamOptions
from fstrain.kernel.errors import InvalidArgumentError

BATCHINGS = (1, 7, 64, 10_000)  # rows per batch


def _table(n: int = 300, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    nulls = np.arange(n) % 11 == 0
    return pa.table({
        "f": pa.array(rng.normal(size=n) * 1e3),
        "wide": pa.array(rng.standard_cauchy(n) * 10.0 ** rng.integers(-30, 30, n)),
        "i": pa.array(np.where(nulls, None, rng.integers(-50, 50, n)).tolist(), pa.int64()),
        "u8": pa.array(rng.integers(0, 200, n), pa.uint8()),
        "b": pa.array(rng.random(n) > 0.3),
        "s": pa.array(np.where(nulls, None, rng.choice(["x", "a b", "é", ""], n)).tolist()),
        "ties": pa.array(rng.integers(0, 3, n).astype(float)),
        "ints": pa.array(rng.integers(0, 9, n)),
        "cat": pa.array(rng.choice(["p", "q"], n)).dictionary_encode(),
    })


TFS = [standard_scaler("f"), robust_scaler("wide"), robust_scaler("i"), min_max_scaler("u8"),
       min_max_scaler("b"), one_hot_encoder("s"), label_encoder("ints"), robust_scaler("ties"),
       label_encoder("cat"), standard_scaler("i")]


def _streamed(tfs, table, rows, **kwargs):
    return fit_transformations_streamed(tfs, table.schema,
                                        lambda: table.to_batches(max_chunksize=rows), **kwargs)


@pytest.mark.parametrize("gather_limit", [3, 1 << 20])
def test_streamed_fit_equals_the_whole_column_fit_for_every_batching(gather_limit):
    """gather_limit 3: the robust quartiles come from the radix passes, not a gathered column."""
    table = _table()
    tfs = [tf for tf in TFS if tf.key != "standard_scaler_i"]
    whole = fit_transformations(tfs, table.to_pandas())
    for rows in BATCHINGS[gather_limit < 100:]:  # (single rows through the passes: too slow)
        got = _streamed(tfs, table, rows, gather_limit=gather_limit)
        assert got == whole
        assert json.dumps(got) == json.dumps(whole)  # the same types (ints stay ints)
    assert whole["label_encoder_ints"]["values"] == list(range(9))
    standard_i = [standard_scaler("i")]
    assert _streamed(standard_i, table, 5) == fit_transformations(standard_i, table.to_pandas())


def test_quartiles_are_np_percentile_bit_for_bit():
    """The whole-column robust fit (and so the streamed one) records np.percentile's figures:
    versions fitted before keep meaning what they meant."""
    rng = np.random.default_rng(1)
    for n in [*range(1, 12), 40, 257, 1000]:
        for values in (rng.normal(size=n) * 1e-3, rng.integers(0, 4, n).astype(float),
                       rng.standard_cauchy(n)):
            fitted = robust_scaler("x").fit(pd.Series(values))
            want = [float(p) for p in np.percentile(values, [25.0, 50.0, 75.0])]
            assert [fitted["p25"], fitted["p50"], fitted["p75"]] == want
            for limit in (1, n):
                ranks = [0, n // 3, n - 1]
                got = select_ranks(lambda v=values: np.array_split(v, 3), ranks, n,
                                   float(values.min()), float(values.max()), limit)
                assert got == {k: float(np.partition(values, k)[k]) for k in ranks}


def test_order_statistics_over_signs_zeros_and_extremes():
    values = np.array([-0.0, 0.0, -1e308, 1e308, 5e-324, -5e-324, 3.5, -3.5, 0.0, 7.0] * 3)
    n = len(values)
    got = select_ranks(lambda: [values[:4], values[4:]], range(n), n, -1e308, 1e308, 1)
    assert [got[k] for k in range(n)] == sorted(values.tolist())


def test_standard_scaler_is_batch_independent_and_close_to_numpy():
    values = np.random.default_rng(2).normal(5, 3, 200_003)
    table = pa.table({"f": values})
    fits = [_streamed([standard_scaler("f")], table, rows) for rows in (1_000, 65_537, 200_003)]
    assert fits[0] == fits[1] == fits[2] == fit_transformations([standard_scaler("f")],
                                                                table.to_pandas())
    stats = fits[0]["standard_scaler_f"]
    assert stats["mean"] == pytest.approx(values.mean(), rel=1e-14)
    assert stats["std"] == pytest.approx(values.std(), rel=1e-14)


@pytest.mark.parametrize(("tf", "column", "message"), [
    (standard_scaler("s"), pa.array(["a", None]), "must be numeric"),
    (min_max_scaler("s"), pa.array([True, None, False]), "Got dtype object"),
    (robust_scaler("s"), pa.array([None, None], pa.float64()), "no non-null values"),
    (standard_scaler("s"), pa.array([1.0, np.inf, -np.inf]), "Got inf instead"),
    (label_encoder("s"), pa.array([pd.Timestamp("2024-01-01"), None]), "must be categorical"),
])
def test_streamed_refusals_are_the_whole_column_ones(tf, column, message):
    table = pa.table({"s": column})
    with pytest.raises(InvalidArgumentError, match=message) as whole:
        fit_transformations([tf], table.to_pandas())
    for rows in (1, 2):  # batches without the null: the whole column's dtype still decides
        with pytest.raises(InvalidArgumentError) as streamed:
            _streamed([tf], table, rows)
        assert str(streamed.value) == str(whole.value)


def test_a_sum_that_overflows_is_refused_by_both():
    table = pa.table({"f": [1e308, 1e308]})
    for fit in (lambda: fit_transformations([standard_scaler("f")], table.to_pandas()),
                lambda: _streamed([standard_scaler("f")], table, 1)):
        with pytest.raises(InvalidArgumentError, match="overflows a double"):
            fit()


@udf(float, drop=["fee"])
def centred(fee: pd.Series, statistics=TransformationStatistics("fee")) -> pd.Series:  # noqa: B008
    return fee - statistics.fee.mean


@udf(float, mode="python")
def doubled(x):
    return x * 2.0


@pytest.fixture
def view(fs):
    rng = np.random.default_rng(3)
    n = 400
    fg = fs.get_or_create_feature_group("rows", version=1, primary_key=["rid"], event_time="ts")
    amount = rng.gamma(2, 10, n)
    amount[::17] = np.nan
    fg.insert(pd.DataFrame({
        "rid": np.arange(n), "ts": pd.Timestamp("2024-01-01", tz="UTC")
        + pd.to_timedelta(np.arange(n), unit="h"),
        "amount": amount, "count": rng.integers(0, 1000, n), "fee": rng.random(n),
        "kind": rng.choice(["a", "b", None], n), "code": rng.integers(0, 5, n),
        "label": (rng.random(n) < 0.3).astype(int),
    }))
    tfs = [standard_scaler("amount"), robust_scaler("count"), min_max_scaler("code"),
           one_hot_encoder("kind"), centred("fee"), doubled("code")]
    return fs.create_feature_view("v", query=fg.select_all(), labels=["label"],
                                  transformation_functions=tfs)


def test_streamed_versions_record_the_in_memory_fit(view, monkeypatch):
    """Streamed creates in every format (the fit reading the written train split 16 rows at a
    time, the robust quartiles selected in passes) record the fit of the in-memory create; a
    ``@udf`` with statistics gets them from its gathered column, one without none."""
    monkeypatch.setattr(transformation_stats, "FIT_BATCH_ROWS", 16)
    monkeypatch.setattr(order_statistics, "GATHER_LIMIT", 8)
    spec = view._make_spec(False, 5, "random", test_size=0.25)
    fitted = {}
    for data_format, stream in (("parquet", None), ("parquet", StreamOptions(batch_rows=7)),
                                ("csv", StreamOptions()), ("jsonl", StreamOptions())):
        version, _ = view._td.create(
            spec, seed=5, start_time=None, end_time=None, extra_filter=None, materialize=True,
            data_format=data_format, description="", statistics_config=None, stream=stream)
        td = view.get_training_dataset(version)
        assert td.data_format == data_format
        fitted[data_format, stream is None] = td.transformation_statistics
    want = fitted["parquet", True]
    assert set(want) == {"standard_scaler_amount", "robust_scaler_count", "min_max_scaler_code",
                         "one_hot_encoder_kind", "centred_fee", "doubled_code"}
    assert want["doubled_code"] == {} and 0 < want["centred_fee"]["fee"]["mean"] < 1
    for got in fitted.values():
        assert got == want and json.dumps(got) == json.dumps(want)


#: the train split of the bounded-memory test: 2 float columns (~190 MB as Arrow, as much again
#: as pandas; the whole fit holds both, and copies for the nulls' removal and the partition)
CAP_ROWS = 12_000_000
#: streamed: a batch, up to 1M gathered values and six histograms (runs under a 40 MiB cap, not
#: under 20); whole: runs out under 500
CAP_MIB = 150


@pytest.mark.slow
def test_a_train_split_larger_than_a_memory_cap_is_fitted_streamed(tmp_path):
    """A standard and a robust scaler fitted on a train split whose columns do not fit under
    the cap: the whole read runs out, the streamed fit (radix passes for the quartiles of 12M
    values) stays under it and records what the whole fit records."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pyarrow.parquet as pq

    here = Path(__file__).parent
    rng = np.random.default_rng(7)
    b = rng.lognormal(size=CAP_ROWS)
    b[::1000] = np.nan
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"a": rng.normal(3, 2, CAP_ROWS), "b": b}), path,
                   row_group_size=1 << 20)
    del b
    env = {**os.environ, "PYTHONPATH": str(here.parents[1]), "ARROW_DEFAULT_MEMORY_POOL": "system",
           "MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}

    def run(mode):
        return subprocess.run([sys.executable, str(here / "fit_cap_worker.py"), str(path), mode,
                               str(CAP_MIB)], env=env, check=False, capture_output=True,
                              text=True, timeout=600)

    whole = run("whole")
    assert whole.returncode == 3, whole.stdout + whole.stderr[-3000:]
    streamed = run("stream")
    assert streamed.returncode == 0, streamed.stdout + streamed.stderr[-3000:]
    result = json.loads(streamed.stdout.strip().splitlines()[-1])
    print(result["rss_peak_mib"])
    want = fit_transformations([standard_scaler("a"), robust_scaler("b")],
                               pq.read_table(path).to_pandas())
    assert result["stats"] == want

