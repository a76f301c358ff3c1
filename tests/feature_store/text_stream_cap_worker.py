"""Subprocess of the bounded-memory test of streamed csv/jsonl reads (not a test module itself).

    python text_stream_cap_worker.py STORE_ROOT VERSION read|torch|peak CAP_MB

Imports and warms up everything first (a shuffled torch pass over the view ``tiny``'s version of
the same format), then caps its data segment (``RLIMIT_DATA``: heap and private writable
mappings, where Arrow's, numpy's and torch's buffers live) at CAP_MB above what it holds now, and
reads version VERSION of the view ``big``:

- ``read``: in memory (``get_train_test_split``); exits 3 on running out of memory, 0 if it fit;
- ``torch``: the train split as a shuffled torch dataset (verified and indexed, then every row
  once); prints a JSON line with its row count, feature and label sums and the growth;
- ``peak``: no cap; prints how much each read grows the data segment (to size the cap).
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: memory_cap
from memory_cap import exit_code_under_cap, vm


def _stream(fv, version: int) -> dict:
    train, _ = fv.get_train_test_split(version, dataframe_type="torch")
    rows, x_sum, y_sum = 0, 0.0, 0.0
    for x, y in train.shuffled(4096, 1):
        rows += 1
        x_sum += float(x.double().sum())
        y_sum += float(y)
    return {"rows": rows, "x_sum": x_sum, "y_sum": y_sum}


def main() -> int:
    root, version, mode, cap_mb = sys.argv[1:5]
    import pyarrow as pa
    import torch

    import feature_store

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    torch.set_num_threads(1)
    fs = feature_store.login(root=root).get_feature_store()
    tiny = fs.get_feature_view("tiny", 1)
    big = fs.get_feature_view("big", 1)
    data_format = big.get_training_dataset(int(version)).data_format
    (warm,) = [t.version for t in tiny.get_training_datasets() if t.data_format == data_format]
    _stream(tiny, warm)  # load and start everything
    base = vm("VmData")
    if mode == "peak":
        _stream(big, int(version))
        print(f"torch: data segment +{(vm('VmData') - base) / 2**20:.0f} MiB", flush=True)
        frames = big.get_train_test_split(int(version))
        print(f"in memory ({len(frames[0])} train rows): data segment +{(vm('VmData') - base) / 2**20:.0f} MiB", flush=True)
        return 0
    limit = base + int(cap_mb) * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if mode == "read":
        return exit_code_under_cap(lambda: big.get_train_test_split(int(version)), "in memory")
    result = _stream(big, int(version))
    result["growth_mib"] = (vm("VmData") - base) / 2**20
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
