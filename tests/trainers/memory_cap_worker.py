"""Subprocess of the larger-than-memory test (not a test module itself).

    python memory_cap_worker.py STORE_ROOT VERSION read|train|peak CAP_MB OUT_DIR

Imports and warms up everything first, then caps its data segment (``RLIMIT_DATA``: heap and
private writable mappings, which Arrow's, numpy's and torch's buffers live in) at CAP_MB above
what it holds now, and:

- ``read``: reads the version in memory (``get_train_validation_test_split``); exits 3 on
  MemoryError, 0 if the read fit;
- ``train``: trains an MLP from the streamed version (``torch.streaming``) and saves the model to
  OUT_DIR/model, its metrics to OUT_DIR/metrics.json;
- ``peak``: no cap; prints how much the in-memory read and streamed training grow the data
  segment (to size the cap when the data changes).
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: memory_cap
from memory_cap import vm

CONFIG = {"model": "mlp", "seed": 3, "params": {"hidden_sizes": [16], "dropout": 0.0},
          "torch": {"epochs": 1, "batch_size": 1024, "lr": 0.01, "streaming": True,
                    "shuffle_buffer": 8192, "device": "cpu", "amp": "off"}}


def _warm_up(out_dir: Path) -> None:
    """Load every library and start the thread pools before the cap, by one streamed training
    on 300 rows (shared libraries' data segments and thread stacks count in VmData too, and are
    not what the cap measures)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import torch

    from fstrain.trainers.config import load_config
    from fstrain.trainers.stream.source import StreamSource
    from fstrain.trainers.torch_models import train_torch_streamed

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    X = pd.DataFrame({f"f{i}": rng.normal(size=300) for i in range(3)})
    y = pd.DataFrame({"label": (X["f0"] > 0).astype(np.int64)})
    source = StreamSource.from_frames(out_dir / "warm", {"train": (X, y), "validation": (X, y)})
    train_torch_streamed(load_config(CONFIG), source, workdir=out_dir / "warm" / "run")


def main() -> int:
    root, version, mode, cap_mb, out = sys.argv[1:6]
    import feature_store
    from fstrain.trainers.stream.source import TORCH_STREAMING, version_source
    from fstrain.trainers.config import load_config
    from fstrain.trainers.torch_models import train_torch_streamed

    out_dir = Path(out)
    _warm_up(out_dir)
    fv = feature_store.login(root=root).get_feature_store().get_feature_view("big", 1)
    base = vm("VmData")
    if mode != "peak":
        limit = base + int(cap_mb) * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if mode in ("read", "peak"):
        try:
            frames = fv.get_train_validation_test_split(int(version))
        except MemoryError:
            print("in-memory read: MemoryError", flush=True)
            return 3
        print(f"in-memory read: {sum(f.memory_usage(deep=True).sum() for f in frames) / 2**20:.0f} "
              f"MiB of frames, data segment +{(vm('VmData') - base) / 2**20:.0f} MiB", flush=True)
        if mode == "read":
            return 0
        del frames
    source = version_source(fv, int(version), reader=TORCH_STREAMING)
    result = train_torch_streamed(load_config(CONFIG), source, workdir=out_dir / "run")
    result.model.save(_mkdir(out_dir / "model"))
    (out_dir / "metrics.json").write_text(json.dumps(
        {"metrics": result.metrics, "train_rows": source.rows("train"),
         "growth_mib": (vm("VmData") - base) / 2**20}))
    print(f"streamed training: data segment +{(vm('VmData') - base) / 2**20:.0f} MiB", flush=True)
    return 0


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
