"""kill -9 at the moments that used to leave debris or broken state, then a normal next call.

Each child process runs the real code with one function wrapped so that the process SIGKILLs
itself right after that function returns: the exact moment named by the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import os, signal, sys
import pandas as pd
import feature_store

def kill_after(owner, name):
    original = getattr(owner, name)
    def wrapped(*args, **kwargs):
        out = original(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return out
    setattr(owner, name, wrapped)

project = feature_store.login(root=sys.argv[1])
"""


def _killed_child(root: Path, body: str) -> None:
    script = PRELUDE + textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script, str(root)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


def test_kill_between_delta_folder_and_catalog_row(tmp_path):
    import feature_store

    root = tmp_path / "store"
    _killed_child(root, """
        from feature_store.local.storage.delta_table import DeltaFeatureTable
        kill_after(DeltaFeatureTable, "create")
        fs = project.get_feature_store()
        fg = fs.create_feature_group("g", version=1, primary_key=["id"])
        fg.insert(pd.DataFrame({"id": [1], "old": ["x"]}))
    """)
    fs = feature_store.login(root=root).get_feature_store()
    assert fs.catalog.query("SELECT * FROM feature_groups") == []
    assert (root / "feature_store" / "tables" / "g_1").exists()  # the orphan folder
    fg = fs.create_feature_group("g", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1], "new": [2.0]}))
    again = fs.get_feature_group("g", version=1)
    assert [f.name for f in again.features] == ["id", "new"] == again._table.schema().names
    assert list(again.read()["new"]) == [2.0]


def test_kill_after_staging_a_training_dataset(tmp_path):
    import feature_store

    root = tmp_path / "store"
    fs = feature_store.login(root=root).get_feature_store()
    fg = fs.create_feature_group("g", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": list(range(10)), "v": [float(i) for i in range(10)]}))
    fs.create_feature_view("g_fv", version=1, query=fg.select_all())
    _killed_child(root, """
        from feature_store.local.training_data.store import TrainingDataStore
        kill_after(TrainingDataStore, "_create_streamed")  # files staged, no version yet
        fv = project.get_feature_store().get_feature_view("g_fv", version=1)
        fv.create_training_data(seed=1)
    """)
    folder = root / "feature_store" / "training_datasets" / "g_fv_1"
    assert [p.name for p in folder.iterdir() if p.name.startswith(".staging")]  # debris left
    fv = fs.get_feature_view("g_fv", version=1)
    assert fv.get_training_datasets() == []
    version, _ = fv.create_training_data(seed=1)
    assert version == 1
    assert [p.name for p in folder.iterdir() if p.name.startswith(".staging")] == []
    x, _ = fv.get_training_data(version)
    assert len(x) == 10


def test_kill_while_saving_a_model_version(tmp_path):
    import feature_store

    root = tmp_path / "store"
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "w.bin").write_bytes(b"weights")
    _killed_child(root, f"""
        import model_registry.local.model_storage as storage_module
        kill_after(storage_module, "write_manifest")
        mr = project.get_model_registry()
        mr.python.create_model("m", metrics={{"acc": 0.5}}).save({str(model_dir)!r})
    """)
    mr = feature_store.login(root=root).get_model_registry()
    tmp = mr.root / ".tmp"
    assert any(p.name.startswith("stage-") for p in tmp.iterdir())  # debris left
    assert mr.list_models() == []
    saved = mr.python.create_model("m", metrics={"acc": 0.5}).save(model_dir)
    assert saved.version == 1
    assert not any(p.name.startswith("stage-") for p in tmp.iterdir())
