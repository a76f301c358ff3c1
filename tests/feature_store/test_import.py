"""``import feature_store`` stays fast: heavy libraries load only when used."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pandas", "pyarrow", "duckdb", "deltalake", "great_expectations", "torch", "xgboost")


def test_import_loads_no_heavy_library():
    code = (
        "import sys, feature_store; "
        "p = feature_store.login(root=sys.argv[1]); p.get_feature_store(); "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, "/tmp/fstrain-import-check"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_import_touches_no_global_rng():
    code = (
        "import random; random.seed(123); a = random.random(); random.seed(123); "
        "import feature_store, model_registry, validation; b = random.random(); print(a == b)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
