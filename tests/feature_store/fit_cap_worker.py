"""Subprocess of the bounded-memory test of fitting transformations (not a test module itself).

    python fit_cap_worker.py SPLIT_FILE whole|stream CAP_MB

Imports and warms up first (both fits of the file's first 1,000 rows), then caps its data segment
(``RLIMIT_DATA``: heap and private writable mappings, where Arrow's and numpy's buffers live) at
CAP_MB above what it holds now, and fits a standard scaler on column ``a`` and a robust scaler on
column ``b`` of the train split file SPLIT_FILE (Parquet):

- ``whole``: reads the two columns whole and fits on them (what a streamed create did before);
  exits 3 on running out of memory, 0 if it fit;
- ``stream``: fits a batch at a time, as a streamed create does; prints a JSON line with the
  statistics and the peak resident set.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: memory_cap
from memory_cap import exit_code_under_cap, vm


def main() -> int:
    path, mode, cap_mb = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    import pyarrow as pa
    import pyarrow.parquet as pq

    from feature_store.core.transformation_fit import fit_transformations_streamed
    from feature_store.core.transformations import (
        fit_transformations,
        robust_scaler,
        standard_scaler,
    )
    from feature_store.local.training_data.transformation_stats import FIT_BATCH_ROWS
    from feature_store.local.training_data.training_data_stream import open_parquet

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    tfs = [standard_scaler("a"), robust_scaler("b")]
    schema = open_parquet(path).schema_arrow

    def whole(rows: int | None = None) -> dict:
        table = (pq.read_table(path, columns=["a", "b"]) if rows is None
                 else pq.ParquetFile(path).read_row_group(0, columns=["a", "b"]).slice(0, rows))
        return fit_transformations(tfs, table.to_pandas())

    def streamed(rows: int | None = None) -> dict:
        def batches():
            for batch in open_parquet(path).iter_batches(batch_size=FIT_BATCH_ROWS,
                                                         columns=["a", "b"]):
                yield batch if rows is None else batch.slice(0, rows)
                if rows is not None:
                    return
        return fit_transformations_streamed(tfs, schema, batches)

    whole(1_000), streamed(1_000)  # load and start everything
    base = vm("VmData")
    limit = base + cap_mb * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if mode == "whole":
        return exit_code_under_cap(whole, "whole")
    stats = streamed()
    print(json.dumps({"stats": stats, "rss_peak_mib": vm("VmHWM") / 2**20}), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
