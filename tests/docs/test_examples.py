"""Every ```python block of the README and of the manual (docs/) runs as written.

A page's blocks run in order in one namespace, like a notebook, against a fresh store root: the
path ``"/tmp/fstrain-example"`` is replaced by a temporary folder, and the working directory is
a temporary folder too. A page that continues from Getting started says so with
``<!-- examples: after getting-started.md -->``; its blocks run in a copy of that page's
namespace, whose store is built once per session. Shell snippets and code that cannot run here
(a cluster login) use another fence.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
STORE = '"/tmp/fstrain-example"'
BASE = "getting-started.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
AFTER = re.compile(r"<!-- examples: after (\S+) -->")


def blocks(path: Path) -> list[str]:
    """The ```python blocks of one page, in order."""
    return FENCE.findall(path.read_text())


def run_page(path: Path, namespace: dict[str, Any], store: Path) -> None:
    """Execute the page's blocks in ``namespace``, with the example store path replaced."""
    for n, code in enumerate(blocks(path), start=1):
        code = code.replace(STORE, repr(str(store)))
        exec(compile(code, f"{path.relative_to(ROOT)} (block {n})", "exec"), namespace)  # noqa: S102 - our own documentation


PAGES = [ROOT / "README.md"] + sorted(p for p in DOCS.rglob("*.md") if blocks(p))


@pytest.fixture(scope="session")
def getting_started(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Getting started's namespace after its examples ran (the store other pages continue on)."""
    work = tmp_path_factory.mktemp("docs-examples")
    namespace: dict[str, Any] = {}
    with contextlib.chdir(work):
        run_page(DOCS / BASE, namespace, work / "store")
    return namespace


def test_the_readme_and_getting_started_have_examples():
    assert blocks(ROOT / "README.md"), "README has no python example"
    assert blocks(DOCS / BASE), f"{BASE} has no python example"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page: Path, request: pytest.FixtureRequest, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if page == DOCS / BASE:
        request.getfixturevalue("getting_started")  # runs the page once for the session
        return
    after = AFTER.findall(page.read_text())
    if not after:
        run_page(page, {}, tmp_path / "store")
        return
    assert after == [BASE], f"{page.name}: examples can continue only from {BASE}, got {after}"
    run_page(page, dict(request.getfixturevalue("getting_started")), tmp_path / "store")
