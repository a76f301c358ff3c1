"""Subprocess of the distributed-boosting memory test (not a test module itself).

    python boosting_cap_worker.py STORE_ROOT VERSION read|train|peak CAP_MB OUT_DIR RAY_TEMP

Starts a local Ray (2 CPUs; its processes start before the cap, so only this driver is capped),
warms up on 300 rows (the driver's streamed fit, a Ray Data read, a one-process XGBoost run and
its save: libraries and their buffers), then caps its data segment (``RLIMIT_DATA``) at CAP_MB above what it holds now:

- ``read``: reads the version in memory (``get_train_validation_test_split``) under the same
  cap, without Ray; exits 3 on MemoryError, 0 if the read fit;
- ``train``: trains XGBoost on 2 Ray Train workers from the version's files
  (:func:`fstrain.trainers.ray_boosting.train_boosting_on_ray`) and saves the model to
  OUT_DIR/model, its metrics and distributed record to OUT_DIR/result.json;
- ``peak``: no cap; prints how much the distributed run grows the data segment (to size the
  cap when the data changes).

Ray is always shut down before the process exits.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

from fstrain.trainers.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: memory_cap
from memory_cap import vm

CONFIG = {"model": "xgboost", "seed": 3, "params": {"n_estimators": 20, "max_depth": 4},
          "early_stopping_rounds": 5}


def _train(source, workdir: Path):
    from fstrain.trainers.ray_boosting import train_boosting_on_ray

    return train_boosting_on_ray(load_config(CONFIG), source, workdir=workdir, num_workers=2,
                                 num_cpus=2)


def _warm_up(out_dir: Path) -> None:
    """Load every library before the cap by running the driver's parts on 300 rows (shared
    libraries' data segments count in VmData too, and are not what the cap measures). Ray
    Train's first fit in the process then grows the segment by ~10 MiB, within the cap."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from fstrain.trainers.stream.source import StreamSource

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    rng = np.random.default_rng(0)
    X = pd.DataFrame({f"f{i}": rng.normal(size=300) for i in range(3)})
    y = pd.DataFrame({"label": (X["f0"] > 0).astype(np.int64)})
    source = StreamSource.from_frames(out_dir / "warm", {"train": (X, y), "validation": (X, y)})
    import ray.data
    import ray.train.xgboost  # noqa: F401

    from fstrain.trainers import train
    from fstrain.trainers.ray_boosting import StreamedFit
    from fstrain.trainers.stream.ray_feed import pieces_dataset
    from fstrain.trainers.stream.split import SplitStream

    fitted = StreamedFit(load_config(CONFIG), source, framework="xgboost")
    fitted.fingerprint()
    pieces_dataset(SplitStream(source, "train", fitted.prep), [(0, 0, 300)]).take_all()
    result = train(CONFIG, X, y, X, y, workdir=out_dir / "warm" / "run")
    result.model.save(_mkdir(out_dir / "warm" / "model"))


def _cap(cap_mb: int) -> int:
    """Cap the data segment at ``cap_mb`` MiB above what it holds now; the base."""
    base = vm("VmData")
    limit = base + cap_mb * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.RLIM_INFINITY))
    return base


def _read(root: str, version: int, cap_mb: int) -> int:
    """The in-memory read under the same cap (no Ray needed to show it does not fit)."""
    import feature_store

    fv = feature_store.login(root=root).get_feature_store().get_feature_view("big", 1)
    base = _cap(cap_mb)
    try:
        fv.get_train_validation_test_split(version)
    except MemoryError:
        print("in-memory read: MemoryError", flush=True)
        return 3
    print(f"in-memory read: data segment +{(vm('VmData') - base) / 2**20:.0f} MiB", flush=True)
    return 0


def _run(root: str, version: int, mode: str, cap_mb: int, out_dir: Path) -> int:
    import feature_store
    from fstrain.trainers.stream.source import RAY_BOOSTING, version_source

    _warm_up(out_dir)
    fv = feature_store.login(root=root).get_feature_store().get_feature_view("big", 1)
    base = vm("VmData") if mode == "peak" else _cap(cap_mb)
    source = version_source(fv, version, reader=RAY_BOOSTING)
    result = _train(source, out_dir / "run")
    result.model.save(_mkdir(out_dir / "model"))
    growth = (vm("VmData") - base) / 2**20
    (out_dir / "result.json").write_text(json.dumps(
        {"metrics": result.metrics, "distributed": result.extra["distributed"],
         "train_rows": source.rows("train"), "growth_mib": growth}))
    print(f"distributed boosting: data segment +{growth:.0f} MiB", flush=True)
    return 0


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def main() -> int:
    root, version, mode, cap_mb, out, ray_temp = sys.argv[1:7]
    if mode == "read":
        return _read(root, int(version), int(cap_mb))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=ray_temp, log_to_driver=False)
    try:
        return _run(root, int(version), mode, int(cap_mb), Path(out))
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY,) * 2)
        ray.shutdown()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
