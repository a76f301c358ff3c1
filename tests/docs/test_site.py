"""The manual builds with ``mkdocs build --strict`` (a broken link, anchor, page left out of the
navigation or API reference fails), and the README stays a short entry point into it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_LIMIT = 12_000  # bytes: what it is, the two commands, one example, links into docs/


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


def test_the_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; keep it under {README_LIMIT} and move the rest into docs/"


def test_the_readme_keeps_the_two_commands():
    text = README.read_text()
    assert "make demo" in text and "make test" in text


def test_the_readmes_links_resolve():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [t for t in targets if "://" not in t]
    assert local, "README links nowhere"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README links to missing files: {missing}"
