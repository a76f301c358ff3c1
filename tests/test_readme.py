"""The README's API example runs as written (against a fresh store root)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    code = blocks[0].replace('"/tmp/fstrain-example"', repr(str(tmp_path / "store")))
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - our own documentation
