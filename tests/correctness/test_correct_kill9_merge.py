"""kill -9 inside a Delta merge (an upsert that updates every row and adds one).

A child process upserts; this process watches the table folder and SIGKILLs the child the
moment the merge's first new file appears there (delta-rs writes data files before the commit
file, so the kill lands between the two), or at random moments of a loop of upserts. Afterwards
the group must read back exactly the state before or after one upsert, never a mix; the next
upsert must work; ``vacuum`` must remove what the killed merge left.

State after upsert ``k``: ids ``0 .. N+k-1``, every ``v == k``. So a torn read (some rows
updated, others not, or the row count of one upsert with the values of another) is visible.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
N = 300_000

CHILD = textwrap.dedent("""
    import sys
    import numpy as np, pandas as pd
    import feature_store

    root, first, n, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    fg = feature_store.login(root=root).get_feature_store().get_feature_group("m", version=1)
    for k in range(first, first + count):
        rows = pd.DataFrame({"id": np.arange(n + k), "v": np.full(n + k, float(k))})
        print(f"begin {k}", flush=True)
        fg.insert(rows)
        print(f"end {k}", flush=True)
""")


def _group(root: Path):
    import feature_store

    return feature_store.login(root=root).get_feature_store().get_feature_group("m", version=1)


def _start(root: Path, first: int, count: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # the child runs at the lowest priority, so that on a loaded machine the watcher here still
    # gets the CPU while the merge writes (the merge itself is unchanged, only slower)
    return subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(first), str(N),
                             str(count)], env=env, stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: os.nice(19))


def _state(root: Path) -> int:
    """The upsert whose state the group reads back; fails on any mix of two states."""
    frame = _group(root).read()
    values = frame["v"].unique()
    assert len(values) == 1, f"torn read: values {sorted(values)[:5]}"
    k = int(values[0])
    assert len(frame) == N + k and sorted(frame["id"]) == list(range(N + k)), "torn read: rows"
    return k


def _change_data_files(path: Path) -> set[str]:
    """The change-data files (``_change_data/``) that the log's commits name in ``cdc`` actions."""
    named: set[str] = set()
    for log in (path / "_delta_log").glob("*.json"):
        for line in log.read_text().splitlines():
            if line.strip() and "cdc" in (action := json.loads(line)):
                named.add(Path(action["cdc"]["path"]).name)
    return named


def _debris(fg) -> set[str]:
    """Entries of the table folder that no committed version references: data files, and the
    change data feed's files (new tables keep one) that no commit's ``cdc`` action names."""
    from deltalake import DeltaTable

    path = Path(fg._table.path)
    referenced: set[str] = _change_data_files(path)
    for version in range(fg._table.version() + 1):
        referenced |= {Path(u).name for u in DeltaTable(str(path), version=version).file_uris()}
    entries = {p.name for p in path.iterdir() if p.name not in ("_delta_log", "_change_data")}
    changes = path / "_change_data"
    entries |= {p.name for p in changes.iterdir()} if changes.is_dir() else set()
    return entries - referenced


@pytest.fixture
def root(tmp_path):
    import feature_store

    root = tmp_path / "store"
    fs = feature_store.login(root=root).get_feature_store()
    fg = fs.create_feature_group("m", version=1, primary_key=["id"], statistics_config=False)
    fg.insert(pd.DataFrame({"id": np.arange(N), "v": np.zeros(N)}))
    return root


def _kill_when_a_file_appears(root: Path, first: int) -> bool:
    """Run one upsert in a child and kill it as soon as the merge writes its first file;
    whether the kill landed inside the merge (no new commit, a file left behind)."""
    fg = _group(root)
    folder = Path(fg._table.path)
    before, version = set(os.listdir(folder)), fg._table.version()
    child = _start(root, first, 1)
    assert child.stdout.readline().strip() == f"begin {first}"
    while child.poll() is None and set(os.listdir(folder)) <= before:
        pass  # spin: the merge's window between its data files and its commit is short
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    child.stdout.close()
    return _group(root)._table.version() == version and bool(_debris(_group(root)))


@pytest.mark.slow
def test_kill_inside_a_merge_reads_back_one_whole_state(root):
    landed = False
    state = 0
    trials = []
    for first in range(1, 9):  # a loaded machine may let a merge reach its commit first
        landed = _kill_when_a_file_appears(root, first)
        previous, state = state, _state(root)
        trials.append((first, landed, previous, state))
        assert state == previous if landed else state in (previous, first), trials
        if landed:
            break
    assert landed, f"no kill landed between the merge's data files and its commit: {trials}"
    fg = _group(root)
    assert _debris(fg)  # the killed merge's files are there, unreferenced
    fg.insert(pd.DataFrame({"id": np.arange(N + 9), "v": np.full(N + 9, 9.0)}))
    assert _state(root) == 9
    fg.vacuum(retention_hours=0)
    assert _debris(fg) == set()


@pytest.mark.slow
def test_kill_at_random_moments_of_a_loop_of_upserts(root):
    rng = random.Random(16)
    first, state = 1, 0
    for _ in range(6):
        child = _start(root, first, 50)
        begun = int(child.stdout.readline().split()[1])
        time.sleep(rng.uniform(0.0, 1.5))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        words = child.stdout.read().split()
        child.stdout.close()
        pairs = list(zip(words[::2], words[1::2], strict=False))
        started = [begun] + [int(k) for what, k in pairs if what == "begin"]
        ended = [int(k) for what, k in pairs if what == "end"]
        previous, state = state, _state(root)
        # the last finished upsert's state, or the one the kill interrupted if it committed
        assert state in (max(ended, default=previous), max(started)), (state, started, ended)
        first = max(started) + 1
    fg = _group(root)
    fg.insert(pd.DataFrame({"id": np.arange(N + first), "v": np.full(N + first, float(first))}))
    assert _state(root) == first
    fg.vacuum(retention_hours=0)
    assert _debris(fg) == set()


@pytest.mark.parametrize("folder", ["", "_change_data"])
def test_vacuum_removes_the_upload_staging_file_of_a_killed_writer(root, folder):
    """delta-rs writes a data file, or a change-data file of a merge, as ``<name>#<n>`` and
    renames it; a writer killed before the rename leaves that file, which Delta's own vacuum
    does not always see (a change-data one left so made the kill test above flap)."""
    fg = _group(root)
    (Path(fg._table.path) / folder).mkdir(exist_ok=True)
    staged = Path(fg._table.path) / folder / "part-00001-0000-c000.snappy.parquet#1"
    staged.write_bytes(b"half a parquet file")
    assert staged.name in _debris(fg)
    assert staged.name in fg.vacuum(retention_hours=0, dry_run=True) and staged.exists()
    assert staged.name not in fg.vacuum(retention_hours=1)  # younger than the retention
    assert staged.name in fg.vacuum(retention_hours=0)
    assert not staged.exists() and _debris(fg) == set()
    assert _state(root) == 0

