"""What each third-party library costs to import, against the interpreter's own start.

For every candidate (the libraries the product imports, lazily or not), ``python -X importtime
-c 'import X'`` runs in a fresh subprocess of this interpreter, three times, interleaved with
``python -c pass`` (the baseline: the interpreter and ``site`` starting, nothing else); one
unmeasured run first warms the file cache and the bytecode. Reported per library, medians of
the three: the library's own cumulative ``-X importtime`` (what importing it costs inside a
process) and the wall time less the baseline's (that plus process teardown). The ratio is the
importtime over the interpreter start (the baseline's median over all runs: on a shared,
loaded box one baseline beside one library is too noisy to divide by).

This is the measurement behind ``HEAVY_LIBRARIES`` in ``tests/test_architecture.py``: a library
may be imported inside a function (lazily) only if it is listed there, and it is listed only if
its import costs at least ``--threshold`` interpreter starts (``--heavy-only`` prints just those,
ready for the tuple).

``--tables`` measures the other side of the rule, the tables of our own modules loaded only
when chosen (``LAZY_MODULE_TABLES`` in the architecture test: the commands of ``fstrain``, the
composition root's backend modules): what importing the module holding each table costs, and
what each entry costs imported on its own (a command's start is the root's plus its module's).

    python bench/import_cost.py [--repeat 3] [--threshold 2] [--heavy-only] [LIBRARY ...]
    python bench/import_cost.py --tables [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

#: Every third-party library the product imports somewhere (inside functions or at the top),
#: plus two cheap standard-library controls. ``matplotlib.pyplot`` is measured on its own: the
#: plotting module imports only the object-oriented part.
CANDIDATES = (
    "torch", "ray", "pyspark", "pyspark.sql", "duckdb", "deltalake", "deltalake.schema",
    "pyarrow", "pyarrow.parquet", "pandas", "polars", "numpy", "scipy", "scipy.stats",
    "sklearn", "xgboost", "lightgbm", "catboost", "great_expectations", "matplotlib",
    "matplotlib.pyplot", "shap", "cleanlab", "mlflow", "transformers", "peft", "tokenizers",
    "safetensors", "safetensors.numpy", "safetensors.torch", "jax", "flax", "optax", "keras",
    "onnx", "onnxruntime", "skl2onnx", "onnxmltools", "skops", "skops.io", "joblib", "gguf",
    "PIL", "PIL.Image", "hopsworks", "hsfs", "hsml", "rich", "rich.console", "rich.table",
    "rich.progress", "yaml", "cryptography.hazmat.primitives.asymmetric.ed25519", "pydantic",
    "jinja2", "uvicorn", "requests", "httpx", "starlette", "starlette.applications",
    "itsdangerous", "argon2", "typer", "json", "sqlite3",
)


def _run(code: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, the library's cumulative ``-X importtime`` seconds) of one fresh run."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - started
    name = code.removeprefix("import ")
    cumulative = [int(line.split("|")[1]) for line in done.stderr.splitlines()
                  if line.startswith("import time:") and line.split("|")[-1].strip() == name]
    return wall, (cumulative[-1] / 1e6 if cumulative and code != "pass" else 0.0)


def measure(library: str, repeat: int) -> tuple[float, float, float]:
    """Medians of (import wall seconds, its ``-X importtime`` seconds, baseline wall seconds),
    the import and the baseline interleaved in this process."""
    env = {**os.environ, "KERAS_BACKEND": os.environ.get("KERAS_BACKEND", "torch")}
    code = f"import {library}"
    _run(code, env)
    imports: list[tuple[float, float]] = []
    baselines: list[float] = []
    for i in range(repeat):
        order = (code, "pass") if i % 2 == 0 else ("pass", code)
        for snippet in order:
            wall, cumulative = _run(snippet, env)
            if snippet == "pass":
                baselines.append(wall)
            else:
                imports.append((wall, cumulative))
    return (statistics.median(w for w, _ in imports), statistics.median(c for _, c in imports),
            statistics.median(baselines))


def _installed(library: str) -> bool:
    try:
        return importlib.util.find_spec(library) is not None
    except (ImportError, ValueError):
        return False


#: module -> its table of our modules loaded when chosen (tests/test_architecture.py's
#: LAZY_MODULE_TABLES): a value is ``module``, ``module:object`` or a tuple starting with one.
LAZY_TABLES = {"fstrain.cli.app": "COMMANDS", "fstrain.project": "BACKEND_MODULES"}


def measure_tables(repeat: int) -> None:
    """Print what each module holding a lazy table costs, and each entry's module alone."""
    for holder, table in LAZY_TABLES.items():
        entries = getattr(importlib.import_module(holder), table).values()
        modules = sorted({(e[0] if isinstance(e, tuple) else e).partition(":")[0] for e in entries})
        _, own, start = measure(holder, repeat)
        print(f"{holder} ({table}): -X importtime {own * 1e3:.0f} ms "
              f"(interpreter start beside it: {start * 1e3:.0f} ms)", flush=True)
        for module in modules:
            _, cumulative, _ = measure(module, repeat)
            print(f"    {module:45s} {cumulative * 1e3:7.0f} ms alone", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libraries", nargs="*", default=list(CANDIDATES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threshold", type=float, default=2.0,
                        help="heavy: importing costs at least this many interpreter starts")
    parser.add_argument("--heavy-only", action="store_true")
    parser.add_argument("--tables", action="store_true",
                        help="measure the tables of our modules loaded when chosen instead")
    args = parser.parse_args(argv)
    if args.tables:
        measure_tables(args.repeat)
        return

    rows = []
    starts: list[float] = []
    for library in args.libraries:
        if not _installed(library):
            print(f"{library:22s} not installed", flush=True)
            continue
        try:
            seconds, cumulative, baseline = measure(library, args.repeat)
        except subprocess.CalledProcessError:
            print(f"{library:22s} fails to import", flush=True)
            continue
        starts.append(baseline)
        wall_ms, own_ms = max(seconds - baseline, 0.0) * 1e3, cumulative * 1e3
        rows.append((library, wall_ms, own_ms))
        if not args.heavy_only:
            print(f"{library:22s} wall {wall_ms:7.0f} ms  -X importtime {own_ms:7.0f} ms  "
                  f"(interpreter start beside it: {baseline * 1e3:.0f} ms)", flush=True)
    if not rows:
        return
    start_ms = statistics.median(starts) * 1e3
    print(f"\ninterpreter start (python -c pass, median over all runs): {start_ms:.0f} ms")
    print(f"heavy: -X importtime >= {args.threshold:g}x the interpreter start "
          f"({args.threshold * start_ms:.0f} ms)")
    for library, wall_ms, own_ms in sorted(rows, key=lambda r: -r[2]):
        mark = own_ms >= args.threshold * start_ms
        if mark or not args.heavy_only:
            print(f'    "{library}",  # {own_ms:.0f} ms, {own_ms / start_ms:.1f}x'
                  f' (wall {wall_ms:.0f} ms){"" if mark else "  -- not heavy"}')


if __name__ == "__main__":
    main()
