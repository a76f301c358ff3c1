"""Subprocess of the bounded-memory test of csv/jsonl rewriting (not a test module itself).

    python text_rewrite_cap_worker.py PARQUET FORMAT whole|stream CAP_MB

Warms up on a small file, caps its data segment (``RLIMIT_DATA``) at CAP_MB above what it holds
now, then turns the Parquet file PARQUET into FORMAT text:

- ``whole``: as the whole-table writer did (read the table, encode it at once); exits 3 on
  MemoryError;
- ``stream``: :func:`text_split_writer.rewrite_from_parquet`, then the content hash of the text
  parsed back a block at a time; prints the file sha256 and the content hash.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: memory_cap
from memory_cap import vm


def _stream(source: Path, data_format: str, keep: bool) -> dict[str, str]:
    import shutil

    import pyarrow.parquet as pq

    from feature_store.local.readers import text_split_reader as tr
    from feature_store.local.training_data import text_split_writer as tw

    copy = source.with_name(f"{source.stem}.copy.parquet")
    shutil.copyfile(source, copy)  # the rewrite consumes its input
    schema = pq.read_schema(source)
    target = source.with_suffix(f".{data_format}")
    digest = tw.rewrite_from_parquet(copy, target, data_format)
    content = tr.content_hash(target, data_format, schema, "test")
    if not keep:
        target.unlink()
    return {"file_sha256": digest, "content_hash": content}


def main() -> int:
    source, data_format, mode, cap_mb = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    import pyarrow as pa
    import pyarrow.parquet as pq

    from feature_store.local.training_data import text_split_writer as tw

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    small = source.with_name("warm.parquet")
    pq.write_table(pq.ParquetFile(source).read_row_group(0).slice(0, 500), small)
    _stream(small, data_format, keep=False)  # load and start everything
    limit = vm() + int(cap_mb) * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if mode == "whole":
        try:
            text = tw.encode(pq.read_table(source), data_format, header=True)
        except MemoryError:
            print("whole: MemoryError", flush=True)
            return 3
        print(f"whole: fit ({len(text)} bytes)", flush=True)
        return 0
    print(json.dumps(_stream(source, data_format, keep=True)), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
