"""Subprocess of the flat-memory test (not a test module itself).

    python flat_memory_worker.py STORE_ROOT VIEW memory|stream CAP_MIB [SPLIT [OPTIONS]]

Imports and warms up everything first (a streamed create of the small view ``tiny``), then caps
its data segment (``RLIMIT_DATA``) at CAP_MIB above what it holds now and creates a version of
VIEW under :data:`WRITE_OPTIONS` (a SPLIT split: ``random`` unless given; ``group`` on the
column ``grp``; OPTIONS: JSON of write options replacing these), sampling the data segment (VmData) every few milliseconds:

- ``memory``: built in memory (the whole-table path); exits 3 on running out of memory;
- ``stream``: created out of core (the default path); prints one JSON line: the version's rows,
  the hash partitions the joins ran in and the peak growth of the data segment and of the resident set (VmHWM, reset first) in MiB,
  and the split assignment's own peak growth of the data segment (``assign_mib``).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: memory_cap
from memory_cap import create_in_memory, out_of_memory, vm

WRITE_OPTIONS = {"batch_rows": 65_536, "memory_limit": "64MB"}


class _Peak:
    """The largest VmData seen by a sampling thread until :meth:`stop`."""

    def __init__(self) -> None:
        self.peak, self._done = vm(), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            self.peak = max(self.peak, vm())

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return max(self.peak, vm())


def _measure_assignments() -> list[int]:
    """The peak growth of the data segment while each out-of-core split assignment runs (the
    dispatch's ``assign``, measured from its start), appended as each ends."""
    from feature_store.local.training_data.store import TrainingDataStore

    grown: list[int] = []
    make = TrainingDataStore._streamed_assigner

    def measured(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        assign = make(self, *args, **kwargs)

        def run(read, rows, alloc):  # type: ignore[no-untyped-def]
            start, peak = vm(), _Peak()
            try:
                return assign(read, rows, alloc)
            finally:
                grown.append(peak.stop() - start)

        return run

    TrainingDataStore._streamed_assigner = measured  # type: ignore[method-assign]
    return grown


def main() -> int:
    root, view, mode, cap_mib = sys.argv[1:5]
    split = sys.argv[5] if len(sys.argv) > 5 else "random"
    how = {"split": split, **({"group_column": "grp"} if split == "group" else {})}
    options = {**WRITE_OPTIONS, **(json.loads(sys.argv[6]) if len(sys.argv) > 6 else {})}
    import pyarrow as pa

    import feature_store
    from feature_store.local.query import partitioned_join as pj

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    fs = feature_store.login(root=root).get_feature_store()
    fs.get_feature_view("tiny", 1).create_train_test_split(test_size=0.25, seed=1,
                                                           write_options=options, **how)
    fv = fs.get_feature_view(view, 1)
    buckets: list[int] = []
    init = pj.PartitionedQuery.__init__

    def counted(self, con, compiled, count, *args, **kwargs):  # type: ignore[no-untyped-def]
        buckets.append(count)
        init(self, con, compiled, count, *args, **kwargs)

    pj.PartitionedQuery.__init__ = counted  # type: ignore[method-assign]
    assigning = _measure_assignments()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from the current RSS
    base, resident = vm(), vm("VmRSS")
    resource.setrlimit(resource.RLIMIT_DATA, (base + int(cap_mib) * 2**20,) * 2)
    peak = _Peak()
    try:
        if mode == "memory":
            create_in_memory(fv)
        else:
            version, _ = fv.create_train_test_split(test_size=0.25, seed=1,
                                                    write_options=options, **how)
    except Exception as exc:  # DuckDB and the store wrap running out of memory
        if not out_of_memory(exc) or mode != "memory":
            raise
        print(f"in memory: out of memory ({type(exc).__name__})", flush=True)
        return 3
    grown = (peak.stop() - base) / 2**20
    if mode == "memory":
        print(f"in memory: fit, data segment +{grown:.0f} MiB", flush=True)
        return 0
    splits = fv.get_training_dataset(version).splits
    print(json.dumps({"rows": sum(s["rows"] for s in splits.values()), "buckets": buckets,
                      "peak_mib": round(grown, 1),
                      "rss_peak_mib": round((vm("VmHWM") - resident) / 2**20, 1),
                      "assign_mib": round(max(assigning, default=0) / 2**20, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
