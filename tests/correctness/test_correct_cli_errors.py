"""Every user error of the CLI is one line and exit code 2, raised before any work is done."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app


def _run(root, *args, env=None):
    result = CliRunner().invoke(app, [*args, "--root", str(root)], env=env)
    return result


def _one_line_exit_2(result, *needles):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


TRAIN_ERRORS = [
    (["--model-name", "../evil"], ["model_name", "../evil"]),
    (["--model-name", "/abs/evil"], ["model_name", "/abs/evil"]),
    (["--model-name", "a/b"], ["model_name"]),
    (["--smoke", "--cv", "3"], ["--smoke", "--cv"]),
    (["--smoke", "--tune"], ["--smoke", "--tune"]),
    (["--smoke", "--resume"], ["--smoke", "--resume"]),
    (["--smoke", "--workers", "2"], ["--smoke", "--workers"]),
    (["--ray-address", "auto"], ["ray_address", "--tune"]),
    (["--tune", "--resume"], ["resume", "tune"]),
    (["--resume"], ["resume", "PyTorch", "xgboost"]),
    (["--param", "max_depth=abc"], ["params.max_depth", "'abc'"]),
    (["--param", "learning_rate=-1"], ["params.learning_rate", "-1"]),
    (["--param", "n_estimators=0"], ["params.n_estimators"]),
    (["--param", "subsample=1.5"], ["params.subsample"]),
    (["--param", "nonsense=1"], ["params.nonsense"]),
    (["--param", "no_equals_sign"], ["--param"]),
    (["--cv", "1"], ["cv"]),
]


@pytest.mark.parametrize(("extra", "needles"), TRAIN_ERRORS)
def test_train_refuses_before_any_work(tmp_path, extra, needles):
    root = tmp_path / "store"
    result = _run(root, "train", "adult", "-t", "1", *extra)
    _one_line_exit_2(result, *needles)
    assert not (root / "runs").exists()
    assert not (tmp_path / "evil").exists() and not os.path.exists("/abs/evil")


@pytest.mark.parametrize(("content", "needle"), [
    (None, "cannot be read"),
    ("params: {max_depth: [1, 2", "not valid YAML"),
    ("- a\n- b\n", "mapping"),
    ("just a string", "mapping"),
    (b"\xff\xfe\x00bad", "cannot be read"),
])
def test_train_config_file_errors(tmp_path, content, needle):
    path = tmp_path / "cfg.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    result = _run(tmp_path / "store", "train", "adult", "-t", "1", "--config", str(path))
    _one_line_exit_2(result, "--config", needle)


@pytest.mark.parametrize(("args", "needles"), [
    (["features", "ccfraud", "--sample", "10"], ["sample", "ccfraud"]),
    (["features", "adult", "--n-transactions", "500"], ["n_transactions", "adult"]),
    (["features", "nope"], ["nope"]),
    (["features", "adult", "--start", "not a time"], ["not a time"]),
    (["validate", "m:abc"], ["'m:abc'", "positive integer"]),
    (["validate", "m:0"], ["'m:0'"]),
    (["registry", "show", "m:abc"], ["abc"]),
    (["registry", "show", "../evil"], ["../evil"]),
])
def test_other_commands_refuse_bad_input(tmp_path, args, needles):
    root = tmp_path / "store"
    result = _run(root, *args)
    _one_line_exit_2(result, *needles)
    assert not (root / "feature_store" / "tables").exists()  # no feature group was written


@pytest.mark.parametrize("command", [["features", "adult"], ["registry", "list"],
                                     ["train", "adult", "-t", "1"]])
def test_store_root_that_is_a_file(tmp_path, command):
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = CliRunner().invoke(app, [*command, "--root", str(afile)])
    _one_line_exit_2(result, str(afile))
    assert afile.read_text() == "x"


@pytest.mark.parametrize("command", [["features", "adult"], ["train", "adult", "-t", "1"]])
def test_store_root_under_proc(command):
    result = CliRunner().invoke(app, [*command, "--root", "/proc"])
    _one_line_exit_2(result, "/proc")


# a read-only store root: tests/correctness/test_correct_read_only.py (a child process that
# cannot bypass folder permissions, so it runs as root too)


@pytest.mark.parametrize(("content", "needle"), [
    ("a: [1,\n", "not valid YAML at line 2"),
    ("- x\n", "mapping"),
    (None, "does not exist"),
    ("dir", "cannot be read"),
])
@pytest.mark.parametrize("command", [["jobs", "list", "--dry-run"], ["jobs", "deploy", "--dry-run"]])
def test_jobs_config_errors_are_one_line(tmp_path, content, needle, command):
    path = tmp_path / "jobs.yaml"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    result = CliRunner().invoke(app, [*command, str(path)])
    _one_line_exit_2(result, "jobs config", needle)


@pytest.mark.slow
def test_train_refuses_a_tampered_split_and_registers_nothing(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "store"
    assert _run(root, "features", "adult", "--sample", "1500").exit_code == 0
    assert _run(root, "dataset", "adult", "--seed", "1").exit_code == 0
    folder = next((root / "feature_store" / "training_datasets").iterdir()) / "1"
    path = folder / "train.parquet"
    table = pq.read_table(path)
    label = "income_over_50k"  # the adult view's label
    flipped = pa.array([None if v is None else (not v if isinstance(v, bool) else 1 - v)
                        for v in table.column(label).to_pylist()], table.schema.field(label).type)
    pq.write_table(table.set_column(table.column_names.index(label), label, flipped), path)
    result = _run(root, "train", "adult", "-t", "1", "--param", "n_estimators=5")
    _one_line_exit_2(result, "training dataset version 1", "sha256")
    assert not (root / "model_registry").exists() or not any(
        p.is_dir() and not p.name.startswith(".") for p in (root / "model_registry").iterdir())
