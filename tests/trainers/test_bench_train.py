"""bench/train.py cleans up after itself: its scratch folders do not outlive a run."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "train.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_train", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_xgboost_bench_removes_its_scratch_folder(tmp_path, monkeypatch):
    pytest.importorskip("xgboost")
    bench = _bench()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    X, y = bench.make_data(200, 4)
    result = bench.bench_xgboost(X, y, repeats=1, rounds=2)
    assert result["ours_s"] > 0 and result["bare_s"] > 0
    assert list(scratch.iterdir()) == []  # the trained models' folder went with the run
