"""What the memory-cap test workers share (each runs as a child process whose data segment is
capped with ``RLIMIT_DATA``): reading the segment's size and telling running out of memory from
other failures."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any


def vm(key: str = "VmData") -> int:
    """A /proc/self/status figure in bytes (VmData: the data segment, what RLIMIT_DATA caps;
    VmHWM: the peak resident set)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the process ran out of memory (DuckDB, Arrow and the store wrap
    MemoryError in messages of their own; a thread pool that cannot map a new thread's stack
    under the cap — anonymous mappings count towards RLIMIT_DATA — says "can't start new
    thread", which happens first when the machine runs the read slowly)."""
    text = f"{type(exc).__name__}: {exc}".lower()
    return (isinstance(exc, MemoryError) or "out of memory" in text or "memoryerror" in text
            or (isinstance(exc, RuntimeError) and "can't start new thread" in text))


def create_in_memory(fv: Any, data_format: str = "parquet") -> int:
    """A seeded random train/test version of ``fv`` built by the whole-table path."""
    spec = fv._make_spec(False, 1, "random", test_size=0.25)
    version, _ = fv._td.create(spec, seed=1, start_time=None, end_time=None, extra_filter=None,
                               materialize=True, data_format=data_format, description="",
                               statistics_config=None, stream=None)
    return version


def exit_code_under_cap(run: Callable[[], object], what: str) -> int:
    """Run ``run()`` (a read expected to run out under the cap): 3, printing that ``what`` ran
    out of memory, when it does; 0 when it finishes; any other error propagates."""
    try:
        run()
    except Exception as exc:  # Arrow's, DuckDB's and the store's out-of-memory errors
        if not out_of_memory(exc):
            raise
        print(f"{what}: out of memory ({type(exc).__name__})", flush=True)
        return 3
    return 0
