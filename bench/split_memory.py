"""Split assignment out of core: CPU time and peak anonymous memory of the streamed stratified,
group and random splits (``feature_store.core.split_streams``) against
``assign_split_codes`` on the whole column, for ``--rows`` rows.

Columns (int64 in an Arrow array, read as ``--batch-rows`` batches through ``to_pandas``, or
with ``--arrow`` as the Arrow slices themselves): a 2-class label, a 1000-class label, a 100k-group column (and
with ``--strings`` the 1000-class label and the groups as strings). The streamed splits take
their O(rows) arrays from ``np.memmap`` files in a temporary folder; the in-memory one gathers
the column whole (``to_pandas``) and assigns it.

Each run is a fresh child process. Peak anonymous memory is ``RssAnon`` of ``/proc/self/status``
sampled every 2 ms, minus its value once the Arrow column is built (the column itself is not
counted). The codes of both are compared (they must be equal, else the run fails).

    python bench/split_memory.py [--rows 10000000] [--batch-rows 1000000] [--strings] [--arrow]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

CASES = {"2-class": ("stratified", 2), "1000-class": ("stratified", 1000),
         "100k-group": ("group", 100_000), "random": ("random", 0)}


def _rss_anon() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


class _Peak:
    """The largest RssAnon seen while it runs, sampled in a thread."""

    def __enter__(self) -> Self:
        self.peak, self._stop = _rss_anon(), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss_anon())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_anon())


def child(case: str, method: str, rows: int, batch_rows: int, strings: bool, arrow: bool,
          out: str) -> None:
    """One measured run; writes its figures and the codes' file to ``out``."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from feature_store.core.split_streams import (
        group_split_codes_streamed,
        random_split_codes,
        stratified_split_codes_streamed,
    )
    from feature_store.core.splits import assign_split_codes, make_split_spec

    strategy, distinct = CASES[case]
    rng = np.random.default_rng(0)
    values = rng.integers(0, max(distinct, 1), rows)
    if case == "2-class":
        values = (rng.random(rows) < 0.1).astype(np.int64)
    column = pa.array(values.astype(str).astype(object) if strings and distinct > 2 else values)
    del values
    extra = {"group_column": "k"} if strategy == "group" else {}
    spec = make_split_spec(strategy, seed=1, test_size=0.2, **extra)
    scratch = tempfile.mkdtemp(dir=Path(out).parent)
    made: list[int] = []

    def alloc(n: int, dtype: Any) -> np.ndarray:
        made.append(n)
        return np.memmap(Path(scratch) / f"{len(made)}", dtype=dtype, mode="w+", shape=(n,))

    def read() -> Any:
        batches = (column.slice(i, batch_rows) for i in range(0, rows, batch_rows))
        return batches if arrow else (b.to_pandas() for b in batches)

    base = _rss_anon()
    cpu, wall = time.process_time(), time.perf_counter()
    with _Peak() as peak:
        if method == "in-memory":
            frame = pd.DataFrame({"k": column.to_pandas()}) if strategy != "random" else \
                pd.DataFrame(index=pd.RangeIndex(rows))
            codes = assign_split_codes(frame, spec, label_column="k")
            del frame
        elif strategy == "random":
            codes = random_split_codes(rows, spec, alloc=alloc)
        elif strategy == "stratified":
            codes = stratified_split_codes_streamed(read, spec, "k", rows=rows, alloc=alloc)
        else:
            codes = group_split_codes_streamed(read, spec, rows=rows, alloc=alloc)
    figures = {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
               "peak_anon": peak.peak - base}
    np.save(out + ".npy", np.asarray(codes))
    Path(out).write_text(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--batch-rows", type=int, default=1_000_000)
    parser.add_argument("--strings", action="store_true")
    parser.add_argument("--arrow", action="store_true", help="stream Arrow arrays, not to_pandas")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "METHOD"))
    parser.add_argument("--out")
    a = parser.parse_args()
    if a.child:
        child(*a.child, a.rows, a.batch_rows, a.strings, a.arrow, a.out)
        return
    import numpy as np

    kind = "string" if a.strings else "int64"
    source = "Arrow arrays" if a.arrow else "to_pandas Series"
    print(f"{a.rows:,} rows, {a.batch_rows:,}-row batches of {source}, {kind} keys")
    print(f"{'case':<12}{'method':<11}{'CPU-s':>7}{'wall-s':>8}{'peak anon MB':>14}{'B/row':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            got = {}
            for method in ("in-memory", "streamed"):
                out = str(Path(tmp) / f"{case}-{method}")
                subprocess.run([sys.executable, __file__, "--child", case, method, "--rows",
                                str(a.rows), "--batch-rows", str(a.batch_rows), "--out", out]
                               + (["--strings"] if a.strings else [])
                               + (["--arrow"] if a.arrow else []), check=True)
                f = json.loads(Path(out).read_text())
                got[method] = (f, np.load(out + ".npy"))
                print(f"{case:<12}{method:<11}{f['cpu_s']:>7.2f}{f['wall_s']:>8.2f}"
                      f"{f['peak_anon'] / 2**20:>14.1f}{f['peak_anon'] / a.rows:>7.2f}")
            if not np.array_equal(got["in-memory"][1], got["streamed"][1]):
                raise SystemExit(f"{case}: the streamed codes differ from the in-memory ones")
            cpu = got["streamed"][0]["cpu_s"] / got["in-memory"][0]["cpu_s"]
            mem = got["streamed"][0]["peak_anon"] / max(got["in-memory"][0]["peak_anon"], 1)
            print(f"{case:<12}streamed / in-memory: CPU {cpu:.2f}x, peak anon {mem:.3f}x")


if __name__ == "__main__":
    main()
