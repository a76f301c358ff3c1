"""Nothing left behind (issue 32): a refused training-dataset create writes nothing, not even
its view's folder, and says the one setting that is wrong; a create killed with SIGKILL leaves
a staging folder that records its writer, which the next create of any view removes (on the same
host) and ``vacuum`` removes once a day old (whatever host wrote it)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from fstrain.kernel.errors import InvalidArgumentError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sixty(fs):
    """60 rows without an event time; class ``rare`` of ``y`` has one row."""
    fg = fs.create_feature_group("sixty", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": range(60), "x": [float(i) for i in range(60)],
                            "y": ["rare"] + ["a", "b"] * 29 + ["a"]}))
    return fs.create_feature_view("sixty_fv", version=1, query=fg.select_all(), labels=["y"])


@pytest.mark.parametrize(("create", "message"), [
    (lambda fv: fv.create_train_test_split(test_size=0.001, seed=1),
     r"feature view 'sixty_fv' v1: Split 'test' is empty for 60 row\(s\): test_size=0\.001 gives "
     r"it none\. Raise test_size \(one row is 0\.017 of 60\)"),
    (lambda fv: fv.create_train_test_split(test_size=0.2, split="stratified", seed=1),
     r"feature view 'sixty_fv' v1: Stratified split on 'y': class 'rare' has 1 row\(s\)"),
    (lambda fv: fv.create_train_test_split(test_size=0.2, split="time", seed=1),
     r"feature view 'sixty_fv' v1 has no event time .*cannot take a time split \(test_size=0\.2\)"),
], ids=["tiny-test-size", "one-row-class", "time-without-event-time"])
def test_a_refused_create_writes_not_even_a_folder(fs, sixty, create, message):
    datasets = Path(fs.root) / "training_datasets"
    with pytest.raises(InvalidArgumentError, match=message) as info:
        create(sixty)
    assert "{" not in str(info.value)  # the setting, not the whole spec dict
    assert not datasets.exists()
    assert sixty.get_training_datasets() == []


def _cli(root: Path, *args: str):
    from fstrain.cli.app import app

    return CliRunner().invoke(app, [*args, "--root", str(root)])


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_dataset_cli_names_the_wrong_setting_and_writes_nothing(adult_copy):
    before = _tree(adult_copy)
    # the time split is refused from the use case before the store is read; the size once the
    # view's rows are counted
    for args, subject, setting in (
            (["--split", "time"], "use case 'adult'", "cannot be split by time"),
            (["--split", "random", "--test-size", "0.0001"], "feature view 'adult_income' v1",
             "test_size=0.0001")):
        out = _cli(adult_copy, "dataset", "adult", *args)
        assert out.exit_code == 2, out.output
        line = out.output.strip()
        assert "\n" not in line and setting in line and "{" not in line, line
        assert line.startswith(f"error: {subject}"), line
    assert _tree(adult_copy) == before


def _staging_of_killed_create(root: Path) -> Path:
    """A real create in a child process that SIGKILLs itself once its files are staged."""
    script = textwrap.dedent("""
        import os, signal, sys
        import feature_store
        from feature_store.local.training_data.store import TrainingDataStore

        original = TrainingDataStore._create_streamed
        def killed(*args, **kwargs):
            original(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        TrainingDataStore._create_streamed = killed
        fv = feature_store.login(root=sys.argv[1]).get_feature_store().get_feature_view(
            "adult_income", 1)
        fv.create_training_data(seed=7)
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    folder = root / "feature_store" / "training_datasets" / "adult_income_1"
    (staging,) = folder.glob(".staging-*")
    owner = json.loads((staging / ".owner.json").read_text())
    assert owner["host"] == socket.gethostname() and owner["pid"] != os.getpid()
    assert owner["process_start"] and owner["created_at"]
    return staging


def test_the_next_create_removes_a_killed_create_s_staging(adult_copy):
    staging = _staging_of_killed_create(adult_copy)
    views = staging.parent.parent
    # a pid that is running now, but recorded with another start time: reused, so stale
    reused = views / "other_fv_1" / ".staging-1-reused"
    reused.mkdir(parents=True)
    (reused / ".owner.json").write_text(json.dumps({
        "host": socket.gethostname(), "pid": os.getpid(), "process_start": "1",
        "created_at": "2026-01-01T00:00:00+00:00", "created_unix": time.time()}))
    elsewhere = views / "other_fv_1" / ".staging-1-elsewhere"  # another host: its own business
    elsewhere.mkdir()
    (elsewhere / ".owner.json").write_text(json.dumps({
        "host": "another-host", "pid": 1, "process_start": "1",
        "created_at": "2026-01-01T00:00:00+00:00", "created_unix": time.time() - 3600}))
    out = _cli(adult_copy, "dataset", "adult", "--seed", "3")
    assert out.exit_code == 0, out.output
    assert not staging.exists() and not reused.exists() and elsewhere.exists()
    assert not any(p.name == ".owner.json" for p in staging.parent.rglob("*"))  # not in versions

    import feature_store

    fg = feature_store.login(root=adult_copy).get_feature_store().get_feature_group(
        "adult_employment", 1)
    assert "training_datasets/other_fv_1/.staging-1-elsewhere" not in fg.vacuum(dry_run=True)
    record = json.loads((elsewhere / ".owner.json").read_text())
    record["created_unix"] = time.time() - 25 * 3600  # a day old: vacuum takes it
    (elsewhere / ".owner.json").write_text(json.dumps(record))
    assert "training_datasets/other_fv_1/.staging-1-elsewhere" in fg.vacuum(dry_run=True)
    assert elsewhere.exists()
    assert "training_datasets/other_fv_1/.staging-1-elsewhere" in fg.vacuum()
    assert not elsewhere.exists()
