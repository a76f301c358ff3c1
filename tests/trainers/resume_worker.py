"""Subprocess used by the kill-and-resume test (not a test module itself).

    python resume_worker.py WORKDIR full|kill|resume [KILL_AT_STEP]

Trains a small MLP deterministically on CPU; ``kill`` sends itself SIGKILL right after
optimizer step KILL_AT_STEP (between two checkpoints); every mode that finishes writes the final
weights to WORKDIR/final.safetensors and the history to WORKDIR/history.json.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def data():
    rng = np.random.default_rng(11)
    n = 800
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                      "c": rng.choice(["u", "v", "w"], n)})
    y = pd.DataFrame({"label": ((X["a"] - X["b"] + (X["c"] == "u")) > 0).astype(int)})
    return X[:600], y[:600], X[600:], y[600:]


CONFIG = {
    "model": "mlp",
    "seed": 5,
    "params": {"hidden_sizes": [32, 16], "dropout": 0.2},
    "torch": {"epochs": 4, "batch_size": 32, "lr": 0.01, "grad_accum_steps": 2,
              "scheduler": "warmup_cosine", "warmup_steps": 5, "deterministic": True,
              "checkpoint_every_steps": 4, "patience": None, "device": "cpu"},
}


def main() -> None:
    workdir, mode = Path(sys.argv[1]), sys.argv[2]
    kill_at = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    from safetensors.torch import save_file

    from fstrain.trainers.config import load_config
    from fstrain.trainers.torch_models import train_torch

    def on_step(step: int) -> None:
        if mode == "kill" and step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    result = train_torch(load_config(CONFIG), *data(), workdir=workdir,
                         lineage={"training_dataset": "synthetic", "version": 1},
                         resume=(mode == "resume"), on_step=on_step)
    state = {k: v.contiguous() for k, v in result.model.module.state_dict().items()}
    save_file(state, str(workdir / "final.safetensors"))
    (workdir / "history.json").write_text(json.dumps(
        {"history": [{k: v for k, v in r.items() if not k.endswith("_seconds")} for r in result.history],
         "resumed_from": result.extra["resumed_from"]}))


if __name__ == "__main__":
    main()
