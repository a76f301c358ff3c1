"""A full disk, for real: writes run in a child process whose file-size limit
(``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored) makes the kernel answer ``EFBIG`` to any write past
the limit, exactly as a full disk answers ``ENOSPC``. No file system or library is faked.

Each write (feature-group insert, training-dataset create, model save) must raise one typed
error naming the object and saying the disk is full; the store must read back as before, and
the next write (with space again) must succeed and leave no stray file behind.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
#: room for SQLite's 32 KiB shared-memory file and small catalog/index transactions, not for
#: the data files of the writes below (each several hundred KiB)
LIMIT = 96 * 1024
ROWS = 20_000


def _limited(limit: int = LIMIT) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


#: The command-line run's limit: above what a fresh store's catalog and its write-ahead log
#: reach (73,728 bytes since the spine, serving and extension tables; its WAL more), below the
#: adult feature group's first Delta file, so the disk fills where the test means it to.
CLI_LIMIT = 256 * 1024


def _cli_limited() -> None:
    _limited(CLI_LIMIT)


CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np, pandas as pd
    import feature_store
    from fstrain.kernel.errors import FeatureStoreError

    root, model_dir, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    project = feature_store.login(root=root)
    fs = project.get_feature_store()
    fg = fs.get_feature_group("g", version=1)
    fv = fs.get_feature_view("g_fv", version=1)
    mr = project.get_model_registry()
    new = pd.DataFrame({"id": np.arange(rows // 2, rows + rows // 2),
                        "v": np.random.default_rng(2).random(rows)})
    ops = {"insert": lambda: fg.insert(new),
           "dataset": lambda: fv.create_training_data(seed=2),
           "model": lambda: mr.python.create_model("m").save(model_dir)}
    for name, op in ops.items():
        try:
            op()
            out = {"op": name, "raised": None}
        except FeatureStoreError as exc:  # anything else fails the child with its traceback
            out = {"op": name, "raised": [c.__name__ for c in type(exc).__mro__],
                   "message": str(exc)}
        print(json.dumps(out), flush=True)
""")


def _files(root: Path) -> set[str]:
    """Every file of the store, SQLite's transient -wal/-shm files and lock files aside."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
            and not p.name.endswith(("-wal", "-shm", ".lock"))}


def _unreferenced_parts(fg) -> set[str]:
    """Parquet files in the group's Delta folder that no committed version references."""
    from deltalake import DeltaTable

    path = Path(fg._table.path)
    referenced: set[str] = set()
    for version in range(fg._table.version() + 1):
        table = DeltaTable(str(path), version=version)
        referenced |= {Path(uri).name for uri in table.file_uris()}
    return {p.name for p in path.glob("*.parquet")} - referenced


@pytest.fixture
def store(tmp_path):
    import feature_store

    root = tmp_path / "store"
    project = feature_store.login(root=root)
    fs = project.get_feature_store()
    fg = fs.create_feature_group("g", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": np.arange(ROWS), "v": np.random.default_rng(1).random(ROWS)}))
    fv = fs.create_feature_view("g_fv", version=1, query=fg.select_all())
    fv.create_training_data(seed=1)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "weights.bin").write_bytes(np.random.default_rng(3).bytes(4 * LIMIT))
    project.get_model_registry().python.create_model("other").save(str(model_dir))
    return root, model_dir


def test_writes_on_a_full_disk_raise_one_typed_error_and_change_nothing(store):
    import feature_store

    root, model_dir = store
    fs = feature_store.login(root=root).get_feature_store()
    before_rows = fs.get_feature_group("g", version=1).read()
    before_files = _files(root)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(root), str(model_dir), str(ROWS)],
                          env=env, capture_output=True, text=True, timeout=300, check=False,
                          preexec_fn=_limited)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {r["op"]: r for r in map(json.loads, proc.stdout.splitlines())}
    names = {"insert": "feature group 'g' v1", "dataset": "feature view 'g_fv' v1",
             "model": "Model 'm'"}
    for op, name in names.items():
        assert results[op]["raised"] is not None, f"{op} succeeded past the file-size limit"
        assert "BackendError" in results[op]["raised"]
        assert "FeatureStoreError" in results[op]["raised"]
        assert name in results[op]["message"] and "disk is full" in results[op]["message"]

    # nothing half-written is visible: the same files, rows, versions and models as before
    assert _files(root) == before_files
    project = feature_store.login(root=root)
    fs = project.get_feature_store()
    fg = fs.get_feature_group("g", version=1)
    pd.testing.assert_frame_equal(fg.read(), before_rows)
    fv = fs.get_feature_view("g_fv", version=1)
    assert [td.version for td in fv.get_training_datasets()] == [1]
    mr = project.get_model_registry()
    assert [(m.name, m.version) for m in mr.list_models()] == [("other", 1)]

    # with space again the same writes succeed, and leave no stray file behind
    fg.insert(pd.DataFrame({"id": [ROWS + 1], "v": [0.5]}))
    assert len(fg.read()) == ROWS + 1
    assert fv.create_training_data(seed=2)[0] == 2
    assert mr.python.create_model("m").save(str(model_dir)).version == 1
    assert _unreferenced_parts(fg) == set()
    strays = [p for p in root.rglob("*") if p.name.startswith((".staging", "stage-"))]
    assert strays == []


@pytest.mark.slow
def test_cli_on_a_full_disk_prints_one_line_and_exits_2(tmp_path):
    root = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "fstrain.cli.app", "features", "adult",
                           "--sample", "20000", "--root", str(root)],
                          env=env, capture_output=True, text=True, timeout=300, check=False,
                          preexec_fn=_cli_limited)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    ours = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    # delta-rs' object store also prints a Rust panic of its worker thread on stderr (not ours)
    assert len(ours) == 1 and proc.stderr.rstrip().endswith(ours[0]), proc.stderr[-3000:]
    assert "feature group 'adult_" in ours[0] and "disk is full" in ours[0]
    # the next run, with space again, completes and the groups hold the data
    rerun = subprocess.run([sys.executable, "-m", "fstrain.cli.app", "features", "adult",
                            "--sample", "20000", "--root", str(root)],
                           env=env, capture_output=True, text=True, timeout=300, check=False)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
