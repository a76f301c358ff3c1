"""The optional extras: every install hint the product prints names an extra that exists, and
`all` (what `make install` uses) holds every extra but the job environment's and dev."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("fstrain", "feature_store", "model_registry", "validation", "feature_views", "pipelines")
NOT_IN_ALL = {"all", "dev", "hopsworks-job"}  # hopsworks-job swaps in the SDK's deltalake fork


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"]


def _hints() -> set[tuple[str, str]]:
    found = set()
    files = [p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py")] + [ROOT / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))  # the manual
    for path in files:
        for group in re.findall(r"fstrain\[([a-z0-9,-]+)\]", path.read_text()):
            found.update((name, str(path.relative_to(ROOT))) for name in group.split(","))
    return found


def test_every_install_hint_names_a_defined_extra():
    extras = _extras()
    hints = _hints()
    assert hints, "no install hints found: the scan is broken"
    unknown = sorted(f"{name} ({where})" for name, where in hints if name not in extras)
    assert not unknown, f"install hints naming no extra: {unknown}"


def test_all_holds_every_extra_and_make_installs_it():
    extras = _extras()
    (entry,) = extras["all"]
    inside = set(re.fullmatch(r"fstrain\[([a-z0-9,-]+)\]", entry).group(1).split(","))
    assert inside == set(extras) - NOT_IN_ALL
    assert "'.[dev,all]'" in (ROOT / "Makefile").read_text()
