"""Data-parallel kill-and-resume: two gloo ranks, rank 1 killed with SIGKILL mid-epoch; the
resumed run ends with bitwise the weights and history of an uninterrupted one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("ddp_resume_worker.py")


def _run(workdir: Path, mode: str, kill_at: int = -1) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, str(WORKER), str(workdir), mode, str(kill_at)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_two_rank_resume_after_sigkill_equals_uninterrupted(tmp_path):
    from safetensors.torch import load_file

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
    a, b = load_file(str(full / "final.safetensors")), load_file(str(killed / "final.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key].numpy(), b[key].numpy()), key  # bitwise
    ha = json.loads((full / "history.json").read_text())
    hb = json.loads((killed / "history.json").read_text())
    assert hb["resumed_from"]["global_step"] == 16
    assert ha["history"] == hb["history"]  # including the resumed epoch's all-reduced loss
