"""The manual builds with ``mkdocs build --strict``: a broken link, anchor, page left out of the
navigation or API reference fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_manual_builds_strict(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    # the API reference is generated from the docstrings, not left empty
    errors = (site / "reference" / "errors" / "index.html").read_text()
    assert 'id="fstrain.kernel.errors.FeatureStoreError"' in errors
    assert 'id="fstrain.login"' in (site / "reference" / "fstrain" / "index.html").read_text()

