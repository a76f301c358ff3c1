"""Subprocess of the larger-than-memory csv/jsonl test (not a test module itself).

    python text_memory_cap_worker.py STORE_ROOT FORMAT memory|stream|peak CAP_MB

Imports and warms up everything first (a streamed create of the small view ``tiny``), then caps
its data segment (``RLIMIT_DATA``: heap and private writable mappings, where Arrow's, numpy's and
DuckDB's buffers live) at CAP_MB above what it holds now, and creates a FORMAT version of the
view ``big``:

- ``memory``: built in memory (the whole-table path, ``stream=None``); exits 3 on running out
  of memory, 0 if it fit;
- ``stream``: created out of core (``create_train_test_split``, the default path) and verified;
  prints the version and how much the data segment grew;
- ``peak``: no cap; prints how much each path grows the data segment (to size the cap).
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: memory_cap
from memory_cap import create_in_memory, out_of_memory, vm

WRITE_OPTIONS = {"batch_rows": 16_384, "memory_limit": "256MB"}


def _streamed(fv, data_format: str) -> int:
    version, _ = fv.create_train_test_split(test_size=0.25, seed=1, data_format=data_format,
                                            write_options=WRITE_OPTIONS)
    fv.verify_training_dataset(version)
    return version


def main() -> int:
    root, data_format, mode, cap_mb = sys.argv[1:5]
    import pyarrow as pa

    import feature_store

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    fs = feature_store.login(root=root).get_feature_store()
    _streamed(fs.get_feature_view("tiny", 1), data_format)  # load and start everything
    fv = fs.get_feature_view("big", 1)
    base = vm("VmData")
    if mode == "peak":
        version = _streamed(fv, data_format)
        print(f"streamed: data segment +{(vm('VmData') - base) / 2**20:.0f} MiB", flush=True)
        create_in_memory(fv, data_format)
        print(f"in memory: data segment +{(vm('VmData') - base) / 2**20:.0f} MiB", flush=True)
        return 0
    limit = base + int(cap_mb) * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    try:
        version = create_in_memory(fv, data_format) if mode == "memory" else _streamed(fv, data_format)
    except Exception as exc:  # DuckDB and the store wrap running out of memory
        if not out_of_memory(exc) or mode != "memory":
            raise
        print(f"in memory: out of memory ({type(exc).__name__})", flush=True)
        return 3
    print(f"{mode}: version {version}, data segment +{(vm('VmData') - base) / 2**20:.0f} MiB",
          flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
