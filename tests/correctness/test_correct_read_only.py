"""A store root the user cannot write: one line, exit 2, nothing written, for real.

The tests run here as root, and root ignores folder permissions. So the CLI runs in a child
process that first gives up the capabilities that let root do so (``CAP_DAC_OVERRIDE``,
``CAP_DAC_READ_SEARCH``, ``CAP_FOWNER``, dropped from the bounding set so the ``exec`` cannot
regain them): the child is then bound by the folder's mode bits like any user. (Switching to an
unprivileged uid is not enough here: the interpreter lives under ``/root``, which such a user
cannot enter.) Run as any other user, the child needs nothing dropped.
"""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
_PR_CAPBSET_DROP = 24
_DAC_CAPABILITIES = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


def _bound_by_permissions() -> None:
    """In the child, before ``exec``: no capability to bypass file permissions."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in _DAC_CAPABILITIES:
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap})")


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "fstrain.cli.app", *args, "--root", str(root)],
                          env=env, capture_output=True, text=True, timeout=300, check=False,
                          preexec_fn=_bound_by_permissions)


def _one_line_exit_2(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(stat.S_IMODE(p.stat().st_mode) & ~0o222)


def _snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.fixture
def restore_write(request):
    folders: list[Path] = []
    yield folders.append
    for folder in folders:  # so that pytest can remove its temp folders
        for p in [folder, *folder.rglob("*")]:
            p.chmod(stat.S_IMODE(p.stat().st_mode) | 0o200)


def test_a_probe_child_really_cannot_write(tmp_path, restore_write):
    ro = tmp_path / "ro"
    ro.mkdir()
    _read_only(ro)
    restore_write(ro)
    probe = subprocess.run(["touch", str(ro / "x")], capture_output=True, check=False,
                           preexec_fn=_bound_by_permissions)
    assert probe.returncode != 0 and not (ro / "x").exists()


def test_features_into_a_read_only_root_is_one_line(tmp_path, restore_write):
    ro = tmp_path / "ro"
    ro.mkdir()
    _read_only(ro)
    restore_write(ro)
    _one_line_exit_2(_cli(ro, "features", "adult"), str(ro), "writable folder")
    assert list(ro.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("command", [["fg", "list"], ["registry", "list"],
                                     ["features", "adult", "--sample", "500"],
                                     ["train", "adult", "-t", "1"]])
def test_an_existing_read_only_store_is_one_line_and_unchanged(tmp_path, restore_write, command):
    import feature_store

    root = tmp_path / "store"
    project = feature_store.login(root=root)
    fg = project.get_feature_store().create_feature_group("g", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": np.arange(5), "v": np.arange(5.0)}))
    project.get_model_registry()  # the registry's index exists too
    _read_only(root)
    restore_write(root)
    before = _snapshot(root)
    _one_line_exit_2(_cli(root, *command), str(root), "writable folder")
    assert _snapshot(root) == before
