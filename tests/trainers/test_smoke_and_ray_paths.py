"""`--smoke` on the shipped use cases (a stratified batch) and Ray's socket-path budget."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app
from fstrain.trainers.smoke import stratified_batch
from fstrain.trainers.tuning import RAY_SOCKET_SUFFIX, SOCKET_PATH_MAX, _short_temp_dir, ray_session


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


@pytest.mark.parametrize("use_case,features", [
    ("ccfraud", ["--n-transactions", "20000"]),   # its first 32 rows hold one class
    ("mnist", ["--sample", "400"]),               # its first rows are all one digit
])
def test_smoke_runs_on_the_shipped_use_cases(tmp_path, use_case, features):
    root = tmp_path / "store"
    assert _cli(root, "features", use_case, *features).exit_code == 0
    assert _cli(root, "dataset", use_case).exit_code == 0
    result = _cli(root, "train", use_case, "-t", "latest", "--smoke", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["final_loss"] < payload["initial_loss"]


def test_stratified_batch_holds_every_class_in_order():
    y = pd.DataFrame({"y": [0] * 500 + [1] * 3 + [0] * 100})
    rows = stratified_batch(y, 32)
    assert len(rows) == 32 and set(y.iloc[rows, 0]) == {0, 1}
    assert list(rows) == sorted(rows)
    assert (stratified_batch(y, 32) == rows).all()  # deterministic
    regression = pd.Series(np.linspace(0, 1, 100))
    assert list(stratified_batch(regression, 8)) == list(range(8))


def test_ray_temp_dir_fits_the_socket_budget_from_deep_folders(tmp_path, monkeypatch):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    long_tmp = tmp_path / ("t" * 80)
    long_tmp.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(long_tmp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    path, notes, created = _short_temp_dir(deep)
    try:
        assert created and notes
        assert len(str(path)) + RAY_SOCKET_SUFFIX <= SOCKET_PATH_MAX
    finally:
        path.rmdir()


@pytest.mark.slow
def test_a_ray_session_starts_from_a_long_working_directory(tmp_path, monkeypatch):
    deep = tmp_path / ("w" * 70) / ("x" * 70)
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    with ray_session(deep / "run", num_cpus=1) as notes:
        import ray

        assert ray.is_initialized()
        temp = Path(notes[0].split()[3])
    assert not temp.exists()  # the short folder is removed with the session
