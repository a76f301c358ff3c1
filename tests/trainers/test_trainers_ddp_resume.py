"""Data-parallel kill-and-resume: two gloo ranks, rank 1 killed with SIGKILL mid-epoch; the
resumed run ends with bitwise the weights and history of an uninterrupted one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("ddp_resume_worker.py")


def _run(workdir: Path, mode: str, kill_at: int = -1) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, str(WORKER), str(workdir), mode, str(kill_at)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_two_rank_resume_after_sigkill_equals_uninterrupted(tmp_path,
                                                           assert_resumed_run_equals_full):
    full, killed = tmp_path / "full", tmp_path / "killed"
    proc = _run(full, "full")
    assert proc.returncode == 0, proc.stderr
    proc = _run(killed, "kill", 17)  # checkpoints every 4 steps: the last one is step 16
    assert proc.returncode != 0 and "SIGKILL" in proc.stderr, proc.stderr
    assert not (killed / "final.safetensors").exists()
    meta = json.loads((killed / "checkpoints" / "last" / "state.json").read_text())
    assert meta["loop"]["global_step"] == 16 and meta["loop"]["batch_in_epoch"] > 0
    assert len(meta["rng_by_rank"]) == 2 and meta["world_size"] == 2
    proc = _run(killed, "resume")
    assert proc.returncode == 0, proc.stderr
    # history includes the resumed epoch's all-reduced train loss
    assert_resumed_run_equals_full(full, killed, resumed_from_step=16)
