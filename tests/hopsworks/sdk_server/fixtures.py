"""Response templates from the SDK repository's backend fixtures (vendored, Apache-2.0).

``FSTRAIN_HOPSWORKS_FIXTURES`` names a folder of recorded fixture files (written by
``tests/hopsworks/record_fixtures.py`` from a real cluster); a template found there is used
instead of the vendored one, so the same tests replay a cluster's own answers.
"""

from __future__ import annotations

import copy
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@cache
def _load(folder: Path, name: str) -> dict[str, Any]:
    path = folder / f"{name}_fixtures.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def template(name: str, key: str = "get") -> Any:
    """A deep copy of ``<name>_fixtures.json[key]["response"]`` (recorded first, if set)."""
    recorded = os.environ.get("FSTRAIN_HOPSWORKS_FIXTURES")
    for folder in ([Path(recorded)] if recorded else []) + [FIXTURES]:
        entry = _load(folder, name).get(key)
        if entry is not None:
            return copy.deepcopy(entry["response"])
    raise KeyError(f"no fixture {name}[{key!r}] in {FIXTURES}")


def envelope(name: str, items: list[Any], key: str = "get") -> dict[str, Any]:
    """A ``{count, items}`` list answer shaped like the fixture's list answer."""
    body = template(name, key)
    if not isinstance(body, dict) or "items" not in body:
        raise KeyError(f"fixture {name}[{key}] is not a count/items envelope")
    body["items"] = items
    body["count"] = len(items)
    return body
